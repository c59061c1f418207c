package webhook_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/examples/target"
	"github.com/signoff-dev/signoff/executor/webhook"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// newEngine is one engine on a fresh SQLite file whose only action,
// deploy_service, goes through x without approval.
func newEngine(t testing.TB, x workflow.Executor, clock workflow.Clock) *workflow.Engine {
	t.Helper()
	return newEngineApproving(t, x, clock, nil)
}

// newEngineApproving is newEngine whose deploy_service needs approval by
// team leads (U0LEAD0001, U0LEAD0002) when approval is set.
func newEngineApproving(t testing.TB, x workflow.Executor, clock workflow.Clock, approval *record.ApprovalSpec) *workflow.Engine {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "signoff.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	roles, err := policy.NewRoles([]policy.Role{
		{Name: "agent", Members: []string{"agent:deployer"}},
		{Name: "team_lead", Members: []string{"U0LEAD0001", "U0LEAD0002"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New("r1", []policy.Rule{{Name: "all", When: "true", Risk: "low", Approval: approval}}, roles)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := workflow.NewActionSpec("deploy_service", nil, x, []string{"token"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := workflow.New(workflow.Config{
		Store: st, Policy: pol, Roles: roles, Clock: clock,
		Actions: map[string]*workflow.ActionSpec{"deploy_service": spec},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func proposal() *workflow.Proposal {
	return &workflow.Proposal{
		Requester: record.Person{ID: "agent:deployer"},
		Actions:   []record.Action{{Name: "deploy_service", Args: deploy.Args}},
	}
}

// TestFailureModesOfTheTarget runs the engine against the reference target
// failing in each way it can: whenever the target committed there is exactly
// one effect, and none when it refused.
func TestFailureModesOfTheTarget(t *testing.T) {
	tests := []struct {
		name       string
		faults     []target.Fault
		lookupDown int
		noLookup   bool
		check      bool // a check_url: the execute call reuses the check's connection
		want       record.Status
		effects    int
		calls      int           // execute requests that reached the target
		waited     time.Duration // at least, on the engine's clock
		reason     string
	}{
		{name: "commit then drop the connection", faults: []target.Fault{target.DropAfterCommit}, want: record.StatusDone, effects: 1, calls: 1},
		{name: "commit then drop, no lookup_url", faults: []target.Fault{target.DropAfterCommit}, noLookup: true, want: record.StatusDone, effects: 1, calls: 2},
		{name: "500 after commit", faults: []target.Fault{target.FailAfterCommit}, want: record.StatusDone, effects: 1, calls: 1},
		{name: "500 after commit, no lookup_url", faults: []target.Fault{target.FailAfterCommit}, noLookup: true, want: record.StatusDone, effects: 1, calls: 2},
		{name: "slower than the timeout", faults: []target.Fault{target.SlowAfterCommit}, want: record.StatusDone, effects: 1, calls: 1},
		{name: "429 with Retry-After", faults: []target.Fault{target.RateLimited}, want: record.StatusDone, effects: 1, calls: 2, waited: 7 * time.Second},
		{name: "409 refusal", faults: []target.Fault{target.Refuse}, want: record.StatusNeedsAttention, effects: 0, calls: 1, reason: "refused by the target: the api is being deployed by someone else (409)"},
		{name: "lookup down for a while", faults: []target.Fault{target.FailAfterCommit}, lookupDown: 2, want: record.StatusDone, effects: 1, calls: 1},
		{name: "lookup down for too long", faults: []target.Fault{target.FailAfterCommit}, lookupDown: 100, want: record.StatusNeedsAttention, effects: 1, calls: 1, reason: "cannot be proven"},
		{name: "lookup 404 then the resend succeeds", faults: []target.Fault{target.FailBeforeCommit}, want: record.StatusDone, effects: 1, calls: 2},
		// A broken reused connection is not answered by a send behind the
		// engine's back: the one call is reconciled through the lookup.
		{name: "commit then drop a reused connection", faults: []target.Fault{target.DropAfterCommit}, check: true, want: record.StatusDone, effects: 1, calls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg, srv := startTarget(t)
			tg.SetRetryAfter(7)
			tg.SetRefusal("the api is being deployed by someone else")
			tg.Fail(tt.faults...)
			tg.LookupDown(tt.lookupDown)
			cfg := webhook.Config{URL: srv.URL + "/execute", LookupURL: srv.URL + "/operations/{key}", Timeout: 300 * time.Millisecond}
			if tt.noLookup {
				cfg.LookupURL = ""
			}
			if tt.check {
				cfg.CheckURL = srv.URL + "/check"
			}
			// It advances only when the engine waits, so that a Retry-After of
			// seconds costs the test nothing and can be measured.
			clock := clocktest.New(time.Now())
			e := newEngine(t, newExec(t, cfg), clock)
			start := clock.Now()
			run, err := e.Submit(context.Background(), proposal())
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 10 && (run.Status == record.StatusExecuting || run.Status == record.StatusRunning); i++ {
				if run, err = e.Resume(context.Background(), run.ID); err != nil {
					t.Fatal(err)
				}
			}
			if run.Status != tt.want || !strings.Contains(run.Reason, tt.reason) {
				t.Fatalf("status %s (%q), want %s (%q)", run.Status, run.Reason, tt.want, tt.reason)
			}
			if got := len(tg.Ledger()); got != tt.effects {
				t.Fatalf("effects %d, want %d", got, tt.effects)
			}
			calls := 0
			for _, r := range tg.Received() {
				if r.Path == "/execute" {
					calls++
					if r.IdempotencyKey != run.ID+"/1" {
						t.Errorf("key %q", r.IdempotencyKey)
					}
				}
			}
			if calls != tt.calls {
				t.Fatalf("execute calls %d, want %d", calls, tt.calls)
			}
			if w := clock.Now().Sub(start); w < tt.waited {
				t.Fatalf("waited %v, want at least %v", w, tt.waited)
			}
			if tt.want == record.StatusDone {
				v, err := e.Get(context.Background(), run.ID)
				if err != nil {
					t.Fatal(err)
				}
				var rc record.Receipt
				if err := json.Unmarshal(v.Operations[0].Receipt, &rc); err != nil || rc.ID != "op-1" {
					t.Fatalf("receipt %s: %v", v.Operations[0].Receipt, err)
				}
			}
		})
	}
}

// TestApprovedByNamesEachApproverOnce: an approval with an edit counts for the
// old proposal and for the edited one, but the call names the person once, and
// every approver in the order they first approved.
func TestApprovedByNamesEachApproverOnce(t *testing.T) {
	edit := json.RawMessage(`{"env":"prod","service":"api","token":"tok-123","version":"1.4.3"}`)
	approve := func(who string, edit json.RawMessage) workflow.DecideInput {
		return workflow.DecideInput{Approver: record.Person{ID: who}, Verdict: record.VerdictApprove, Via: "cli", Edit: edit}
	}
	tests := []struct {
		name      string
		count     int
		decisions []workflow.DecideInput
		want      []string
	}{
		{"one approver who edits", 1, []workflow.DecideInput{approve("U0LEAD0001", edit)}, []string{"U0LEAD0001"}},
		{"an editor then a second approver", 2, []workflow.DecideInput{approve("U0LEAD0001", edit), approve("U0LEAD0002", nil)}, []string{"U0LEAD0001", "U0LEAD0002"}},
		{"an approver, then an editor who approves again", 2, []workflow.DecideInput{approve("U0LEAD0002", nil), approve("U0LEAD0001", edit), approve("U0LEAD0002", nil)}, []string{"U0LEAD0002", "U0LEAD0001"}},
		{"two approvers, no edit", 2, []workflow.DecideInput{approve("U0LEAD0002", nil), approve("U0LEAD0001", nil)}, []string{"U0LEAD0002", "U0LEAD0001"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			tg, srv := startTarget(t)
			x := newExec(t, webhook.Config{URL: srv.URL + "/execute", LookupURL: srv.URL + "/operations/{key}"})
			e := newEngineApproving(t, x, clocktest.New(time.Now()), &record.ApprovalSpec{Role: "team_lead", Count: tt.count, Expires: 3600, Edit: true})
			run, err := e.Submit(ctx, proposal())
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range tt.decisions {
				in.RunID = run.ID
				if run, err = e.Decide(ctx, in); err != nil {
					t.Fatalf("%s: %v", in.Approver.ID, err)
				}
			}
			if run, err = e.Resume(ctx, run.ID); err != nil || run.Status != record.StatusDone {
				t.Fatalf("resume: %v, status %s (%q)", err, run.Status, run.Reason)
			}
			var bodies []target.Request
			for _, r := range tg.Received() {
				if r.Path != "/execute" {
					continue
				}
				var b target.Request
				if err := json.Unmarshal(r.Body, &b); err != nil {
					t.Fatal(err)
				}
				bodies = append(bodies, b)
			}
			if len(bodies) != 1 {
				t.Fatalf("execute calls %d, want 1", len(bodies))
			}
			if !slices.Equal(bodies[0].ApprovedBy, tt.want) {
				t.Errorf("approved_by %q, want %q", bodies[0].ApprovedBy, tt.want)
			}
		})
	}
}
