package app

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// TestDemo runs `signoff demo` in process, as the README's first command
// (go run ./cmd/signoff demo) gives it; its crashes are real child processes
// of this test binary (see TestMain).
func TestDemo(t *testing.T) {
	t.Parallel()
	var args []string
	for _, block := range blocksOf(docSection(t, "README.md", "Two commands"), "sh") {
		for _, l := range shLines(block) {
			if rest, ok := strings.CutPrefix(l.cmd, "go run ./cmd/signoff "); ok {
				args = append(args, shellWords(t, rest)...)
			}
		}
	}
	if !slices.Equal(args, []string{"demo"}) {
		t.Fatalf("the README runs signoff %q, want the demo", args)
	}
	var out, errb strings.Builder
	code := run(t.Context(), args, noEnv, strings.NewReader(""), &out, &errb)
	if code != 0 {
		t.Fatalf("signoff demo: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	// The demo runs on the built-in config on purpose: it does not say so.
	if strings.Contains(out.String()+errb.String(), "using the built-in") {
		t.Errorf("the demo announced the built-in config:\n%s%s", out.String(), errb.String())
	}
	for _, want := range []string{
		"(the process was killed at after-step-1)",
		"(the process was killed at after-effect)",
		"model calls: 3 recorded in the run, 3 in the provider's usage log",
		"ok: 3 runs,",
		"The story holds",
		// A command the demo prints can be pasted into a shell as it is.
		"$ signoff reject run_",
		" --as U0LEAD0001 --reason 'photo shows the box only; ask for a picture of the planter'\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestSubmitAndShowJSON: the run id is the first line of submit's output, and
// --json carries the fields that scripts read, with the values they expect.
func TestSubmitAndShowJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := must(t, dir, exitWaiting, "submit", fixture("refund-double-charge.json"))
	id := runIDOf(t, out)
	if !regexp.MustCompile(`^run_[0-9a-f]{24}$`).MatchString(id) {
		t.Errorf("run id %q", id)
	}
	if strings.Count(out, id) < 2 || !strings.Contains(out, "WAITING_APPROVAL") {
		t.Errorf("submit should print the id, then the waiting run:\n%s", out)
	}
	waiting := showJSON(t, dir, id)
	must(t, dir, exitDone, "approve", id, "--as", lead1, "--name", "Grace", "--reason", "duplicate charge, checked")

	var v map[string]any
	if err := json.Unmarshal([]byte(showRaw(t, dir, id)), &v); err != nil {
		t.Fatal(err)
	}
	field := func(m map[string]any, k string) any {
		t.Helper()
		x, ok := m[k]
		if !ok {
			t.Fatalf("show --json has no %q: %v", k, m)
		}
		return x
	}
	list := func(m map[string]any, k string) map[string]any {
		t.Helper()
		xs, ok := field(m, k).([]any)
		if !ok || len(xs) != 1 {
			t.Fatalf("show --json %q = %v, want one item", k, m[k])
		}
		item, ok := xs[0].(map[string]any)
		if !ok {
			t.Fatalf("show --json %q[0] = %v", k, xs[0])
		}
		return item
	}
	if field(v, "id") != id || field(v, "status") != "done" {
		t.Errorf("id %v status %v", v["id"], v["status"])
	}
	fp, _ := field(v, "fingerprint").(string)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(fp) || fp != waiting.Fingerprint {
		t.Errorf("fingerprint %q, approved %q", fp, waiting.Fingerprint)
	}
	act := list(v, "actions")
	args, _ := field(act, "args").(map[string]any)
	if field(act, "name") != "request_refund" || args["payment_id"] != "PAY-507862-2" || args["amount"] != 119.0 || args["currency"] != "CAD" {
		t.Errorf("action %v", act)
	}
	dec := list(v, "decisions")
	if field(dec, "by") != lead1 || field(dec, "decision") != "approve" || field(dec, "reason") != "duplicate charge, checked" || field(dec, "via") != "cli" {
		t.Errorf("decision %v", dec)
	}
	at, _ := field(dec, "at").(string)
	if ts, err := time.Parse(time.RFC3339Nano, at); err != nil || time.Since(ts) > time.Hour || time.Since(ts) < -time.Minute {
		t.Errorf("decision at %q: %v", at, err)
	}
	op := list(v, "operations")
	rc, _ := field(op, "receipt").(map[string]any)
	refund := oneRefund(t, dir, id+"/1", "119.00")
	if field(op, "key") != id+"/1" || field(op, "action") != "request_refund" || field(op, "status") != "committed" || rc["id"] != refund.ID {
		t.Errorf("operation %v; the shop's refund is %s", op, refund.ID)
	}

	// --json prints the run instead of the id; a small refund runs at once.
	out = must(t, dir, exitDone, "submit", "--json", fixture("small-refund.json"))
	var small workflow.RunView
	if err := json.Unmarshal([]byte(out), &small); err != nil {
		t.Fatalf("submit --json: %v\n%s", err, out)
	}
	if small.Status != record.StatusDone || len(small.Operations) != 1 || small.Operations[0].Key != small.ID+"/1" || len(small.Decisions) != 0 {
		t.Errorf("submit --json of the small refund: %+v", small)
	}
	if ch := changes(t, dir); len(ch) != 2 || ch[1].PaymentID != "PAY-793996-1" || ch[1].Amount != "9.95" {
		t.Errorf("changes %+v", ch)
	}
}

// TestSubmitFromStdin: `-` reads the proposal from standard input.
func TestSubmitFromStdin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	body, err := os.ReadFile(fixture("refund-double-charge.json"))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := signoffIn(t, dir, string(body), "submit", "-")
	if code != exitWaiting {
		t.Fatalf("submit -: exit %d\n%s%s", code, out, errs)
	}
	id := runIDOf(t, out)
	if v := showJSON(t, dir, id); v.Status != record.StatusWaitingApproval || v.TaskID != "T-65273" {
		t.Errorf("%+v", v)
	}
}

// TestSubmitSameIdempotencyKey: the same key with the same proposal returns
// the first run, whatever became of it; with a different proposal it is refused
// (exit 2) naming the run that holds the key, and no run is made.
func TestSubmitSameIdempotencyKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := submitWaiting(t, dir)
	second := submitWaiting(t, dir)
	if first != second {
		t.Fatalf("the same idempotency key made two runs: %s and %s", first, second)
	}
	// The same key with other content is not a retry: the agent must hear so.
	p := proposal(t, dir, "retry.json", refundJSON(agentID, "118.00", "resolver-T-65273-1"))
	code, out, errs := signoff(t, dir, "submit", p)
	if code != exitRefused || out != "" || !strings.Contains(errs, first) || !strings.Contains(errs, "different proposal") {
		t.Fatalf("the same key with another amount: exit %d, stdout %q, stderr %q; want exit 2 naming %s", code, out, errs, first)
	}
	if rs := runs(t, dir); len(rs) != 1 || rs[0].ID != first {
		t.Fatalf("runs: %+v", rs)
	}
	// Another key is another run.
	p = proposal(t, dir, "other.json", refundJSON(agentID, "119.00", "another-key"))
	if id := runIDOf(t, must(t, dir, exitWaiting, "submit", p)); id == first {
		t.Fatal("another key returned the first run")
	}

	// A failed run holds its key too: the retry gets it, a new proposal is refused.
	failing := proposal(t, dir, "too-much.json", refundJSON(agentID, "500.00", "too-much"))
	failed := runIDOf(t, must(t, dir, exitFailed, "submit", failing))
	if id := runIDOf(t, must(t, dir, exitFailed, "submit", failing)); id != failed {
		t.Fatalf("the retry of a failed submit made run %s, want %s", id, failed)
	}
	fixed := proposal(t, dir, "fixed.json", refundJSON(agentID, "119.00", "too-much"))
	if code, out, errs := signoff(t, dir, "submit", fixed); code != exitRefused || !strings.Contains(errs, failed) {
		t.Fatalf("a new proposal under the failed run's key: exit %d, stdout %q, stderr %q; want exit 2 naming %s", code, out, errs, failed)
	}
	if rs := runs(t, dir); len(rs) != 3 {
		t.Fatalf("%d runs, want 3", len(rs))
	}
}

// TestSubmitRefusesInvalidProposals: exit 2, no run, nothing in the shop.
func TestSubmitRefusesInvalidProposals(t *testing.T) {
	t.Parallel()
	const refund = `{"name": "request_refund", "args": {"order_id": "LK-507862", "payment_id": "PAY-507862-2", "amount": 119.00, "currency": "CAD", "reason_code": "RFD-DOUBLE"}}`
	tests := []struct {
		name  string
		body  string // written to a file, or given on stdin when stdin is set
		stdin bool
		file  string // a path instead of a body
		want  string
	}{
		{name: "unknown field", body: `{"requester": {"id": "agent:resolver"}, "actions": [` + refund + `], "priority": "high"}`, want: `unknown field "priority" (known: task_id, requester, summary, actions, evidence, idempotency_key, callback_url)`},
		{name: "unknown field in wrong case", body: `{"Requester": {"id": "agent:resolver"}, "actions": [` + refund + `]}`, want: `unknown field "Requester" (known: task_id, requester,`},
		{name: "duplicate key", body: `{"requester": {"id": "agent:resolver"}, "requester": {"id": "U0LEAD0001"}, "actions": [` + refund + `]}`, want: `duplicate object member name "requester"`},
		{name: "duplicate key in args", body: `{"requester": {"id": "agent:resolver"}, "actions": [{"name": "request_refund", "args": {"order_id": "LK-507862", "payment_id": "PAY-507862-2", "amount": 1, "amount": 119, "currency": "CAD", "reason_code": "RFD-DOUBLE"}}]}`, want: `duplicate object member name "amount"`},
		{name: "missing requester.id", body: `{"requester": {"name": "Resolver"}, "actions": [` + refund + `]}`, want: "requester.id is required"},
		{name: "no actions", body: `{"requester": {"id": "agent:resolver"}, "actions": []}`, want: "at least one action"},
		{name: "unknown action", body: `{"requester": {"id": "agent:resolver"}, "actions": [{"name": "delete_order", "args": {"order_id": "LK-507862"}}]}`, want: `unknown action "delete_order" (configured: create_return_label, request_refund, reship_item)`},
		{name: "amount as a string", body: `{"requester": {"id": "agent:resolver"}, "actions": [{"name": "request_refund", "args": {"order_id": "LK-507862", "payment_id": "PAY-507862-2", "amount": "119.00", "currency": "CAD", "reason_code": "RFD-DOUBLE"}}]}`, want: "amount"},
		{name: "missing currency", body: `{"requester": {"id": "agent:resolver"}, "actions": [{"name": "request_refund", "args": {"order_id": "LK-507862", "payment_id": "PAY-507862-2", "amount": 119, "reason_code": "RFD-DOUBLE"}}]}`, want: "currency"},
		{name: "unknown field in an action", body: `{"requester": {"id": "agent:resolver"}, "actions": [{"name": "request_refund", "arguments": {}}]}`, want: `unknown field "arguments" in /actions/0 (known: name, args)`},
		{name: "a number for a string", body: `{"requester": {"id": 42}, "actions": [` + refund + `]}`, want: `/requester/id: want a string, got a number`},
		{name: "trailing data", body: `{"requester": {"id": "agent:resolver"}, "actions": [` + refund + `]} {}`, want: "p.json: invalid proposal"},
		{name: "not JSON", body: `refund it please`, want: "p.json: invalid proposal"},
		{name: "cut short", body: `{"requester": {"id": "agent:resolver"}, "actions": [` + refund + `]`, want: "p.json: invalid proposal"},
		{name: "stdin invalid", stdin: true, body: `{"requester": {"id": "agent:resolver"}, "actions": [` + refund + `], "approved": true}`, want: `stdin: invalid proposal: unknown field "approved" (known: task_id,`},
		{name: "stdin empty", stdin: true, body: "", want: "empty input"},
		{name: "unreadable file", file: "no-such-proposal.json", want: "read proposal"},
		{name: "a directory", file: ".", want: "read proposal"},
	}
	dir := t.TempDir()
	// Something to compare with: one finished run and one change in the shop.
	must(t, dir, exitDone, "submit", fixture("small-refund.json"))
	runsBefore := must(t, dir, 0, "runs", "--json")
	shopBefore := must(t, dir, 0, "shop", "changes", "--json")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var code int
			var out, errs string
			switch {
			case tt.stdin:
				code, out, errs = signoffIn(t, dir, tt.body, "submit", "-")
			case tt.file != "":
				code, out, errs = signoff(t, dir, "submit", filepath.Join(dir, tt.file))
			default:
				code, out, errs = signoff(t, dir, "submit", proposal(t, t.TempDir(), "p.json", tt.body))
			}
			if code != exitRefused || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 naming %q (stdout %q)", code, errs, tt.want, out)
			}
			if out != "" {
				t.Errorf("a refused submit printed %q", out)
			}
			if strings.Contains(errs, "Go ") || strings.Contains(errs, "workflow.") {
				t.Errorf("the refusal speaks of Go types: %q", errs)
			}
			if got := must(t, dir, 0, "runs", "--json"); got != runsBefore {
				t.Errorf("runs changed:\n%s\nwas:\n%s", got, runsBefore)
			}
			if got := must(t, dir, 0, "shop", "changes", "--json"); got != shopBefore {
				t.Errorf("the shop changed:\n%s", got)
			}
		})
	}
}

// TestApprovalGatesTheShop: no approval, no change; one approval, one refund;
// approving again or resuming changes nothing.
func TestApprovalGatesTheShop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	noChanges(t, dir)
	must(t, dir, exitWaiting, "resume", id)
	must(t, dir, exitWaiting, "show", id)
	noChanges(t, dir)

	out := must(t, dir, exitDone, "approve", id, "--as", lead1)
	if !strings.Contains(out, "DONE") || !strings.Contains(out, "committed") {
		t.Errorf("approve printed:\n%s", out)
	}
	refund := oneRefund(t, dir, id+"/1", "119.00")
	if refund.By != "signoff" {
		t.Errorf("refund by %q", refund.By)
	}

	for _, as := range []string{lead2, lead1, manager} {
		code, _, errs := signoff(t, dir, "approve", id, "--as", as)
		if code != exitRefused || !strings.Contains(errs, "already approved by "+lead1) {
			t.Errorf("approve again as %s: exit %d, %q", as, code, errs)
		}
	}
	must(t, dir, exitDone, "resume", id)
	must(t, dir, exitDone, "resume", id)
	if code, _, _ := signoff(t, dir, "cancel", id, "--as", lead1, "--reason", "too late"); code != exitRefused {
		t.Errorf("cancel of a done run: exit %d", code)
	}
	oneRefund(t, dir, id+"/1", "119.00")
	v := showJSON(t, dir, id)
	if v.Status != record.StatusDone || len(v.Decisions) != 1 || len(v.Operations) != 1 || v.Operations[0].Attempts != 1 {
		t.Errorf("run %+v", v)
	}
	must(t, dir, exitDone, "verify")
}

// TestRejectAndCancelChangeNothingInTheShop.
func TestRejectAndCancelChangeNothingInTheShop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	if code, _, errs := signoff(t, dir, "reject", id, "--as", lead1); code != exitRefused || !strings.Contains(errs, "--reason") {
		t.Errorf("reject without a reason: exit %d, %q", code, errs)
	}
	out := must(t, dir, exitEnded, "reject", id, "--as", lead1, "--reason", "the customer asked for store credit")
	if !strings.Contains(out, "REJECTED") || !strings.Contains(out, "store credit") {
		t.Errorf("reject printed:\n%s", out)
	}
	if code, _, errs := signoff(t, dir, "approve", id, "--as", lead2); code != exitRefused || !strings.Contains(errs, "already rejected by "+lead1) {
		t.Errorf("approve after reject: exit %d, %q", code, errs)
	}
	must(t, dir, exitEnded, "resume", id)
	v := showJSON(t, dir, id)
	if v.Status != record.StatusRejected || len(v.Decisions) != 1 || v.Decisions[0].Decision != record.VerdictReject || len(v.Operations) != 0 {
		t.Errorf("run %+v", v)
	}

	// Cancel: the requester may, and then nobody can approve.
	other := runIDOf(t, must(t, dir, exitWaiting, "submit", fixture("reship-planter.json")))
	if code, _, _ := signoff(t, dir, "cancel", other, "--as", "U0NOBODY", "--reason", "x"); code != exitRefused {
		t.Errorf("cancel by a stranger: exit %d", code)
	}
	must(t, dir, exitEnded, "cancel", other, "--as", agentID, "--reason", "the customer found the planter intact")
	if code, _, _ := signoff(t, dir, "approve", other, "--as", lead1); code != exitRefused {
		t.Errorf("approve after cancel: exit %d", code)
	}
	if v := showJSON(t, dir, other); v.Status != record.StatusCancelled {
		t.Errorf("status %s", v.Status)
	}
	noChanges(t, dir)
}

// TestRefusalsChangeNothingButTheAuditLog: each refused approval leaves the run,
// its checkpoints and the shop as they were, and adds one audit event.
func TestRefusalsChangeNothingButTheAuditLog(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// setup makes a waiting run and returns its id.
		setup func(t *testing.T, dir string) string
		// approve returns the refused approve's arguments.
		approve func(t *testing.T, dir, id string) []string
		want    string
		// approvable: someone with the right to approve still can, afterwards.
		approvable bool
	}{
		{
			name:       "agent without the role",
			setup:      func(t *testing.T, dir string) string { return submitWaiting(t, dir) },
			approve:    func(t *testing.T, dir, id string) []string { return []string{"--as", agentID} },
			want:       "agent:resolver is agent; this needs team_lead or above",
			approvable: true,
		},
		{
			name:       "unknown member",
			setup:      func(t *testing.T, dir string) string { return submitWaiting(t, dir) },
			approve:    func(t *testing.T, dir, id string) []string { return []string{"--as", "U0INTRUDER"} },
			want:       "U0INTRUDER holds no role",
			approvable: true,
		},
		{
			name: "requester approving their own refund",
			setup: func(t *testing.T, dir string) string {
				p := proposal(t, dir, "own.json", refundJSON(lead1, "119.00", ""))
				return runIDOf(t, must(t, dir, exitWaiting, "submit", p))
			},
			approve:    func(t *testing.T, dir, id string) []string { return []string{"--as", lead1} },
			want:       "forbids approving one's own request",
			approvable: true, // by U0LEAD0002
		},
		{
			name:  "a fingerprint that is not the current one",
			setup: func(t *testing.T, dir string) string { return submitWaiting(t, dir) },
			approve: func(t *testing.T, dir, id string) []string {
				fp := showJSON(t, dir, id).Fingerprint
				stale := strings.Repeat("0", 64)
				if fp == stale {
					t.Fatal("fingerprint is all zeros")
				}
				return []string{"--as", lead1, "--fingerprint", stale}
			},
			want:       "is not the current one",
			approvable: true,
		},
		{
			name:  "the policy revision changed",
			setup: func(t *testing.T, dir string) string { return submitWaiting(t, dir) },
			approve: func(t *testing.T, dir, id string) []string {
				cfg := writeConfig(t, dir, "next.yaml", `revision: "2026-11-29.1"`, `revision: "2026-12-01.1"`)
				return []string{"--as", lead1, "--config", cfg}
			},
			want:       "the policy changed since approval was requested (revision 2026-11-29.1, now 2026-12-01.1)",
			approvable: true, // under the policy it was requested for
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			id := tt.setup(t, dir)
			before := showRaw(t, dir, id)
			history := must(t, dir, 0, "history", id, "--json")
			audit := auditEvents(t, dir)

			args := append([]string{"approve", id}, tt.approve(t, dir, id)...)
			code, out, errs := signoff(t, dir, args...)
			if code != exitRefused || !strings.Contains(errs, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 saying %q (stdout %q)", code, errs, tt.want, out)
			}
			if after := showRaw(t, dir, id); after != before {
				t.Errorf("the run changed:\n%s\nwas:\n%s", after, before)
			}
			if got := must(t, dir, 0, "history", id, "--json"); got != history {
				t.Errorf("the checkpoints changed:\n%s", got)
			}
			if got := auditEvents(t, dir); got != audit+1 {
				t.Errorf("audit events %d, want %d (the refusal is recorded)", got, audit+1)
			}
			noChanges(t, dir)

			if tt.approvable {
				must(t, dir, exitDone, "approve", id, "--as", lead2)
				oneRefund(t, dir, id+"/1", "119.00")
			}
		})
	}
}

// TestTamperedArgumentsStopTheRun is the attack of a person who can write the
// database: after the run was submitted they change the refund's payment in
// its checkpoint and recompute the hash chain. The seal, made with a key that
// is not in the database, no longer matches: approving is refused, the run
// is handed to a person, verify names it, and the shop never acts.
func TestTamperedArgumentsStopTheRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	editState(t, dir, id, func(st map[string]any) {
		args := st["actions"].([]any)[0].(map[string]any)["args"].(map[string]any)
		args["payment_id"] = "PAY-507862-1"
	}, true)
	code, _, errs := signoff(t, dir, "approve", id, "--as", lead1)
	if code != exitAttention || !strings.Contains(errs, "its MAC does not match") {
		t.Fatalf("approve: exit %d, stderr %q; want 5 and the seal", code, errs)
	}
	if v := showJSON(t, dir, id); v.Status != record.StatusNeedsAttention {
		t.Errorf("the run is %s", v.Status)
	}
	code, out, _ := signoff(t, dir, "verify")
	if code != exitFailed || !strings.Contains(out, "damaged: run "+id) {
		t.Errorf("verify: exit %d, want 1\n%s", code, out)
	}
	noChanges(t, dir)
}

// TestDecisionAfterTheDeadline: the run ends expired and the shop is unchanged.
func TestDecisionAfterTheDeadline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The shortest deadline a config accepts is one second.
	cfg := writeConfig(t, dir, "hurry.yaml",
		"approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}",
		"approval: {role: team_lead, count: 1, expires: 1s, self_approval: false, edit: true}")
	id := runIDOf(t, must(t, dir, exitWaiting, "--config", cfg, "submit", fixture("refund-double-charge.json")))
	v := showJSON(t, dir, id)
	if v.Deadline == nil {
		t.Fatalf("no deadline: %+v", v)
	}
	deadline := *v.Deadline
	if d := time.Until(deadline); d > 2*time.Second {
		t.Fatalf("deadline %s is %s away", deadline, d)
	}
	// Wait for the clock to pass the deadline (the engine counts whole milliseconds).
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(10 * time.Second)
	for !time.Now().After(deadline.Add(2 * time.Millisecond)) {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatal("the deadline never passed")
		}
	}
	// Reading the run does not change it, and says the deadline has passed.
	if v := showJSON(t, dir, id); v.Status != record.StatusWaitingApproval {
		t.Fatalf("show changed the run: %s", v.Status)
	}
	if out := must(t, dir, exitWaiting, "--config", cfg, "show", id); !strings.Contains(out, "(expired ") || strings.Contains(out, "(in ") {
		t.Errorf("show of a run past its deadline:\n%s", out)
	}
	if out := must(t, dir, 0, "--config", cfg, "runs", "--status", "waiting_approval"); !strings.Contains(out, "expired ") || strings.Contains(out, "in just now") {
		t.Errorf("runs with a run past its deadline:\n%s", out)
	}

	code, out, errs := signoff(t, dir, "--config", cfg, "approve", id, "--as", lead1)
	if code != exitEnded || !strings.Contains(errs, "the deadline passed") {
		t.Fatalf("approve after the deadline: exit %d, stderr %q, stdout %q", code, errs, out)
	}
	v = showJSON(t, dir, id)
	if v.Status != record.StatusExpired || !strings.Contains(v.Reason, "no decision before the deadline") || len(v.Decisions) != 0 {
		t.Errorf("run %+v", v)
	}
	if len(v.Requests) != 1 || v.Requests[0].Status != record.RequestExpired {
		t.Errorf("requests %+v", v.Requests)
	}
	if code, _, _ := signoff(t, dir, "--config", cfg, "approve", id, "--as", lead2); code != exitRefused {
		t.Errorf("approve of an expired run: exit %d", code)
	}
	must(t, dir, exitEnded, "--config", cfg, "resume", id)
	noChanges(t, dir)
	must(t, dir, exitDone, "verify")

	// A run nobody decided on ends expired when it is next touched.
	other := runIDOf(t, must(t, dir, exitWaiting, "--config", cfg, "submit", fixture("reship-planter.json")))
	if v := showJSON(t, dir, other); v.Deadline == nil || time.Until(*v.Deadline) < time.Hour {
		t.Fatalf("the reship rule keeps its 72h: %+v", v.Deadline)
	}
	late := proposal(t, dir, "late.json", refundJSON(agentID, "119.00", "late"))
	late = runIDOf(t, must(t, dir, exitWaiting, "--config", cfg, "submit", late))
	deadline = *showJSON(t, dir, late).Deadline
	for !time.Now().After(deadline.Add(2 * time.Millisecond)) {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatal("the deadline never passed")
		}
	}
	must(t, dir, exitEnded, "--config", cfg, "resume", late)
	if v := showJSON(t, dir, late); v.Status != record.StatusExpired {
		t.Errorf("status %s", v.Status)
	}
	must(t, dir, exitWaiting, "--config", cfg, "show", other)
	noChanges(t, dir)
}

// TestChargeRefundedByHandWhileWaiting: the approved refund is refused by the
// shop, the run needs attention, and only the manual refund exists.
func TestChargeRefundedByHandWhileWaiting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := runIDOf(t, must(t, dir, exitWaiting, "run", "T-65273"))
	must(t, dir, 0, "shop", "refund", "LK-507862", "PAY-507862-2", "119.00", "--by", "Amira")

	code, out, errs := signoff(t, dir, "approve", id, "--as", lead1)
	if code != exitAttention || !strings.Contains(out, "NEEDS_ATTENTION") {
		t.Fatalf("approve: exit %d, want 5\n%s%s", code, out, errs)
	}
	v := showJSON(t, dir, id)
	if v.Status != record.StatusNeedsAttention || !strings.Contains(v.Reason, "refused by the target") || !strings.Contains(v.Reason, "not a captured charge") {
		t.Errorf("status %s, reason %q", v.Status, v.Reason)
	}
	if len(v.Operations) != 1 || v.Operations[0].Status != record.OpFailed || len(v.Operations[0].Receipt) != 0 {
		t.Errorf("operations %+v", v.Operations)
	}
	must(t, dir, exitAttention, "resume", id)
	ch := changes(t, dir)
	if len(ch) != 1 || ch[0].Key != "manual-1" || ch[0].By != "Amira" || ch[0].PaymentID != "PAY-507862-2" || ch[0].Amount != "119.00" {
		t.Fatalf("the shop has %+v, want only the manual refund", ch)
	}
	// A second manual refund of the same charge is refused by the shop.
	if code, _, errs := signoff(t, dir, "shop", "refund", "LK-507862", "PAY-507862-2", "119.00", "--by", "Amira"); code != exitRefused || !strings.Contains(errs, "refused") {
		t.Errorf("second manual refund: exit %d, %q", code, errs)
	}
}

// TestDamagedStateNeedsAttention: a run whose stored state fails its integrity
// check stops in needs_attention with the reason; verify names it; other runs go on.
func TestDamagedStateNeedsAttention(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		damage  func(t *testing.T, dir, id string)
		problem string
		first   string // the command that meets the damage: approve or resume
	}{
		{"duplicate key", func(t *testing.T, dir, id string) {
			rewriteLatestCheckpoint(t, dir, id, func(b []byte) []byte {
				s := strings.Replace(string(b), `"status":`, `"status":"done","status":`, 1)
				if s == string(b) {
					t.Fatal("no status in the state")
				}
				return []byte(s)
			}, true)
		}, `duplicate object member name "status"`, "approve"},
		{"unknown field", func(t *testing.T, dir, id string) {
			editState(t, dir, id, func(st map[string]any) { st["approved_by"] = lead1 }, true)
		}, `unknown object member name "approved_by"`, "resume"},
		{"newer schema version", func(t *testing.T, dir, id string) {
			editState(t, dir, id, func(st map[string]any) { st["schema_version"] = record.SchemaVersion + 1 }, true)
		}, "schema version " + strconv.Itoa(record.SchemaVersion+1) + " is newer than this build (" + strconv.Itoa(record.SchemaVersion) + ")", "approve"},
		{"broken chain", func(t *testing.T, dir, id string) {
			editState(t, dir, id, func(st map[string]any) { st["summary"] = "refund both charges" }, false)
		}, "broken hash chain", "resume"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			damaged := submitWaiting(t, dir)
			healthy := runIDOf(t, must(t, dir, exitWaiting, "submit", fixture("reship-planter.json")))
			tt.damage(t, dir, damaged)

			code, out, _ := signoff(t, dir, "verify")
			if code != exitFailed || !strings.Contains(out, "damaged: run "+damaged) || !strings.Contains(out, tt.problem) || strings.Contains(out, healthy) {
				t.Errorf("verify: exit %d, want 1\n%s", code, out)
			}

			// Reading the run changes nothing, and does not call it waiting.
			code, out, _ = signoff(t, dir, "show", damaged)
			if code != exitAttention || !strings.Contains(out, "PROBLEM: run "+damaged) || strings.Contains(out, "next: signoff approve") {
				t.Errorf("show of the damaged run: exit %d, want 5\n%s", code, out)
			}

			args := []string{"resume", damaged}
			if tt.first == "approve" {
				args = []string{"approve", damaged, "--as", lead1}
			}
			code, out, errs := signoff(t, dir, args...)
			if code != exitAttention {
				t.Fatalf("%s: exit %d, want 5\n%s%s", tt.first, code, out, errs)
			}
			v := showJSON(t, dir, damaged)
			if v.Status != record.StatusNeedsAttention || !strings.Contains(v.Reason, tt.problem) || !strings.Contains(v.Problem, tt.problem) {
				t.Errorf("show: status %s reason %q problem %q", v.Status, v.Reason, v.Problem)
			}
			if code, out, _ := signoff(t, dir, "show", damaged); code != exitAttention || !strings.Contains(out, "NEEDS_ATTENTION") || !strings.Contains(out, tt.problem) {
				t.Errorf("show: exit %d\n%s", code, out)
			}
			// Nothing brings it back by guessing.
			must(t, dir, exitAttention, "resume", damaged)
			must(t, dir, exitAttention, "approve", damaged, "--as", lead2)

			// The other run carries on.
			must(t, dir, exitDone, "approve", healthy, "--as", lead1)
			ch := changes(t, dir)
			kinds := []string{}
			for _, c := range ch {
				if !strings.HasPrefix(c.Key, healthy+"/") {
					t.Errorf("change %+v is not the healthy run's", c)
				}
				kinds = append(kinds, c.Kind)
			}
			if !slices.Equal(kinds, []string{demo.KindReshipment, demo.KindReturnLabel}) {
				t.Errorf("the shop did %v", kinds)
			}
			code, out, _ = signoff(t, dir, "verify")
			if code != exitFailed || !strings.Contains(out, damaged) || strings.Contains(out, healthy) {
				t.Errorf("verify after: exit %d, want 1\n%s", code, out)
			}
		})
	}
}

// TestRunsStatusFilter: --status keeps the runs in the statuses named, pending
// among them; an unknown one is refused.
func TestRunsStatusFilter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	done := runIDOf(t, must(t, dir, exitDone, "submit", fixture("small-refund.json")))
	waiting := submitWaiting(t, dir)
	rejected := runIDOf(t, must(t, dir, exitWaiting, "submit", fixture("reship-planter.json")))
	must(t, dir, exitEnded, "reject", rejected, "--as", lead1, "--reason", "no photo")

	ids := func(vs []workflow.RunView) []string {
		var s []string
		for _, v := range vs {
			s = append(s, v.ID)
		}
		return s
	}
	if got := ids(runs(t, dir, "--status", "waiting_approval")); !slices.Equal(got, []string{waiting}) {
		t.Errorf("waiting runs %v, want [%s]", got, waiting)
	}
	if got := ids(runs(t, dir, "--status", "WAITING_APPROVAL")); !slices.Equal(got, []string{waiting}) {
		t.Errorf("runs --status in capitals: %v, want [%s]", got, waiting)
	}
	// pending is what /runs pending lists: the runs waiting for a decision.
	if got := ids(runs(t, dir, "--status", "pending")); !slices.Equal(got, []string{waiting}) {
		t.Errorf("runs --status pending: %v, want [%s]", got, waiting)
	}
	if got := ids(runs(t, dir, "--status", "Pending,rejected")); !slices.Equal(got, []string{waiting, rejected}) {
		t.Errorf("runs --status Pending,rejected: %v, want [%s %s]", got, waiting, rejected)
	}
	if got := ids(runs(t, dir, "--status", "done,rejected")); !slices.Equal(got, []string{done, rejected}) {
		t.Errorf("done and rejected runs %v", got)
	}
	if got := ids(runs(t, dir)); !slices.Equal(got, []string{done, waiting, rejected}) {
		t.Errorf("all runs %v, want oldest first", got)
	}
	if got := runs(t, dir, "--status", "expired"); len(got) != 0 {
		t.Errorf("expired runs %v", ids(got))
	}
	text := must(t, dir, 0, "runs", "--status", "waiting_approval")
	if !strings.Contains(text, waiting) || strings.Contains(text, done) || strings.Contains(text, rejected) {
		t.Errorf("runs --status waiting_approval:\n%s", text)
	}
	for _, bad := range []string{"bogus", "waiting", "done,bogus", "pendings"} {
		code, out, errs := signoff(t, dir, "runs", "--status", bad)
		if code != exitRefused || !strings.Contains(errs, "unknown status") || !strings.Contains(errs, "or pending") || out != "" {
			t.Errorf("runs --status %s: exit %d, %q %q", bad, code, out, errs)
		}
	}
}

// TestRunsAPageAtATime: runs lists a page (--limit) and says how to read
// the next one, which starts after the last run listed (--after); the pages
// together are every run, oldest first, each once. A bad --limit or an
// unknown --after run is refused.
func TestRunsAPageAtATime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var want []string
	for range 5 {
		want = append(want, runIDOf(t, must(t, dir, exitWaiting, "run", "T-65273")))
	}
	var got []string
	args := []string{"runs", "--status", "pending", "--limit", "2"}
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatalf("the pages do not end: %v", got)
		}
		text := must(t, dir, 0, args...)
		n := 0
		for _, id := range want {
			if strings.Contains(text, id) {
				got, n = append(got, id), n+1
			}
		}
		if n == 0 || n > 2 {
			t.Fatalf("page %d lists %d runs:\n%s", page, n, text)
		}
		_, next, ok := strings.Cut(text, "more runs: signoff ")
		if !ok {
			break
		}
		args = strings.Fields(strings.TrimSpace(next))
	}
	if !slices.Equal(got, want) {
		t.Errorf("the pages list %v, want every run once, oldest first: %v", got, want)
	}
	if all := runs(t, dir, "--limit", "0"); len(all) != len(want) {
		t.Errorf("runs --limit 0 lists %d runs, want all %d", len(all), len(want))
	}
	code, out, errs := signoff(t, dir, "runs", "--json", "--limit", "3", "--after", want[0])
	var vs []workflow.RunView
	if err := json.Unmarshal([]byte(out), &vs); err != nil || code != 0 || len(vs) != 3 || vs[0].ID != want[1] ||
		!strings.Contains(errs, "more runs: signoff runs ") || !strings.Contains(errs, " --json=true --limit=3 ") || !strings.HasSuffix(strings.TrimSpace(errs), " --after "+want[3]) {
		t.Errorf("runs --json --limit 3 --after the first: exit %d, %d runs (%v)\nstderr: %s", code, len(vs), err, errs)
	}
	for _, bad := range [][]string{{"--limit", "-1"}, {"--after", "run_nope"}} {
		code, out, errs := signoff(t, dir, append([]string{"runs"}, bad...)...)
		if code == 0 || out != "" || !strings.Contains(errs, bad[0]) {
			t.Errorf("runs %v: exit %d, %q %q", bad, code, out, errs)
		}
	}
}

// TestForkOfARejectedRun: the fork is a new run that waits for its own approval.
func TestForkOfARejectedRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	must(t, dir, exitEnded, "reject", id, "--as", lead1, "--reason", "check with the bank first")
	old := showJSON(t, dir, id)

	out := must(t, dir, exitWaiting, "fork", id, "--at", "1")
	fork := runIDOf(t, out)
	if fork == id {
		t.Fatal("the fork has the same id")
	}
	v := showJSON(t, dir, fork)
	if v.Status != record.StatusWaitingApproval || v.Fingerprint == "" || v.Fingerprint == old.Fingerprint {
		t.Errorf("fork: status %s fingerprint %q (old %q)", v.Status, v.Fingerprint, old.Fingerprint)
	}
	if v.ForkedFrom == nil || v.ForkedFrom.RunID != id || v.ForkedFrom.Seq != 1 {
		t.Errorf("forked_from %+v", v.ForkedFrom)
	}
	if len(v.Decisions) != 0 || len(v.Requests) != 1 || v.Requests[0].Status != record.RequestPending {
		t.Errorf("the fork carried decisions %+v / requests %+v", v.Decisions, v.Requests)
	}
	if string(v.Actions[0].Args) != string(old.Actions[0].Args) {
		t.Errorf("fork args %s, old %s", v.Actions[0].Args, old.Actions[0].Args)
	}
	if got := showJSON(t, dir, id); got.Status != record.StatusRejected {
		t.Errorf("the original is %s", got.Status)
	}
	noChanges(t, dir)

	// The old fingerprint approves nothing on the fork.
	if code, _, _ := signoff(t, dir, "approve", fork, "--as", lead1, "--fingerprint", old.Fingerprint); code != exitRefused {
		t.Errorf("approve the fork with the old fingerprint: exit %d", code)
	}
	must(t, dir, exitDone, "approve", fork, "--as", lead1, "--fingerprint", v.Fingerprint)
	oneRefund(t, dir, fork+"/1", "119.00")

	for _, at := range []string{"0", "99"} {
		if code, _, _ := signoff(t, dir, "fork", id, "--at", at); code != exitRefused {
			t.Errorf("fork --at %s: exit %d", at, code)
		}
	}
}

// TestEditedApproval: the edited refund runs once, with the edited amount.
func TestEditedApproval(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	before := showJSON(t, dir, id)
	edit := `{"order_id": "LK-507862", "payment_id": "PAY-507862-2", "amount": 60.00, "currency": "CAD", "reason_code": "RFD-DOUBLE"}`
	must(t, dir, exitDone, "approve", id, "--as", lead1, "--edit", edit, "--reason", "partial refund agreed")
	oneRefund(t, dir, id+"/1", "60.00")
	v := showJSON(t, dir, id)
	var args map[string]any
	if err := json.Unmarshal(v.Actions[0].Args, &args); err != nil || args["amount"] != 60.0 {
		t.Errorf("stored args %s", v.Actions[0].Args)
	}
	if v.Fingerprint == before.Fingerprint {
		t.Error("the edited proposal kept the old fingerprint")
	}
	if len(v.Decisions) == 0 || len(v.Decisions[0].Edited) == 0 || !strings.Contains(string(v.Decisions[0].Edited), "60") {
		t.Errorf("decisions %+v", v.Decisions)
	}
	// One approval, and the edit before it: not two approvals. The edit
	// names its editor and what changed, old → new.
	out := must(t, dir, exitDone, "show", id)
	if n := strings.Count(out, "  approve by "+lead1); n != 1 || !strings.Contains(out, "  edit by "+lead1) ||
		!strings.Contains(out, ": partial refund agreed\n    edited by "+lead1+": amount 119 → 60\n") {
		t.Errorf("show lists %d approvals by %s, want the edit with what it changed and one approval:\n%s", n, lead1, out)
	}
	if h := must(t, dir, 0, "history", id); !strings.Contains(h, "edited by "+lead1+": amount 119 → 60; approved by "+lead1+"; executing") {
		t.Errorf("history does not say edited (what), then approved:\n%s", h)
	} else if strings.Contains(h, " \n") {
		t.Errorf("history pads lines with trailing spaces:\n%q", h)
	}
	if len(v.Operations) != 1 || v.Operations[0].Status != record.OpCommitted {
		t.Errorf("operations %+v", v.Operations)
	}
	must(t, dir, exitDone, "resume", id)
	oneRefund(t, dir, id+"/1", "60.00")
}

// TestAnEditOfARedactedFieldIsNamedNotShown: show and history name the
// fields an edit changed; a redact: field's old and new values show as
// [redacted], never as stored.
func TestAnEditOfARedactedFieldIsNamedNotShown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "signoff.yaml", "request_refund: {executor: demo}", "request_refund: {executor: demo, redact: [reason_code]}")
	id := runIDOf(t, must(t, dir, exitWaiting, "--config", cfg, "submit", fixture("refund-double-charge.json")))
	edit := `{"order_id": "LK-507862", "payment_id": "PAY-507862-2", "amount": 60.00, "currency": "CAD", "reason_code": "RFD-PARTIAL"}`
	must(t, dir, exitDone, "--config", cfg, "approve", id, "--as", lead1, "--edit", edit)
	const changed = "edited by " + lead1 + ": amount 119 → 60, reason_code [redacted] → [redacted]"
	for _, cmd := range [][]string{{"show", id}, {"history", id}} {
		out := must(t, dir, exitDone, append([]string{"--config", cfg}, cmd...)...)
		if !strings.Contains(out, changed) {
			t.Errorf("%s does not say %q:\n%s", cmd[0], changed, out)
		}
		if strings.Contains(out, "RFD-DOUBLE") || strings.Contains(out, "RFD-PARTIAL") {
			t.Errorf("%s prints a redacted value:\n%s", cmd[0], out)
		}
	}
	oneRefund(t, dir, id+"/1", "60.00")
}

// TestInvalidEditChangesNothing.
func TestInvalidEditChangesNothing(t *testing.T) {
	t.Parallel()
	args := func(amount string) string {
		return `{"order_id": "LK-507862", "payment_id": "PAY-507862-2", "amount": ` + amount + `, "currency": "CAD", "reason_code": "RFD-DOUBLE"}`
	}
	tests := []struct {
		name    string
		fixture string
		flags   []string
		want    string
	}{
		{"amount as a string", "refund-double-charge.json", []string{"--edit", args(`"60.00"`)}, "the edited arguments are invalid"},
		{"negative amount", "refund-double-charge.json", []string{"--edit", args("-5")}, "the edited arguments are invalid"},
		{"more than the charge", "refund-double-charge.json", []string{"--edit", args("500.00")}, "the edited arguments fail a check"},
		{"unknown field", "refund-double-charge.json", []string{"--edit", `{"order_id": "LK-507862", "payment_id": "PAY-507862-2", "amount": 60, "currency": "CAD", "reason_code": "RFD-DOUBLE", "note": "x"}`}, "the edited arguments are invalid"},
		{"not JSON", "refund-double-charge.json", []string{"--edit", `amount=60`}, "--edit is not valid JSON"},
		{"no such action", "refund-double-charge.json", []string{"--edit", args("60"), "--action", "2"}, "no action 2"},
		{"rule forbids editing", "reship-planter.json", []string{"--edit", `{"order_id": "LK-640436", "sku": "PLANTER", "quantity": 1}`}, "does not allow editing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			id := runIDOf(t, must(t, dir, exitWaiting, "submit", fixture(tt.fixture)))
			before := showRaw(t, dir, id)
			code, out, errs := signoff(t, dir, append([]string{"approve", id, "--as", lead1}, tt.flags...)...)
			if code != exitRefused || !strings.Contains(errs, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 saying %q (stdout %q)", code, errs, tt.want, out)
			}
			if after := showRaw(t, dir, id); after != before {
				t.Errorf("the run changed:\n%s", after)
			}
			noChanges(t, dir)
		})
	}
}

// TestInvalidConfig: refused at start with the file, the line and the reason.
func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		old, new string
		want     string
	}{
		{"bad CEL", `when: action.name == "reship_item"`, `when: actoin.name == "reship_item"`, "undeclared reference to 'actoin'"},
		{"CEL that is not a condition", `when: action.name == "reship_item"`, `when: "'reship'"`, "want bool"},
		{"unknown field", `{name: manager, members: [U0MGR00001]}`, `{name: manager, members: [U0MGR00001], colour: red}`, `unknown field "colour"`},
		{"unknown role", `approval: {role: team_lead, count: 1, expires: 72h}`, `approval: {role: team_leader, count: 1, expires: 72h}`, "team_leader"},
		{"bad duration", `approval: {role: team_lead, count: 1, expires: 72h}`, `approval: {role: team_lead, count: 1, expires: soon}`, "not a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := writeConfig(t, dir, "signoff.yaml", tt.old, tt.new)
			b, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			line := strings.Count(string(b[:strings.Index(string(b), tt.new)]), "\n") + 1
			where := cfg + ":" + strconv.Itoa(line) + ":"
			for _, args := range [][]string{
				{"--config", cfg, "submit", fixture("refund-double-charge.json")},
				{"runs", "--config", cfg},
			} {
				code, out, errs := signoff(t, dir, args...)
				if code != exitRefused || !strings.Contains(errs, where) || !strings.Contains(errs, tt.want) {
					t.Errorf("%v: exit %d, stderr %q; want 2 naming %q and %q (stdout %q)", args, code, errs, where, tt.want, out)
				}
			}
			if rs := runs(t, dir); len(rs) != 0 {
				t.Errorf("a refused config made runs: %+v", rs)
			}
		})
	}
}

// TestHigherRoleMayApprove: roles are ordered; a manager may do what a team lead may.
func TestHigherRoleMayApprove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	must(t, dir, exitDone, "approve", id, "--as", manager)
	if v := showJSON(t, dir, id); len(v.Decisions) != 1 || v.Decisions[0].Role != "manager" || v.Decisions[0].By != manager {
		t.Errorf("decisions %+v", v.Decisions)
	}
	oneRefund(t, dir, id+"/1", "119.00")
}

// TestFailedCheck: a proposal the shop would refuse fails its check (exit 1)
// and nobody is asked to approve it.
func TestFailedCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := proposal(t, dir, "too-much.json", refundJSON(agentID, "500.00", ""))
	code, out, errs := signoff(t, dir, "submit", p)
	if code != exitFailed {
		t.Fatalf("submit: exit %d, want 1\n%s%s", code, out, errs)
	}
	v := showJSON(t, dir, runIDOf(t, out))
	if v.Status != record.StatusFailed || !strings.Contains(v.Reason, "more than the 119.00 CAD left to refund") || len(v.Requests) != 0 {
		t.Errorf("run %+v", v)
	}
	if code, _, _ := signoff(t, dir, "approve", v.ID, "--as", lead1); code != exitRefused {
		t.Errorf("approve a failed run: exit %d", code)
	}
	noChanges(t, dir)
}

// TestRunUnknownTicket: the recorded agent knows three tickets; another is
// invalid input and leaves no run behind.
func TestRunUnknownTicket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, ticket := range []string{"T-00000", ""} {
		code, out, errs := signoff(t, dir, "run", ticket)
		if code != exitRefused || !strings.Contains(errs, "unknown ticket") || out != "" {
			t.Errorf("run %q: exit %d, stdout %q, stderr %q", ticket, code, out, errs)
		}
	}
	if rs := runs(t, dir); len(rs) != 0 {
		t.Errorf("runs left behind: %+v", rs)
	}
}

// TestVerifyNamesABrokenAuditChain: an audit event rewritten in the database
// is named by verify, which exits 1 as a failed check.
func TestVerifyNamesABrokenAuditChain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	must(t, dir, exitDone, "approve", id, "--as", lead1)
	n := auditEvents(t, dir)
	db, err := sqlite.OpenDB(dbPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	// Someone rewrites who approved, where the store keeps the event.
	k := 0
	if err := sqlite.EditAuditEvents(t.Context(), db, func(e *record.AuditEvent) bool {
		if e.RunID == id && e.Actor == lead1 {
			e.Actor = lead2
			k++
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if k == 0 {
		t.Fatalf("no audit event by %s among %d", lead1, n)
	}
	db.Close()
	code, out, _ := signoff(t, dir, "verify")
	if code != exitFailed || !strings.Contains(out, "damaged: audit log: audit chain broken at event") {
		t.Errorf("verify: exit %d, want 1\n%s", code, out)
	}
	// The help says the same code.
	if help := must(t, dir, exitDone, "verify", "--help"); !strings.Contains(help, "Exit 1 when\nanything is damaged") {
		t.Errorf("verify --help does not say exit 1 on damage:\n%s", help)
	}
}

// TestApproveWithTheShownFingerprint: the short fingerprint that `show` prints
// approves; a prefix too short to bind, or another fingerprint, is refused with
// a message in which the two fingerprints read differently.
func TestApproveWithTheShownFingerprint(t *testing.T) {
	t.Parallel()
	shown := regexp.MustCompile(`fingerprint ([0-9a-f]+)  \(([0-9a-f]{64})\)`)
	tests := []struct {
		name string
		// given turns what show printed (short, full) into the --fingerprint flag.
		given func(short, full string) string
		code  int
		want  string
	}{
		{"the short form show prints", func(short, _ string) string { return short }, exitDone, "DONE"},
		{"the short form in capitals", func(short, _ string) string { return strings.ToUpper(short) }, exitDone, "DONE"},
		{"a prefix too short to bind", func(_, full string) string { return full[:12] }, exitRefused, "too short to bind an approval"},
		{"the same first 16 characters, then others", func(_, full string) string {
			return full[:16] + strings.Map(func(r rune) rune {
				if r == '0' {
					return '1'
				}
				return '0'
			}, full[16:])
		}, exitRefused, "is not the current one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			id := submitWaiting(t, dir)
			m := shown.FindStringSubmatch(must(t, dir, exitWaiting, "show", id))
			if m == nil {
				t.Fatalf("show prints no fingerprint")
			}
			short, full := m[1], m[2]
			if len(short) != 16 || !strings.HasPrefix(full, short) {
				t.Fatalf("show prints fingerprint %s (%s), want the first 16 characters of the full one", short, full)
			}
			code, out, errs := signoff(t, dir, "approve", id, "--as", lead1, "--fingerprint", tt.given(short, full))
			if code != tt.code || !strings.Contains(out+errs, tt.want) {
				t.Fatalf("exit %d, want %d saying %q\nstdout:\n%s\nstderr:\n%s", code, tt.code, tt.want, out, errs)
			}
			if tt.code != exitRefused {
				return
			}
			if tt.want == "is not the current one" {
				m := regexp.MustCompile(`\(([0-9a-f]+)\) is not the current one \(([0-9a-f]+)\)`).FindStringSubmatch(errs)
				if m == nil || m[1] == m[2] || !strings.HasPrefix(full, m[2]) {
					t.Errorf("the refusal shows %s and %s, want two different fingerprints, the second the current one's prefix: %s", m[1], m[2], errs)
				}
			}
			noChanges(t, dir)
		})
	}
}

// TestJSONListsAreNeverNull: a list with nothing in it prints as [], so that a
// script can iterate over it.
func TestJSONListsAreNeverNull(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"shop", "changes", "--json"},
		{"runs", "--json"},
		{"runs", "--json", "--status", "expired"},
	} {
		if out := must(t, dir, 0, args...); strings.TrimSpace(out) != "[]" {
			t.Errorf("signoff %s printed %q, want []", strings.Join(args, " "), out)
		}
	}
}

// TestUsageErrorsSayWhatIsWrong: a missing or extra argument is named, with the
// usage line; an unknown flag or command points to --help. All exit 2.
func TestUsageErrorsSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"show"}, []string{"show needs RUN", "usage: signoff show RUN", "see signoff show --help"}},
		{[]string{"approve"}, []string{"approve needs RUN", "usage: signoff approve RUN --as USER"}},
		{[]string{"show", "run_1", "run_2"}, []string{"show: unexpected argument run_2", "usage: signoff show RUN"}},
		{[]string{"runs", "waiting"}, []string{"runs takes no arguments, got waiting"}},
		{[]string{"shop", "refund", "LK-507862"}, []string{"shop refund needs PAYMENT AMOUNT", "usage: signoff shop refund ORDER PAYMENT AMOUNT --by NAME"}},
		{[]string{"show", "--bogus", "run_1"}, []string{"unknown flag: --bogus", "see signoff show --help"}},
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate" for "signoff"`, "see signoff --help"}},
		{[]string{"shop", "frobnicate"}, []string{`unknown command "frobnicate" for "signoff shop"`, "see signoff shop --help"}},
		{[]string{"shop"}, []string{"shop needs a subcommand", "see signoff shop --help"}},
		{[]string{"runs", "--status", "bogus"}, []string{`unknown status "bogus"`}},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errs := signoff(t, dir, tt.args...)
			if code != exitRefused || out != "" {
				t.Errorf("exit %d, stdout %q; want exit 2 and nothing on stdout", code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q lacks %q", errs, w)
				}
			}
			if strings.Contains(errs, "arg(s)") {
				t.Errorf("stderr %q counts arguments instead of naming them", errs)
			}
		})
	}
}

// TestDecideHelp: the help of approve and reject says what their flags do.
func TestDecideHelp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	approve := must(t, dir, 0, "approve", "--help")
	for _, w := range []string{"replaces the action's whole argument object", "why you approve (optional"} {
		if !strings.Contains(approve, w) {
			t.Errorf("approve --help lacks %q:\n%s", w, approve)
		}
	}
	if strings.Contains(approve, "required to reject") {
		t.Errorf("approve --help speaks of rejecting:\n%s", approve)
	}
	if reject := must(t, dir, 0, "reject", "--help"); !strings.Contains(reject, "why you reject (required") || strings.Contains(reject, "--edit") {
		t.Errorf("reject --help:\n%s", reject)
	}
}

// TestDeadlineText: a deadline ahead says how long is left; one that has
// passed says how long ago, never "in just now".
func TestDeadlineText(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		deadline time.Time
		want     string
	}{
		{now.Add(-3 * time.Minute), "expired 3m ago"},
		{now.Add(-26 * time.Hour), "expired 26h00m ago"},
		{now.Add(-10 * time.Second), "expired just now"},
		{now, "expired just now"},
		{now.Add(20 * time.Second), "in less than a minute"},
		{now.Add(72 * time.Hour), "in 3d00h"},
		{now.Add(90 * time.Minute), "in 1h30m"},
	}
	for _, tt := range tests {
		if got := deadlineText(now, tt.deadline); got != tt.want {
			t.Errorf("deadlineText(now %+v) = %q, want %q", tt.deadline.Sub(now), got, tt.want)
		}
	}
}

// TestHistorySaysWhatEachCheckpointRecorded: the executing checkpoints of an
// approved run read as the approval, the intent and the receipt, which ends
// the run.
func TestHistorySaysWhatEachCheckpointRecorded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	must(t, dir, exitDone, "approve", id, "--as", lead1)
	out := must(t, dir, 0, "history", id)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"WHAT", "submitted; waiting_approval", "approved by " + lead1, "intent: action 1 (request_refund)", "receipt: action 1 (request_refund) after 1 attempt; done"}
	if len(lines) != len(want) {
		t.Fatalf("history has %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("history line %d lacks %q:\n%s", i, w, out)
		}
	}
}

// TestRunsListsActionsAndFilters: the listing shows what each run does, and
// narrows to a task or a requester.
func TestRunsListsActionsAndFilters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	refund := submitWaiting(t, dir) // T-65273 by agent:resolver
	reship := runIDOf(t, must(t, dir, exitWaiting, "submit", fixture("reship-planter.json")))
	own := runIDOf(t, must(t, dir, exitWaiting, "submit", proposal(t, dir, "own.json", refundJSON(lead1, "119.00", "own"))))

	text := must(t, dir, 0, "runs")
	for _, w := range []string{"ACTION", "SUMMARY", "request_refund", "reship_item,create_return_label", "Refund the duplicate charge."} {
		if !strings.Contains(text, w) {
			t.Errorf("runs lacks %q:\n%s", w, text)
		}
	}
	ids := func(vs []workflow.RunView) []string {
		var s []string
		for _, v := range vs {
			s = append(s, v.ID)
		}
		return s
	}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--task", "T-65273"}, []string{refund, own}},
		{[]string{"--requester", lead1}, []string{own}},
		{[]string{"--task", "T-65273", "--requester", agentID}, []string{refund}},
		{[]string{"--requester", agentID, "--status", "waiting_approval"}, []string{refund, reship}},
		{[]string{"--task", "T-00000"}, nil},
	}
	for _, tt := range tests {
		if got := ids(runs(t, dir, tt.args...)); !slices.Equal(got, tt.want) {
			t.Errorf("runs %v: %v, want %v", tt.args, got, tt.want)
		}
	}
	if text := must(t, dir, 0, "runs", "--requester", lead1); !strings.Contains(text, own) || strings.Contains(text, refund) || strings.Contains(text, reship) {
		t.Errorf("runs --requester %s:\n%s", lead1, text)
	}
}

// TestShowCountsApprovals: with two approvals required, show says how many
// have been given.
func TestShowCountsApprovals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "two.yaml",
		"approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}",
		"approval: {role: team_lead, count: 2, expires: 72h, self_approval: false, edit: true}")
	id := runIDOf(t, must(t, dir, exitWaiting, "--config", cfg, "submit", fixture("refund-double-charge.json")))
	if out := must(t, dir, exitWaiting, "--config", cfg, "show", id); !strings.Contains(out, "0 of 2 approvals so far") {
		t.Errorf("show before any approval:\n%s", out)
	}
	out := must(t, dir, exitWaiting, "--config", cfg, "approve", id, "--as", lead1)
	if !strings.Contains(out, "1 of 2 approvals so far") {
		t.Errorf("approve, the first of two:\n%s", out)
	}
	must(t, dir, exitDone, "--config", cfg, "approve", id, "--as", lead2)
	if out := must(t, dir, exitDone, "--config", cfg, "show", id); strings.Contains(out, "so far") {
		t.Errorf("a done run still counts approvals:\n%s", out)
	}
}

// TestExtendAndReassign: the deadline and the assignee of a waiting run can be
// changed from the CLI, by people the rule allows, as in Slack.
func TestExtendAndReassign(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	before := showJSON(t, dir, id)

	must(t, dir, exitWaiting, "extend", id, "1d12h", "--as", lead1)
	if v := showJSON(t, dir, id); v.Deadline == nil || !v.Deadline.Equal(before.Deadline.Add(36*time.Hour)) {
		t.Errorf("deadline %v, want %v", v.Deadline, before.Deadline.Add(36*time.Hour))
	}
	out := must(t, dir, exitWaiting, "reassign", id, "--to", lead2, "--as", lead1)
	if !strings.Contains(out, "assigned to "+lead2) {
		t.Errorf("reassign printed:\n%s", out)
	}
	if v := showJSON(t, dir, id); v.Gate == nil || v.Gate.Assignee != lead2 {
		t.Errorf("gate %+v, want assigned to %s", v.Gate, lead2)
	}
	after := showRaw(t, dir, id)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"extend", id, "2h", "--as", agentID}, "only someone with role team_lead or above may extend"},
		{[]string{"extend", id, "soon", "--as", lead1}, `not a duration: "soon"`},
		{[]string{"extend", id, "--as", lead1}, "extend needs DURATION"},
		{[]string{"extend", id, "2h"}, "--as USER"},
		{[]string{"reassign", id, "--to", "U0NOBODY01", "--as", lead1}, "U0NOBODY01 cannot approve this"},
		{[]string{"reassign", id, "--as", lead1}, "--to USER"},
		{[]string{"approve", id, "--as", lead1}, "the request is assigned to " + lead2},
	} {
		code, out, errs := signoff(t, dir, tt.args...)
		if code != exitRefused || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q (stdout %q)", tt.args, code, errs, tt.want, out)
		}
	}
	if got := showRaw(t, dir, id); got != after {
		t.Errorf("a refused command changed the run:\n%s", got)
	}
	must(t, dir, exitDone, "approve", id, "--as", lead2)
	oneRefund(t, dir, id+"/1", "119.00")
	if code, _, errs := signoff(t, dir, "extend", id, "1h", "--as", lead1); code != exitRefused || !strings.Contains(errs, "waits for no approval") {
		t.Errorf("extend of a done run: exit %d, %q", code, errs)
	}
}

// TestShopOrders: the practice shop's orders and what is left to refund, before
// and after a refund.
func TestShopOrders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	orders := func() map[string]demo.OrderWithPayments {
		t.Helper()
		out := must(t, dir, 0, "shop", "orders", "--json")
		var list []demo.OrderWithPayments
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("shop orders --json: %v\n%s", err, out)
		}
		m := map[string]demo.OrderWithPayments{}
		for _, o := range list {
			m[o.ID] = o
		}
		return m
	}
	lamp, ok := orders()["LK-507862"]
	if !ok || lamp.Customer == "" || lamp.Total != "119.00" || len(lamp.Payments) != 2 || lamp.Payments[1].ID != "PAY-507862-2" || lamp.Payments[1].Remaining != "119.00" {
		t.Fatalf("LK-507862: %+v", lamp)
	}
	text := must(t, dir, 0, "shop", "orders")
	if !strings.Contains(text, "PAY-507862-2") || !strings.Contains(text, "order(s) in the shop") {
		t.Errorf("shop orders:\n%s", text)
	}
	id := submitWaiting(t, dir)
	must(t, dir, exitDone, "approve", id, "--as", lead1)
	if p := orders()["LK-507862"].Payments[1]; p.Status != "refunded" || p.Remaining != "0.00" || p.Refunded != "119.00" {
		t.Errorf("PAY-507862-2 after the refund: %+v", p)
	}
}

// Fields an action lists under redact: are hidden on the terminal as in
// Slack, in every command that prints arguments; --json and the executor
// still get the stored values, and an --edit that leaves "[redacted]" keeps them.
func TestRedactedArgumentsAreHiddenOnTheTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "signoff.yaml", "request_refund: {executor: demo}", "request_refund: {executor: demo, redact: [reason_code]}")
	const hidden = "RFD-DOUBLE"
	prop := fixture("refund-double-charge.json")
	var printed strings.Builder
	printed.WriteString(must(t, dir, 0, "--config", cfg, "policy", "explain", prop))
	id := runIDOf(t, must(t, dir, exitWaiting, "--config", cfg, "submit", prop))
	shown := must(t, dir, exitWaiting, "--config", cfg, "show", id)
	if !strings.Contains(shown, `"reason_code":"[redacted]"`) {
		t.Errorf("show does not mark the hidden field:\n%s", shown)
	}
	printed.WriteString(shown)
	printed.WriteString(must(t, dir, 0, "--config", cfg, "runs"))
	// The arguments as show printed them, amount changed: the hidden field keeps its stored value.
	edit := `{"order_id": "LK-507862", "payment_id": "PAY-507862-2", "amount": 60.00, "currency": "CAD", "reason_code": "[redacted]"}`
	printed.WriteString(must(t, dir, exitDone, "--config", cfg, "approve", id, "--as", lead1, "--edit", edit))
	printed.WriteString(must(t, dir, exitDone, "--config", cfg, "show", id))
	printed.WriteString(must(t, dir, 0, "--config", cfg, "trace", id))
	printed.WriteString(must(t, dir, 0, "--config", cfg, "history", id))
	if strings.Contains(printed.String(), hidden) {
		t.Errorf("a redacted argument is printed on the terminal:\n%s", printed.String())
	}
	if js := must(t, dir, exitDone, "--config", cfg, "show", id, "--json"); !strings.Contains(js, hidden) {
		t.Errorf("show --json must carry the stored arguments:\n%s", js)
	}
	oneRefund(t, dir, id+"/1", "60.00")
}

// The next: line of a waiting run is a command that works as printed, bound
// to the fingerprint just shown; a run that ended without acting does not
// say "nothing has happened yet".
func TestNextHintBindsTheFingerprintAndEndedRunsSayNothingWasDone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	out := must(t, dir, exitWaiting, "show", id)
	_, hint, ok := strings.Cut(out, "  next: ")
	approve, _, _ := strings.Cut(hint, "   or   ")
	fp := policy.ShortFingerprint(showJSON(t, dir, id).Fingerprint)
	if !ok || approve != "signoff approve "+id+" --as MEMBER --fingerprint "+fp {
		t.Fatalf("the hint is %q, want the approve command bound to %s:\n%s", approve, fp, out)
	}
	code, out, errs := signoffIn(t, dir, refundJSON(agentID, "80.00", "other"), "submit", "-")
	if code != exitWaiting {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	out = must(t, dir, exitEnded, "reject", runIDOf(t, out), "--as", lead1, "--reason", "refunded already")
	if strings.Contains(out, "yet") || !strings.Contains(out, "actions (none was carried out):") {
		t.Fatalf("a rejected run should say that nothing was done, and no more:\n%s", out)
	}

	words := strings.Fields(strings.Replace(approve, "MEMBER", lead1, 1))[1:]
	must(t, dir, exitDone, words...)
}

// "Your first config" works as written: its config, its proposals and each
// command of its walkthrough, run in a folder of their own with the exit code
// the comment gives (0 where it names none).
func TestTheFirstConfigWalkthrough(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed (the reference program needs it)")
	}
	sec := docSection(t, "docs/getting-started.md", "Your first config")
	yamls, jsons, shs := blocksOf(sec, "yaml"), blocksOf(sec, "json"), blocksOf(sec, "sh")
	if len(yamls) != 1 || len(jsons) != 2 || len(shs) != 1 {
		t.Fatalf("want one config, two proposals and one walkthrough; got %d, %d, %d", len(yamls), len(jsons), len(shs))
	}
	dir := t.TempDir()
	prog, err := os.ReadFile(filepath.Join(repoRoot, "examples", "command", "ledger-action"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "ledger"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"signoff.yaml": yamls[0], "deploy.json": jsons[0], "refund.json": jsons[1], "ledger/ledger-action": string(prog)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w := newWalk(dir, nil, "RUN", "RUN2", "RUN3", "RUN4")
	for _, l := range shLines(shs[0]) {
		out, _ := w.signoff(t, l) // signoff.yaml is found in the working directory
		if words := shellWords(t, l.cmd); words[1] == "submit" && words[2] == "deploy.json" &&
			(!strings.Contains(out, `"token":"[redacted]"`) || strings.Contains(out, "tok-123")) {
			t.Errorf("submit shows the token:\n%s", out)
		}
	}
	ledger, err := os.ReadFile(filepath.Join(dir, "ledger", "ledger.jsonl"))
	if err != nil || strings.Count(string(ledger), "\n") != 1 || !strings.Contains(string(ledger), w.vars["RUN"]+"/1") {
		t.Fatalf("the deploy program's ledger, want one entry under %s/1: %q %v", w.vars["RUN"], ledger, err)
	}
}

// shellWords splits a command line as sh would for the plain words and
// single-quoted strings the docs use.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("unclosed quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
