package app

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
)

// slackDevLoop is the whole Slack loop on one machine, each part a process
// of its own: a local Slack (signoff slack dev), and serve posting to it,
// sharing dir's store with the commands the test runs.
type slackDevLoop struct {
	dir, cfg, serveURL string
	dev                *serveChild
}

var localSlackListening = regexp.MustCompile(`local slack: listening on (http://\S+/api/) `)

func startSlackDevLoop(t *testing.T) *slackDevLoop {
	t.Helper()
	dir := t.TempDir()
	dev := startBackground(t, dir, noSlackEnv, "slack", "dev", "--addr", "127.0.0.1:0")
	api := dev.await(t, "the local Slack to listen", localSlackListening)[1]
	cfg := filepath.Join(dir, "signoff.yaml")
	y := string(config.DefaultYAML()) + fmt.Sprintf("\nslack:\n  channel: C0APPROVALS\n  app_id: A0SIGNOFF1\n  team_id: T0SHOP0001\n  api_url: %s\n", api)
	if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServeChild(t, dir, cfg, nil)
	l := &slackDevLoop{dir: dir, cfg: cfg, serveURL: "http://" + srv.addr(t), dev: dev}
	// serve asked the local Slack who the token is before it listened.
	if log := srv.output(); !strings.Contains(log, `msg="slack bot token works" team_id=T0SHOP0001`) {
		t.Fatalf("serve did not check its token with the local Slack:\n%s", log)
	}
	return l
}

// slack runs `signoff slack ARGS --url SERVE` as a separate process with
// serve's signing secret (and env after it), and returns its exit code and output.
func (l *slackDevLoop) slack(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	full := append([]string{"--config", l.cfg, "slack"}, args...)
	full = append(full, "--url", l.serveURL)
	cmd, out, errb := child(t, l.dir, append([]string{"SLACK_SIGNING_SECRET=" + serveSecret}, env...), full...)
	code := 0
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), errb.String()
}

// must runs slack and fails the test unless it exits with want; it returns stdout.
func (l *slackDevLoop) must(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, out, errs := l.slack(t, nil, args...)
	if code != want {
		t.Fatalf("signoff slack %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errs)
	}
	return out
}

// submit submits a proposal (JSON) with the loop's config and returns the run id.
func (l *slackDevLoop) submit(t *testing.T, name, body string) string {
	t.Helper()
	code, out, errs := cliWith(t, l.dir, l.cfg, nil, "submit", proposal(t, l.dir, name, body))
	if code != exitWaiting {
		t.Fatalf("submit %s: exit %d\n%s%s", name, code, out, errs)
	}
	return runIDOf(t, out)
}

// posted waits until the local Slack has printed the approval message of
// run, with its buttons, and returns its ts and its lines.
func (l *slackDevLoop) posted(t *testing.T, run string) (ts, lines string) {
	t.Helper()
	m := l.dev.await(t, "the approval message of "+run, regexp.MustCompile(
		`(?m)^posted C0APPROVALS ts (\S+)\n((?:    .*\n)*?    buttons: \[Approve\] \[Reject\](?: \[Edit\])?    signoff slack click `+regexp.QuoteMeta(run)+` approve\|reject\|edit --as USER\n)`))
	return m[1], m[2]
}

// updated waits until the local Slack has printed an update of the message
// ts whose lines hold want, and returns those lines.
func (l *slackDevLoop) updated(t *testing.T, ts, want string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^updated C0APPROVALS ts ` + regexp.QuoteMeta(ts) + ` \(update \d+\)\n((?:    .*\n)*)`)
	var lines string
	waitFor(t, "the message "+ts+" updated with "+want, func() bool {
		all := re.FindAllStringSubmatch(l.dev.output(), -1)
		if len(all) == 0 {
			return false
		}
		lines = all[len(all)-1][1]
		return strings.Contains(lines, want)
	})
	return lines
}

func (l *slackDevLoop) status(t *testing.T, id string) record.Status {
	t.Helper()
	return showJSON(t, l.dir, id).Status
}

func wantLines(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}

// TestSlackDevLoop is the Slack loop on one machine through the real
// program: signoff slack dev prints the approval message serve posts; slack
// click sends serve Slack's signed block_actions for its buttons (and the
// view_submission of the modal serve opens for reject and edit); serve
// decides, executes, and the local Slack prints the message updated; slack
// command types /runs pending. Refusals are what serve tells the clicker,
// and exit 2.
func TestSlackDevLoop(t *testing.T) {
	t.Parallel()
	l := startSlackDevLoop(t)

	// Approve.
	id := l.submit(t, "refund.json", mustFixture(t, "refund-double-charge.json"))
	ts, msg := l.posted(t, id)
	short := policy.ShortFingerprint(showJSON(t, l.dir, id).Gate.Fingerprint)
	wantLines(t, "the approval message", msg, "    Approval needed: request_refund\n", "    • `amount`: `119`\n",
		"Run `"+id+"` · fingerprint `"+short+"`", "    @U0LEAD0001 @U0LEAD0002 @U0MGR00001\n")
	wantLines(t, "/runs pending", l.must(t, exitDone, "command", "/runs pending", "--as", lead1),
		"serve answered /runs pending (only U0LEAD0001 sees it):\n", id)

	out := l.must(t, exitRefused, "click", id, "approve", "--as", "U0NOBODY01")
	wantLines(t, "a click without a role", out, "clicked Approve on the message of "+id+" (C0APPROVALS ts "+ts+") as U0NOBODY01\n",
		"serve told U0NOBODY01:\n    Nothing changed: U0NOBODY01 holds no role; this needs team_lead or above.\n")
	code, out, errs := l.slack(t, []string{"SLACK_SIGNING_SECRET=not-serves"}, "click", id, "approve", "--as", lead1)
	if code != exitFailed || !strings.Contains(errs, "answered 401 Unauthorized (is SLACK_SIGNING_SECRET the one serve has?)") {
		t.Errorf("a click signed with another secret: exit %d\n%s%s", code, out, errs)
	}
	if s := l.status(t, id); s != record.StatusWaitingApproval {
		t.Fatalf("after refused clicks the run is %s", s)
	}

	out = l.must(t, exitDone, "click", id, "approve", "--as", lead1)
	wantLines(t, "the approval", out, "serve took the click")
	upd := l.updated(t, ts, "    Done: request_refund\n")
	wantLines(t, "the message once done", upd, "*Approved* by @U0LEAD0001 (team_lead)", "    • 1. request_refund: done, receipt `RF-")
	if strings.Contains(upd, "buttons:") {
		t.Errorf("the message of a done run still has buttons:\n%s", upd)
	}
	if s := l.status(t, id); s != record.StatusDone {
		t.Fatalf("approved run is %s", s)
	}
	code, out, errs = l.slack(t, nil, "click", id, "approve", "--as", lead1)
	if code != exitRefused || !strings.Contains(errs, "the local Slack holds no message with buttons for "+id) {
		t.Errorf("a click on a message without buttons: exit %d\n%s%s", code, out, errs)
	}

	// Reject, through the reason modal.
	id = l.submit(t, "reship.json", mustFixture(t, "reship-planter.json"))
	ts, _ = l.posted(t, id)
	code, out, errs = l.slack(t, nil, "click", id, "reject", "--as", lead1)
	if code != exitRefused || !strings.Contains(errs, "reject needs --reason") || strings.Contains(l.dev.output(), "modal ") {
		t.Errorf("reject without a reason: exit %d\n%s%s", code, out, errs)
	}
	out = l.must(t, exitDone, "click", id, "reject", "--as", lead1, "--reason", "the customer kept it")
	wantLines(t, "the rejection", out, "clicked Reject on the message of "+id, "the form \"Reject\" opened (V",
		"typed the reason: the customer kept it\npressed Reject\nserve took it: the form closed")
	wantLines(t, "the local Slack", l.dev.output(), `"Reject" opened (submit: Reject)`, "    Why? [input reason]\n")
	upd = l.updated(t, ts, "    Rejected: reship_item, create_return_label\n")
	wantLines(t, "the rejected message", upd, "*Rejected* by @U0LEAD0001 (team_lead)", "`the customer kept it`", "Nothing was done.")
	if v := showJSON(t, l.dir, id); v.Status != record.StatusRejected || !strings.Contains(v.Reason, "the customer kept it") {
		t.Fatalf("rejected run: %s (%s)", v.Status, v.Reason)
	}

	// Edit, through the arguments modal: a bad edit keeps the form open.
	id = l.submit(t, "other.json", strings.Replace(refundJSON(agentID, "119", "slack-dev-edit"), "PAY-507862-2", "PAY-507862-1", 1))
	ts, _ = l.posted(t, id)
	out = l.must(t, exitRefused, "click", id, "edit", "--as", lead1, "--edit", `{"amount": "lots"}`)
	wantLines(t, "a bad edit", out, "the form \"Edit the arguments\" opened", "\"amount\": \"lots\"", "the form stays open; serve says:\n    action_0: ")
	if s := l.status(t, id); s != record.StatusWaitingApproval {
		t.Fatalf("after a refused edit the run is %s", s)
	}
	out = l.must(t, exitDone, "click", id, "edit", "--as", lead1, "--edit", `{"amount": 60}`, "--reason", "half now, half when it is back")
	wantLines(t, "the edit", out, "changed the arguments of 1. request_refund to:\n    {\n", "      \"amount\": 60,\n",
		"      \"payment_id\": \"PAY-507862-1\",\n", "pressed Approve with edits\nserve took it")
	upd = l.updated(t, ts, "    Done: request_refund\n")
	wantLines(t, "the edited message", upd, "    • `amount`: `60`\n")
	v := showJSON(t, l.dir, id)
	var args struct{ Amount json.Number }
	if err := json.Unmarshal(v.Actions[0].Args, &args); err != nil || v.Status != record.StatusDone || args.Amount != "60" {
		t.Fatalf("edited run: %s with %s (%v)", v.Status, v.Actions[0].Args, err)
	}

	wantLines(t, "/runs pending at the end", l.must(t, exitDone, "command", "/runs pending", "--as", lead1), "    Nothing is waiting for approval.\n")
}

// mustFixture is an example proposal's text.
func mustFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(fixture(name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSlackClickRefusesBadInput: a click or a command that cannot be sent
// as Slack would says why, exits 2 and sends nothing (no serve listens here).
func TestSlackClickRefusesBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	slackYAML := "\nslack:\n  channel: C0APPROVALS\n  app_id: A0SIGNOFF1\n  team_id: T0SHOP0001\n"
	write := func(name, y string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	local := write("local.yaml", string(config.DefaultYAML())+slackYAML+"  api_url: http://127.0.0.1:1/api/\n")
	slacks := write("slack.yaml", string(config.DefaultYAML())+slackYAML)
	none := write("none.yaml", string(config.DefaultYAML()))
	secret := map[string]string{"SLACK_SIGNING_SECRET": serveSecret}
	for _, tt := range []struct {
		name string
		cfg  string
		env  map[string]string
		args []string
		want string
	}{
		{"unknown button", local, secret, []string{"click", "run_1", "cancel", "--as", lead1}, `no button "cancel": approve, reject or edit`},
		{"no user", local, secret, []string{"click", "run_1", "approve"}, "--as USER"},
		{"reject without reason", local, secret, []string{"click", "run_1", "reject", "--as", lead1}, "reject needs --reason"},
		{"edit without JSON", local, secret, []string{"click", "run_1", "edit", "--as", lead1, "--edit", "amount=60"}, "edit needs --edit with a JSON object"},
		{"edit on approve", local, secret, []string{"click", "run_1", "approve", "--as", lead1, "--edit", "{}"}, "--edit is for edit"},
		{"no slack section", none, secret, []string{"click", "run_1", "approve", "--as", lead1}, "has no slack: section"},
		{"no signing secret", local, nil, []string{"click", "run_1", "approve", "--as", lead1}, "set SLACK_SIGNING_SECRET"},
		{"Slack's own api_url", slacks, secret, []string{"click", "run_1", "approve", "--as", lead1}, "slack.api_url is Slack's own"},
		{"bad serve URL", local, secret, []string{"click", "run_1", "approve", "--as", lead1, "--url", "localhost:8080"}, `--url "localhost:8080": want an http(s) URL`},
		{"bad serve URL in the environment", local, map[string]string{"SLACK_SIGNING_SECRET": serveSecret, "SIGNOFF_URL": "127.0.0.1:8080"},
			[]string{"click", "run_1", "approve", "--as", lead1}, `SIGNOFF_URL "127.0.0.1:8080": want an http(s) URL`},
		{"bad local Slack URL", slacks, secret, []string{"click", "run_1", "approve", "--as", lead1, "--slack-url", "ftp://x"}, `--slack-url "ftp://x": want an http(s) URL`},
		{"command without slash", local, secret, []string{"command", "runs pending", "--as", lead1}, "a slash command starts with its name"},
		{"command without user", local, secret, []string{"command", "/runs pending"}, "--as USER"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := cliWith(t, dir, tt.cfg, tt.env, append([]string{"slack"}, tt.args...)...)
			if code != exitRefused || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, want 2 with %q\nstdout:\n%s\nstderr:\n%s", code, tt.want, out, errs)
			}
		})
	}
	// --slack-url stands in for a config whose api_url is Slack's own: the
	// click goes to it (and finds nothing listening there).
	code, out, errs := cliWith(t, dir, slacks, secret, "slack", "click", "run_1", "approve", "--as", lead1, "--slack-url", "http://127.0.0.1:1/api/")
	if code != exitFailed || !strings.Contains(errs, "read the local slack's state") || !strings.Contains(errs, "127.0.0.1:1/dev/state") {
		t.Errorf("--slack-url: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}

// The loop on one machine works as written: its config, and each command of
// its walkthrough run in a folder of their own with the exit code the comment
// gives (0 where it names none); the two that run until stopped (&) listen on
// a free port instead of the one written, which the config's api_url and
// SIGNOFF_URL then name. What its comments and the sample of the local
// Slack's output promise is checked.
func TestTheSlackLoop(t *testing.T) {
	t.Parallel()
	sec := docSection(t, "docs/slack.md", "The whole loop on one machine")
	blocks := map[string]string{}
	for _, b := range codeBlocks(sec)[:3] {
		blocks[b.lang] = b.body
	}
	if blocks["yaml"] == "" || blocks["sh"] == "" || blocks["text"] == "" {
		t.Fatalf("want a config, a walkthrough and the local Slack's output; got %v", blocks)
	}
	const docAPI = "http://127.0.0.1:8090/api/"
	if !strings.Contains(blocks["yaml"], "api_url: "+docAPI) {
		t.Fatalf("the config does not point at the local Slack's default address:\n%s", blocks["yaml"])
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "signoff.yaml")
	writeCfg := func(api string) {
		if err := os.WriteFile(cfg, []byte(strings.Replace(blocks["yaml"], docAPI, api, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCfg(docAPI)
	if err := os.MkdirAll(filepath.Join(dir, "fixtures", "proposals"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"refund-double-charge.json", "reship-planter.json"} {
		proposal(t, filepath.Join(dir, "fixtures", "proposals"), name, mustFixture(t, name))
	}

	w := newWalk(dir, nil, "RUN", "RUN2")
	var dev *serveChild
	for _, l := range shLines(blocks["sh"]) {
		words := shellWords(t, strings.TrimSuffix(l.cmd, "&"))
		switch {
		case words[0] == "export":
			w.env = append(w.env, words[1:]...)
			continue
		case strings.HasSuffix(l.cmd, "&"):
			args := append(words[1:], "--addr", "127.0.0.1:0")
			if words[1] == "serve" {
				args = append(args, "--admin-addr", "127.0.0.1:0")
			}
			p := startBackground(t, dir, w.env, args...)
			switch words[1] {
			case "slack":
				dev = p
				writeCfg(p.await(t, "the local Slack to listen", localSlackListening)[1])
			case "serve":
				w.env = append(w.env, "SIGNOFF_URL=http://"+p.addr(t))
			default:
				t.Fatalf("a command in the background that is not slack dev or serve: %q", l.cmd)
			}
			continue
		}
		out, _ := w.signoff(t, l) // signoff.yaml and the proposals are found in the working directory
		switch {
		case words[1] == "submit":
			id := runIDOf(t, out)
			dev.await(t, "the message of "+id, regexp.MustCompile(`buttons: .*signoff slack click `+regexp.QuoteMeta(id)))
		case strings.Contains(l.comment, "updates the message: Done"):
			dev.await(t, "the message updated: done", regexp.MustCompile(`(?m)^    Done: request_refund$`))
		case strings.Contains(l.comment, "reason form"):
			dev.await(t, "the message updated: rejected", regexp.MustCompile("(?m)^    :x: \\*Rejected\\* by @U0LEAD0001 .*`the customer kept it`$"))
		case strings.Contains(l.comment, "Nothing is waiting"):
			wantLines(t, "/runs pending", out, "Nothing is waiting for approval.")
		}
	}
	if dev == nil {
		t.Fatal("the walkthrough starts no local Slack")
	}
	// The sample of the local Slack's output, in order; … stands for anything.
	printed := strings.Split(dev.output(), "\n")
	at := 0
	for _, want := range strings.Split(strings.TrimSpace(blocks["text"]), "\n") {
		if want == "" || strings.TrimSpace(want) == "…" {
			continue
		}
		re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(want), "…", ".*") + "$")
		for at < len(printed) && !re.MatchString(printed[at]) {
			at++
		}
		if at == len(printed) {
			t.Fatalf("the local Slack did not print %q (after what came before it in the sample):\n%s", want, dev.output())
		}
	}
}
