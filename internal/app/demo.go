package app

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/workflow"
)

// demoCmd tells the whole story from nothing, in a temporary folder: three
// tickets, one that waits for a team lead, its approval and exactly one refund,
// a rejection, and two real crashes (the process kills itself) with their recovery.
func (c *cli) demoCmd() *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Tell the story on a fresh practice shop, in a temporary folder",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "signoff-demo-")
			if err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			if !keep {
				defer os.RemoveAll(dir)
			}
			d := &demoStory{cli: c, dir: dir, out: c.out}
			if err := d.tell(c.ctx); err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			if keep {
				fmt.Fprintf(c.out, "\nThe files are kept in %s (try: %s)\n", dir, shellLine("signoff", "--db", filepath.Join(dir, "signoff.db"), "--shop", filepath.Join(dir, "shop.db"), "runs"))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary folder to look around afterwards")
	return cmd
}

type demoStory struct {
	cli *cli
	dir string
	out io.Writer
}

func (d *demoStory) opts() options {
	cfg := d.cli.opts.config
	if cfg != "" {
		// The crashing children run in the demo's folder.
		if abs, err := filepath.Abs(cfg); err == nil {
			cfg = abs
		}
	}
	return options{db: filepath.Join(d.dir, "signoff.db"), shop: filepath.Join(d.dir, "shop.db"), config: cfg, quietBuiltin: true}
}

func (d *demoStory) say(format string, args ...any) {
	fmt.Fprintf(d.out, format+"\n", args...)
}

// signoff runs one command of this program in-process against the demo's files,
// prints what it printed (indented) and returns its exit code and output.
func (d *demoStory) signoff(ctx context.Context, args ...string) (int, string) {
	o := d.opts()
	full := append([]string{"--db", o.db, "--shop", o.shop}, args...)
	if o.config != "" {
		full = append([]string{"--config", o.config}, full...)
	}
	var out bytes.Buffer
	c := &cli{ctx: ctx, getenv: func(string) string { return "" }, stdin: strings.NewReader(""), out: &out, errOut: &out,
		opts: options{quietBuiltin: true}}
	code := c.execute(full)
	d.say("$ %s", shellLine(append([]string{"signoff"}, args...)...))
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		d.say("    %s", line)
	}
	d.say("    (exit %d)", code)
	return code, out.String()
}

// crash runs one command in a child process that kills itself at failpoint.
func (d *demoStory) crash(ctx context.Context, failpoint string, args ...string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program: %w", err)
	}
	o := d.opts()
	full := append([]string{"--db", o.db, "--shop", o.shop}, args...)
	if o.config != "" {
		full = append([]string{"--config", o.config}, full...)
	}
	cmd := exec.CommandContext(ctx, self, full...)
	cmd.Env = append(os.Environ(), "SIGNOFF_FAILPOINT="+failpoint)
	// In the demo's folder, where no signoff.yaml can stand in for the built-in config.
	cmd.Dir = d.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	d.say("$ SIGNOFF_FAILPOINT=%s %s", shellQuote(failpoint), shellLine(append([]string{"signoff"}, args...)...))
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			d.say("    (the process was killed at %s)", failpoint)
			return nil
		}
	}
	return fmt.Errorf("the process should have died at %s, but: %v\n%s", failpoint, err, out.String())
}

func firstWord(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(s)
}

func (d *demoStory) tell(ctx context.Context) error {
	d.say("signoff demo: a practice shop, a recorded agent, and a team lead who approves.")
	d.say("Everything lives in %s; nothing leaves this machine.\n", d.dir)

	d.say("1. A small refund: policy lets it through without a person.")
	if code, _ := d.signoff(ctx, "run", "T-90104"); code != exitDone {
		return fmt.Errorf("T-90104 ended with exit %d", code)
	}

	d.say("\n2. A double charge of 119.00 CAD. The agent works in steps and is checkpointed after each;")
	d.say("   this process is killed right after step 1.")
	if err := d.crash(ctx, "after-step-1", "run", "T-65273"); err != nil {
		return err
	}
	_, out := d.signoff(ctx, "runs", "--status", "running")
	runID := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "T-65273") {
			runID = strings.Fields(line)[0]
		}
	}
	if runID == "" {
		return errors.New("the crashed run of T-65273 is not listed")
	}
	d.say("   A new process resumes at step 2 (no model call is repeated), and the refund waits for a team lead:")
	if code, _ := d.signoff(ctx, "resume", runID); code != exitWaiting {
		return fmt.Errorf("T-65273 should wait for approval, exit %d", code)
	}
	d.signoff(ctx, "trace", runID)

	d.say("\n3. A cracked planter: reship it and send a free return label. The team lead says no.")
	code, out := d.signoff(ctx, "run", "T-90103")
	if code != exitWaiting {
		return fmt.Errorf("T-90103 should wait for approval, exit %d", code)
	}
	planter := firstWord(out)
	d.say("   The requester cannot approve, and an agent has no such role:")
	if code, _ := d.signoff(ctx, "approve", planter, "--as", "agent:resolver"); code != exitRefused {
		return fmt.Errorf("the agent's approval should be refused, exit %d", code)
	}
	if code, _ := d.signoff(ctx, "reject", planter, "--as", "U0LEAD0001", "--reason", "photo shows the box only; ask for a picture of the planter"); code != exitEnded {
		return fmt.Errorf("T-90103 should be rejected, exit %d", code)
	}

	d.say("\n4. In Slack, the team lead sees this message:")
	if err := d.slackClick(ctx, runID); err != nil {
		return err
	}
	d.say("   The worker that runs approved actions is killed after the shop refunded,")
	d.say("   before signoff wrote the receipt: the worst moment.")
	if err := d.crash(ctx, "after-effect", "resume", runID); err != nil {
		return err
	}
	d.signoff(ctx, "shop", "changes")
	d.say("   On resume signoff asks the shop's register about the idempotency key, finds the refund,")
	d.say("   and records it instead of refunding again:")
	if code, _ := d.signoff(ctx, "resume", runID); code != exitDone {
		return fmt.Errorf("T-65273 should be done, exit %d", code)
	}
	d.say("   Approving again changes nothing:")
	if code, _ := d.signoff(ctx, "approve", runID, "--as", "U0LEAD0002"); code != exitRefused {
		return fmt.Errorf("a second approval should be refused, exit %d", code)
	}
	_, out = d.signoff(ctx, "shop", "changes")
	if n := strings.Count(out, "PAY-507862-2"); n != 1 {
		return fmt.Errorf("want exactly one refund of PAY-507862-2, the shop lists %d", n)
	}

	d.say("\n5. Every checkpoint and the audit log are hash chained:")
	if code, _ := d.signoff(ctx, "verify"); code != exitDone {
		return errors.New("verify found damage")
	}
	d.say("\nThe story holds: one refund for the double charge, nothing for the rejected ticket,")
	d.say("and two crashes that lost nothing and repeated nothing. Tickets: %s.", strings.Join(demo.Tickets(), ", "))
	return nil
}

// Demo Slack workspace: the ids a click must carry, and the secret it is signed with.
const (
	demoAppID  = "A0DEMOAPP1"
	demoTeamID = "T0DEMOSHOP"
	demoSecret = "demo-signing-secret"
)

// slackClick shows the approval message signoff would post for a run, then sends
// the click that approves it, signed as Slack signs it, through the same handler
// `signoff serve` uses.
func (d *demoStory) slackClick(ctx context.Context, runID string) error {
	a, err := openApp(ctx, d.opts(), func(string) string { return "" }, io.Discard, nil)
	if err != nil {
		return err
	}
	defer a.Close()
	v, err := a.engine.Get(ctx, runID)
	if err != nil {
		return err
	}
	blocks, _ := bot.NewRenderer(a.engine, a.engine.Roles(), nil, "", workflow.SystemClock{})(v, v.Requests[len(v.Requests)-1])
	for _, line := range strings.Split(strings.TrimRight(bot.Preview(blocks), "\n"), "\n") {
		d.say("    │ %s", line)
	}
	srv, err := bot.NewServer(bot.ServerConfig{Engine: a.engine, SigningSecret: demoSecret, AppID: demoAppID, TeamID: demoTeamID, Slack: demoSlack{d}})
	if err != nil {
		return err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	srv.Register(e)
	hs := httptest.NewServer(e)
	defer hs.Close()

	payload, err := json.Marshal(map[string]any{
		"type": "block_actions", "api_app_id": demoAppID, "trigger_id": "demo.trigger",
		"user":      map[string]any{"id": "U0LEAD0001", "name": "grace", "team_id": demoTeamID},
		"team":      map[string]any{"id": demoTeamID},
		"container": map[string]any{"type": "message", "channel_id": "C0APPROVALS", "message_ts": "1796029201.000200"},
		"channel":   map[string]any{"id": "C0APPROVALS"},
		"actions": []any{map[string]any{"type": "button", "action_id": bot.ActionApprove,
			"value": bot.Ref{RunID: v.ID, RequestID: v.Gate.RequestID, Fingerprint: v.Gate.Fingerprint}.String()}},
	})
	if err != nil {
		return err
	}
	body := "payload=" + url.QueryEscape(string(payload))
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(demoSecret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	sig := "v0=" + hex.EncodeToString(mac.Sum(nil))
	d.say("   Grace (U0LEAD0001, team lead) clicks Approve. Slack sends a request signed with the app's secret:")
	d.say("    POST /slack/interactions  X-Slack-Request-Timestamp: %s  X-Slack-Signature: %s…", ts, sig[:19])
	d.say("    payload: block_actions, button %s, value %s…", bot.ActionApprove, firstN(bot.Ref{RunID: v.ID, RequestID: v.Gate.RequestID, Fingerprint: v.Gate.Fingerprint}.String(), 60))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/slack/interactions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", sig)
	start := time.Now()
	resp, err := hs.Client().Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	after, err := a.engine.Get(ctx, runID)
	if err != nil {
		return err
	}
	d.say("    → %d in %s; signoff verified the signature, the role, the deadline and the fingerprint,", resp.StatusCode, time.Since(start).Round(time.Millisecond))
	d.say("      and recorded the decision: the run is now %s.", after.Status)
	if resp.StatusCode != http.StatusOK || after.Status != workflow.StatusExecuting {
		return fmt.Errorf("the click should approve the run, got %d and %s", resp.StatusCode, after.Status)
	}
	return nil
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// demoSlack stands in for Slack's Web API in the demo: what the bot would show
// the clicker is printed instead.
type demoSlack struct{ d *demoStory }

func (s demoSlack) OpenView(context.Context, string, bot.ModalView) error { return nil }

func (s demoSlack) PostEphemeral(_ context.Context, _, user string, _ []bot.Block, text string) error {
	s.d.say("    (to %s only) %s", user, text)
	return nil
}
