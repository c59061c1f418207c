// Package demostory is the story `signoff demo` tells: three tickets on the
// practice shop, an approval with exactly one refund, a rejection, an
// approval clicked as Slack sends it, and two real crashes with their
// recovery. It is told through Program, signoff itself (internal/app runs
// the commands in process and the crashes in a child), and checks each exit
// code as a script would; it is a package of its own so that the commands
// hold only the wiring.
package demostory

import (
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
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/internal/app/exitcode"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// Program is signoff as the story runs it, against the demo's files.
type Program interface {
	// Signoff runs one command in process, prints it and what it printed,
	// and returns its exit code and its output.
	Signoff(ctx context.Context, args ...string) (int, string)
	// Crash runs one command in a child process that kills itself at
	// failpoint, and prints it; an error says it did not die there.
	Crash(ctx context.Context, failpoint string, args ...string) error
	// Engine opens the engine on the demo's files; closing the closer
	// releases them.
	Engine(ctx context.Context) (*workflow.Engine, io.Closer, error)
}

// story is one telling: what it runs, where its files are, and where it
// prints.
type story struct {
	p   Program
	dir string
	out io.Writer
}

// Tell tells the story with p on the files in dir, printing it on out.
func Tell(ctx context.Context, p Program, dir string, out io.Writer) error {
	return (&story{p: p, dir: dir, out: out}).tell(ctx)
}

func (d *story) say(format string, args ...any) {
	fmt.Fprintf(d.out, format+"\n", args...)
}

func (d *story) signoff(ctx context.Context, args ...string) (int, string) {
	return d.p.Signoff(ctx, args...)
}

func (d *story) crash(ctx context.Context, failpoint string, args ...string) error {
	return d.p.Crash(ctx, failpoint, args...)
}

func firstWord(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(s)
}

func (d *story) tell(ctx context.Context) error {
	d.say("signoff demo: a practice shop, a recorded agent, and a team lead who approves.")
	d.say("Everything lives in %s; nothing leaves this machine.\n", d.dir)

	d.say("1. A small refund: policy lets it through without a person.")
	if code, _ := d.signoff(ctx, "run", "T-90104"); code != exitcode.Done {
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
	if code, _ := d.signoff(ctx, "resume", runID); code != exitcode.Waiting {
		return fmt.Errorf("T-65273 should wait for approval, exit %d", code)
	}
	d.signoff(ctx, "trace", runID)

	d.say("\n3. A cracked planter: reship it and send a free return label. The team lead says no.")
	code, out := d.signoff(ctx, "run", "T-90103")
	if code != exitcode.Waiting {
		return fmt.Errorf("T-90103 should wait for approval, exit %d", code)
	}
	planter := firstWord(out)
	d.say("   The requester cannot approve, and an agent has no such role:")
	if code, _ := d.signoff(ctx, "approve", planter, "--as", "agent:resolver"); code != exitcode.Refused {
		return fmt.Errorf("the agent's approval should be refused, exit %d", code)
	}
	if code, _ := d.signoff(ctx, "reject", planter, "--as", "U0LEAD0001", "--reason", "photo shows the box only; ask for a picture of the planter"); code != exitcode.Ended {
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
	if code, _ := d.signoff(ctx, "resume", runID); code != exitcode.Done {
		return fmt.Errorf("T-65273 should be done, exit %d", code)
	}
	d.say("   Approving again changes nothing:")
	if code, _ := d.signoff(ctx, "approve", runID, "--as", "U0LEAD0002"); code != exitcode.Refused {
		return fmt.Errorf("a second approval should be refused, exit %d", code)
	}
	_, out = d.signoff(ctx, "shop", "changes")
	if n := strings.Count(out, "PAY-507862-2"); n != 1 {
		return fmt.Errorf("want exactly one refund of PAY-507862-2, the shop lists %d", n)
	}

	d.say("\n5. Every checkpoint and the audit log are hash chained:")
	if code, _ := d.signoff(ctx, "verify"); code != exitcode.Done {
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
func (d *story) slackClick(ctx context.Context, runID string) error {
	eng, files, err := d.p.Engine(ctx)
	if err != nil {
		return err
	}
	defer files.Close()
	v, err := eng.Get(ctx, runID)
	if err != nil {
		return err
	}
	blocks, _ := bot.NewRenderer(eng, eng.Roles(), nil, "", "", workflow.SystemClock{})(v, v.Requests[len(v.Requests)-1])
	for _, line := range strings.Split(strings.TrimRight(bot.Preview(blocks), "\n"), "\n") {
		d.say("    │ %s", line)
	}
	srv, err := bot.NewServer(bot.ServerConfig{Engine: eng, SigningSecret: demoSecret, AppID: demoAppID, TeamID: demoTeamID, Slack: demoSlack{d}})
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
	after, err := eng.Get(ctx, runID)
	if err != nil {
		return err
	}
	d.say("    → %d in %s; signoff verified the signature, the role, the deadline and the fingerprint,", resp.StatusCode, time.Since(start).Round(time.Millisecond))
	d.say("      and recorded the decision: the run is now %s.", after.Status)
	if resp.StatusCode != http.StatusOK || after.Status != record.StatusExecuting {
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
type demoSlack struct{ d *story }

func (s demoSlack) OpenView(context.Context, string, bot.ModalView) error { return nil }

func (s demoSlack) PostEphemeral(_ context.Context, _, user string, _ []bot.Block, text string) error {
	s.d.say("    (to %s only) %s", user, text)
	return nil
}
