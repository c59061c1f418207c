package app

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/executor/webhook"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

const agentPy = "../../examples/agent-python/agent.py"

// agentSubmitted is the agent's first line: the run it submitted.
var agentSubmitted = regexp.MustCompile(`(?m)^run (run_\S+) waiting_approval$`)

// TestPythonAgentEndToEnd is the agent API's acceptance, with the real
// program and real HTTP: the example Python agent submits a webhook action
// with a callback URL and long-polls; a team lead's signed click in (fake)
// Slack approves it; the target gets one signed call with the stored
// arguments under RUN/1; the agent's wait returns done and it exits 0; the
// agent's receiver gets run.waiting and run.done, signed, redacted, with
// distinct event ids, and the agent's own verify_callback takes both.
func TestPythonAgentEndToEnd(t *testing.T) {
	t.Parallel()
	o := newOwn(t) // skips without python3
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	recv := newHookReceiver(t)
	prefix := recv.srv.URL + "/hooks/"

	env := map[string]string{}
	for _, kv := range o.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	// The token as an operator makes it, pasted under api.tokens.
	code, out, errs := cliWith(t, o.dir, o.config, env, "token", "new", "--id", "deployer", "--requester", "agent:deployer", "--scopes", "submit,read,cancel")
	if code != exitDone {
		t.Fatalf("token new: exit %d\n%s%s", code, out, errs)
	}
	token, lines, _ := strings.Cut(out, "\n")
	cfg, err := os.ReadFile(o.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = fmt.Appendf(cfg, "%s\napi:\n  callbacks:\n    allow: [%s]\n    secret_env: SIGNOFF_CALLBACK_SECRET\n  tokens:\n%s",
		slackSection(fs), prefix, lines)
	if err := os.WriteFile(o.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	showRun := func(id string) workflow.RunView {
		t.Helper()
		code, out, errs := cliWith(t, o.dir, o.config, env, "show", id, "--json")
		var v workflow.RunView
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("show %s --json: exit %d, %v\n%s%s", id, code, err, out, errs)
		}
		return v
	}

	// A lease long enough for the actions' timeouts, as serve asks.
	addr := startServeChild(t, o.dir, o.config, fs, append(o.env, "SIGNOFF_LEASE_TTL=10s")...).addr(t)

	prop, err := json.Marshal(map[string]any{
		"callback_url": prefix + "deployer", "summary": "Ship 1.4.2", "idempotency_key": "e2e-deploy",
		"actions": []map[string]any{{"name": "deploy_service", "args": json.RawMessage(deployArgs)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	agent := exec.CommandContext(ctx, py, agentPy, proposal(t, o.dir, "deploy.json", string(prop)))
	agent.Cancel = func() error { return agent.Process.Signal(syscall.SIGKILL) }
	// Unbuffered, so that its lines can be read while it waits.
	agent.Env = append(os.Environ(), "SIGNOFF_URL=http://"+addr, "SIGNOFF_TOKEN="+token, "PYTHONUNBUFFERED=1")
	var agentOut logBuffer
	agent.Stdout, agent.Stderr = &agentOut, &agentOut
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- agent.Wait() }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the agent said:\n%s", agentOut.String())
		}
	})

	// The agent submitted and goes on to wait on its run.
	var id string
	waitFor(t, "the agent to submit", func() bool {
		if m := agentSubmitted.FindStringSubmatch(agentOut.String()); m != nil {
			id = m[1]
			return true
		}
		select {
		case err := <-exited:
			t.Fatalf("the agent exited before its run waited: %v\n%s", err, agentOut.String())
		default:
		}
		return false
	})
	// The run is the token's requester's, and the API lists it.
	status, _, body := apiCall(t, addr, http.MethodGet, "/v1/runs?status=waiting_approval", token, nil)
	var page struct{ Runs []workflow.RunView }
	if err := json.Unmarshal(body, &page); status != http.StatusOK || err != nil || len(page.Runs) != 1 || page.Runs[0].ID != id ||
		page.Runs[0].Requester.ID != "agent:deployer" {
		t.Fatalf("GET /v1/runs: %d %s (%v), want the agent's run %s", status, body, err, id)
	}
	if calls := o.executeCalls(); len(calls) != 0 {
		t.Fatalf("the target was called before anyone approved: %+v", calls)
	}

	// The approval message is in Slack; a team lead clicks Approve on it.
	waitFor(t, "the approval message", func() bool {
		ms := fs.Posts()
		return len(ms) == 1 && strings.Contains(ms[0].Blocks, id) && showRun(id).Requests[0].MessageTS == ms[0].TS
	})
	v := showRun(id)
	form := interaction(readSlackFixture(t, "block_actions_approve.json"), &v, lead1, "")
	if a := sendSigned(t, http.DefaultClient, "serve", addr, signNow("/slack/interactions", form)); a.status != http.StatusOK {
		t.Fatalf("the click answered %d %s", a.status, a.body)
	}

	// The agent's wait returns done, and it exits 0.
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the agent exited with %v, want 0", err)
		}
	case <-ctx.Done():
		t.Fatal("the agent did not finish within a minute")
	}
	said := agentOut.String()
	if !strings.Contains(said, "waiting for 1 approval(s) from team_lead") || !strings.Contains(said, "\n  now done\n") ||
		!strings.Contains(said, "\noutcome: done\n") || !strings.Contains(said, "  "+id+"/1 committed ") {
		t.Fatalf("the agent said:\n%s", said)
	}

	// The target got exactly one call: signed, under RUN/1, with the stored
	// arguments (the real ones: redaction is for people).
	calls := o.executeCalls()
	if len(calls) != 1 || !calls[0].SignatureOK || calls[0].IdempotencyKey != id+"/1" {
		t.Fatalf("the target received %+v, want one signed call under %s/1", calls, id)
	}
	var call webhook.Body
	if err := json.Unmarshal(calls[0].Body, &call); err != nil {
		t.Fatal(err)
	}
	var stored bytes.Buffer
	if err := json.Compact(&stored, o.show(t, id).Actions[0].Args); err != nil {
		t.Fatal(err)
	}
	if call.IdempotencyKey != id+"/1" || call.RunID != id || !bytes.Equal(call.Args, stored.Bytes()) ||
		!strings.Contains(string(call.Args), "tok-not-for-people") || len(call.ApprovedBy) != 1 || call.ApprovedBy[0] != lead1 {
		t.Fatalf("the target got %s, stored args %s", calls[0].Body, stored.Bytes())
	}

	// The real program's show: done, with the target's receipt.
	done := o.show(t, id)
	if done.Status != record.StatusDone || len(done.Operations) != 1 || done.Operations[0].Key != id+"/1" ||
		done.Operations[0].Status != record.OpCommitted || !strings.Contains(string(done.Operations[0].Receipt), `"op-1"`) {
		t.Fatalf("show --json: %s, operations %+v", done.Status, done.Operations)
	}

	// The callbacks: waiting, then done, each verified on arrival.
	waitFor(t, "the run.done callback", func() bool { return len(recv.events()) >= 2 })
	evs := recv.events()
	if len(evs) != 2 || evs[0].Type != "run.waiting" || evs[1].Type != "run.done" || evs[0].ID == evs[1].ID {
		t.Fatalf("the receiver took %+v, want run.waiting then run.done with distinct ids", evs)
	}
	for _, ev := range evs {
		var args map[string]any
		if err := json.Unmarshal(ev.Run.Actions[0].Args, &args); err != nil || ev.Run.ID != id || !strings.HasPrefix(ev.ID, "evt_") ||
			args["token"] != "[redacted]" || args["version"] != "1.4.2" || ev.Run.CallbackURL != prefix+"deployer" {
			t.Errorf("%s %s: run %s, args %s (%v)", ev.Type, ev.ID, ev.Run.ID, ev.Run.Actions[0].Args, err)
		}
	}
	if d := evs[1].Run; d.Status != record.StatusDone || len(d.Operations) != 1 || !strings.Contains(string(d.Operations[0].Receipt), `"op-1"`) {
		t.Errorf("run.done shows the run %s with operations %+v", d.Status, d.Operations)
	}

	// The agent's own check takes both callbacks as they arrived, and
	// refuses one whose body changed.
	reqs := recv.requests()
	tampered := reqs[1]
	tampered.body = bytes.Replace(tampered.body, []byte(`"status":"done"`), []byte(`"status":"failed"`), 1)
	if bytes.Equal(tampered.body, reqs[1].body) {
		t.Fatalf("nothing to tamper with in %s", reqs[1].body)
	}
	got := pythonVerify(t, py, append(reqs, tampered))
	if want := []string{evs[0].ID, evs[1].ID, "refused: no valid signature"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("agent.verify_callback said %q, want %q", got, want)
	}

	// The walkthrough of docs/agent-api.md ends with a cancel of the done run: 409.
	status, _, body = apiCall(t, addr, http.MethodPost, "/v1/runs/"+id+"/cancel", token, []byte(`{"reason":"the customer withdrew"}`))
	var problem struct {
		Code  string `json:"code"`
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(body, &problem); status != http.StatusConflict || err != nil || problem.Code != "not_cancellable" || problem.RunID != id {
		t.Errorf("cancel of a done run: %d %s", status, body)
	}
}

// pythonVerify runs examples/agent-python's verify_callback on each request
// with the callback secret, and returns what it said of each: the event id,
// or "refused: " and its reason.
func pythonVerify(t *testing.T, py string, reqs []hookRequest) []string {
	t.Helper()
	type wire struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	var in []wire
	for _, r := range reqs {
		h := map[string]string{}
		for k := range r.header {
			h[strings.ToLower(k)] = r.header.Get(k)
		}
		in = append(in, wire{h, base64.StdEncoding.EncodeToString(r.body)})
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const script = `import base64, json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[1])))
import agent
for r in json.load(sys.stdin):
    try:
        print(agent.verify_callback(os.environ["CALLBACK_SECRET"], r["headers"], base64.b64decode(r["body"])))
    except ValueError as e:
        print("refused: %s" % e)
`
	cmd := exec.CommandContext(t.Context(), py, "-c", script, agentPy)
	cmd.Env = append(os.Environ(), "CALLBACK_SECRET="+callbackSecret)
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("verify_callback: %v\n%s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
