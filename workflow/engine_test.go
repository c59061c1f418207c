package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

var ctx = context.Background()

func TestGatedRunWaitsAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	if run.Status != record.StatusWaitingApproval {
		t.Fatalf("status = %s, want waiting_approval", run.Status)
	}
	v := h.get(run.ID)
	if len(v.Fingerprint) != 64 || v.Gate == nil || v.Gate.Rule != "large-refund" || v.Gate.Risk != "high" {
		t.Fatalf("gate = %+v fingerprint %q", v.Gate, v.Fingerprint)
	}
	if len(v.Requests) != 1 || v.Requests[0].Role != "team_lead" || v.Requests[0].Status != record.RequestPending {
		t.Fatalf("requests = %+v", v.Requests)
	}
	if got := h.target.Effects(); len(got) != 0 {
		t.Fatalf("effects before approval: %v", got)
	}
	// Resuming a waiting run does nothing either.
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if got := h.target.Effects(); len(got) != 0 {
		t.Fatalf("effects after resume: %v", got)
	}
}

func TestLowRiskRunsWithoutApproval(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-2", 9.95))
	if run.Status != record.StatusDone {
		t.Fatalf("status = %s (%s), want done", run.Status, run.Reason)
	}
	if got := h.target.Effects(); len(got) != 1 {
		t.Fatalf("effects = %v, want one refund", got)
	}
}

func TestRejectChangesNothingInTheTarget(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	_, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictReject, Via: "cli"})
	wantRefused(t, err, record.CodeInvalidInput) // a rejection needs a reason
	got, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictReject, Reason: "customer asked to wait", Via: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusRejected {
		t.Fatalf("status = %s", got.Status)
	}
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if e := h.target.Effects(); len(e) != 0 {
		t.Fatalf("effects after reject: %v", e)
	}
	v := h.get(run.ID)
	if len(v.Decisions) != 1 || v.Decisions[0].Decision != record.VerdictReject || v.Decisions[0].Reason != "customer asked to wait" {
		t.Fatalf("decisions = %+v", v.Decisions)
	}
}

func TestApproveRunsExactlyOnce(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	got, err := h.approve(run.ID, "U0LEAD0001")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusDone {
		t.Fatalf("status = %s (%s)", got.Status, got.Reason)
	}
	v := h.get(run.ID)
	if len(v.Operations) != 1 || v.Operations[0].Status != record.OpCommitted || !strings.Contains(string(v.Operations[0].Receipt), "RF-1") {
		t.Fatalf("operations = %+v", v.Operations)
	}
	if v.Operations[0].Key != workflow.OperationKey(run.ID, 0) {
		t.Fatalf("key = %s", v.Operations[0].Key)
	}
	// Approving again, by the same or another lead, changes nothing.
	for _, who := range []string{"U0LEAD0001", "U0LEAD0002"} {
		_, err := h.approve(run.ID, who)
		r := wantRefused(t, err, record.CodeAlreadyDecided)
		if r.By != "U0LEAD0001" || r.At.IsZero() {
			t.Fatalf("refusal names %q at %v, want U0LEAD0001", r.By, r.At)
		}
	}
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if e := h.target.Effects(); len(e) != 1 {
		t.Fatalf("effects = %v, want exactly one", e)
	}
}

func TestRefusedDecisionsChangeOnlyTheAuditLog(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(h *harness, id string)
		in      workflow.DecideInput
		code    string
		reason  string
	}{
		{name: "not a member", in: workflow.DecideInput{Approver: record.Person{ID: "U0STRANGER"}}, code: record.CodeNoRole, reason: "holds no role"},
		{name: "role too low", in: workflow.DecideInput{Approver: record.Person{ID: "agent:resolver"}}, code: record.CodeNoRole, reason: "needs team_lead"},
		{name: "stale button fingerprint", in: workflow.DecideInput{Approver: record.Person{ID: "U0LEAD0001"}, Fingerprint: strings.Repeat("ab", 32)}, code: record.CodeStaleFingerprint},
		{name: "button of another request", in: workflow.DecideInput{Approver: record.Person{ID: "U0LEAD0001"}, RequestID: "req_old"}, code: record.CodeStaleFingerprint},
		{name: "arguments tampered in the store", prepare: func(h *harness, id string) {
			tamperLatest(h, id, func(st map[string]any) {
				st["actions"].([]any)[0].(map[string]any)["args"].(map[string]any)["amount"] = 1190
			}, true)
		}, in: workflow.DecideInput{Approver: record.Person{ID: "U0LEAD0001"}}, code: record.CodeStaleFingerprint, reason: "no longer matches"},
		{name: "policy revision changed", prepare: func(h *harness, id string) {
			h.open(testPolicy(h.t, "rev-2", h.roles))
		}, in: workflow.DecideInput{Approver: record.Person{ID: "U0LEAD0001"}}, code: record.CodeStaleFingerprint, reason: "policy changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			run := h.submit(refund("PAY-1", 119))
			if tt.prepare != nil {
				tt.prepare(h, run.ID)
			}
			before, audits := h.snapshot(run.ID), h.auditCount(run.ID)
			in := tt.in
			in.RunID, in.Verdict, in.Via = run.ID, record.VerdictApprove, "cli"
			_, err := h.engine.Decide(ctx, in)
			r := wantRefused(t, err, tt.code)
			if tt.reason != "" && !strings.Contains(r.Msg, tt.reason) {
				t.Fatalf("reason %q does not say %q", r.Msg, tt.reason)
			}
			if after := h.snapshot(run.ID); after != before {
				t.Fatalf("state changed:\nbefore %s\nafter  %s", before, after)
			}
			if got := h.auditCount(run.ID); got != audits+1 {
				t.Fatalf("audit events %d, want %d (the refusal)", got, audits+1)
			}
			if e := h.target.Effects(); len(e) != 0 {
				t.Fatalf("effects: %v", e)
			}
		})
	}
}

func TestEditWhereTheRuleForbidsIt(t *testing.T) {
	h := newHarness(t)
	p, err := policy.New("rev-1", []policy.Rule{
		{Name: "large-refund", When: `double(action.args.amount) > 50.0`, Risk: "high",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(3600)}},
		{Name: "rest", When: "true", Risk: "low"},
	}, h.roles)
	if err != nil {
		t.Fatal(err)
	}
	h.open(p)
	run := h.submit(refund("PAY-1", 119))
	before := h.snapshot(run.ID)
	_, err = h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli", Edit: json.RawMessage(`{"payment_id":"PAY-1","amount":100}`)})
	wantRefused(t, err, record.CodeEditNotAllowed)
	if h.snapshot(run.ID) != before {
		t.Fatal("a refused edit changed the run")
	}
}

func TestSelfApprovalRefused(t *testing.T) {
	h := newHarness(t)
	p := refund("PAY-1", 119)
	p.Requester = record.Person{ID: "U0LEAD0001", Name: "Grace"}
	run := h.submit(p)
	before := h.snapshot(run.ID)
	_, err := h.approve(run.ID, "U0LEAD0001")
	wantRefused(t, err, record.CodeSelfApproval)
	if h.snapshot(run.ID) != before {
		t.Fatal("a refused self-approval changed the run")
	}
	if _, err := h.approve(run.ID, "U0LEAD0002"); err != nil {
		t.Fatalf("another lead may approve: %v", err)
	}
	if e := h.target.Effects(); len(e) != 1 {
		t.Fatalf("effects = %v", e)
	}
}

func TestDecisionAfterDeadlineExpiresTheRun(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	h.clock.Advance(72*time.Hour + time.Millisecond)
	_, err := h.approve(run.ID, "U0LEAD0001")
	wantRefused(t, err, record.CodeExpired)
	v := h.get(run.ID)
	if v.Status != record.StatusExpired || len(v.Decisions) != 0 {
		t.Fatalf("status %s decisions %+v", v.Status, v.Decisions)
	}
	if e := h.target.Effects(); len(e) != 0 {
		t.Fatalf("effects: %v", e)
	}
}

func TestExpireDueSweepsWaitingRuns(t *testing.T) {
	h := newHarness(t)
	old := h.submit(refund("PAY-1", 119))
	h.clock.Advance(48 * time.Hour)
	young := h.submit(refund("PAY-1", 100))
	h.clock.Advance(25 * time.Hour)
	n, err := h.engine.ExpireDue(ctx)
	if err != nil || n != 1 {
		t.Fatalf("expired %d, %v; want 1", n, err)
	}
	if s := h.get(old.ID).Status; s != record.StatusExpired {
		t.Fatalf("old run %s", s)
	}
	if s := h.get(young.ID).Status; s != record.StatusWaitingApproval {
		t.Fatalf("young run %s", s)
	}
}

func TestManualChangeWhileWaitingIsRefusedByTheTarget(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	h.target.refundByHand("PAY-1")
	got, err := h.approve(run.ID, "U0LEAD0001")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusNeedsAttention || !strings.Contains(got.Reason, "refused by the target") {
		t.Fatalf("status %s reason %q", got.Status, got.Reason)
	}
	if e := h.target.Effects(); len(e) != 1 || e[0] != "manual refund PAY-1" {
		t.Fatalf("effects = %v, want only the manual refund", e)
	}
	v := h.get(run.ID)
	if len(v.Operations) != 1 || v.Operations[0].Status != record.OpFailed {
		t.Fatalf("operations %+v", v.Operations)
	}
}

func TestTransientFailuresRetryWithTheSameKey(t *testing.T) {
	h := newHarness(t)
	h.target.failNext = []error{workflow.Transient(errors.New("503")), workflow.Transient(errors.New("503"))}
	run := h.run(refund("PAY-2", 5))
	if run.Status != record.StatusDone {
		t.Fatalf("status %s (%s)", run.Status, run.Reason)
	}
	v := h.get(run.ID)
	if v.Operations[0].Attempts != 3 || len(h.target.Effects()) != 1 {
		t.Fatalf("attempts %d effects %v", v.Operations[0].Attempts, h.target.Effects())
	}
}

func TestUnknownOutcomeIsReconciledNotRepeated(t *testing.T) {
	h := newHarness(t)
	h.target.afterFail = []error{errors.New("connection reset")} // the refund happened, the answer was lost
	run := h.submit(refund("PAY-2", 5))
	if run.Status != record.StatusDone {
		t.Fatalf("status %s (%s)", run.Status, run.Reason)
	}
	if e := h.target.Effects(); len(e) != 1 {
		t.Fatalf("effects = %v, want one", e)
	}
}

// A call that came back with an unknown outcome counts as an attempt even when
// the target then says it did not happen: the budget bounds such rounds.
func TestAnUnknownOutcomeThatDidNotHappenCountsAsAnAttempt(t *testing.T) {
	h := newHarness(t)
	h.target.failNext = []error{errors.New("connection reset before the request was read")}
	run := h.submit(refund("PAY-2", 5))
	if run.Status != record.StatusDone {
		t.Fatalf("status %s (%s)", run.Status, run.Reason)
	}
	v := h.get(run.ID)
	if v.Operations[0].Attempts != 2 || v.Operations[0].Error != "" || len(h.target.Effects()) != 1 {
		t.Fatalf("operation %+v, effects %v; want 2 attempts, no error left and one effect", v.Operations[0], h.target.Effects())
	}
}

func TestUnprovableOutcomeNeedsAttentionAndIsNeverCancelled(t *testing.T) {
	h := newHarness(t)
	h.target.afterFail = []error{errors.New("timeout")}
	h.target.lookupErr = errors.New("register unavailable")
	run := h.run(refund("PAY-2", 5))
	if run.Status != record.StatusNeedsAttention || !strings.Contains(run.Reason, "cannot be proven") {
		t.Fatalf("status %s reason %q", run.Status, run.Reason)
	}
	if v := h.get(run.ID); v.Operations[0].Status != record.OpUnknown {
		t.Fatalf("operation %+v", v.Operations[0])
	}
	_, err := h.engine.Cancel(ctx, run.ID, record.Person{ID: "U0MGR00001"}, "give up")
	wantRefused(t, err, record.CodeNotCancellable)
	if s := h.get(run.ID).Status; s != record.StatusNeedsAttention {
		t.Fatalf("status %s", s)
	}
}

func TestTwoApproversRacing(t *testing.T) {
	for i := 0; i < 5; i++ {
		h := newHarness(t)
		run := h.submit(refund("PAY-1", 119))
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, who := range []string{"U0LEAD0001", "U0LEAD0002"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[j] = h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: who}, Verdict: record.VerdictApprove, Via: "slack"})
			}()
		}
		wg.Wait()
		won := 0
		var loser *record.RefusedError
		for _, err := range errs {
			if err == nil {
				won++
				continue
			}
			loser = wantRefused(t, err, record.CodeAlreadyDecided)
		}
		if won != 1 || loser == nil {
			t.Fatalf("winners %d, errors %v", won, errs)
		}
		v := h.get(run.ID)
		if len(v.Decisions) != 1 || loser.By != v.Decisions[0].By || !loser.At.Equal(v.Decisions[0].At) {
			t.Fatalf("decisions %+v, loser told %s at %v", v.Decisions, loser.By, loser.At)
		}
		if _, err := h.engine.Resume(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
		if e := h.target.Effects(); len(e) != 1 {
			t.Fatalf("effects %v", e)
		}
	}
}

// TestIdempotencyKeyBindsTheProposal: the same key with the same proposal (in
// any encoding) is a retry and gets the first run; with a different proposal it
// is refused, naming the run that holds the key, and makes no run. A key is its
// requester's: the same key from another requester is another run, so that
// nobody can take a key first and lock out the requester who uses it.
func TestIdempotencyKeyBindsTheProposal(t *testing.T) {
	const (
		retry = iota
		refusedReuse
		anotherRun
	)
	tests := []struct {
		name   string
		change func(p *workflow.Proposal)
		want   int
	}{
		{"the same proposal", func(*workflow.Proposal) {}, retry},
		{"the same arguments in another order and spacing", func(p *workflow.Proposal) {
			p.Actions[0].Args = json.RawMessage(`{ "amount": 119.0, "payment_id": "PAY-1" }`)
		}, retry},
		{"another amount", func(p *workflow.Proposal) { p.Actions[0].Args = json.RawMessage(`{"payment_id":"PAY-1","amount":118}`) }, refusedReuse},
		{"another summary", func(p *workflow.Proposal) { p.Summary = "refund the other one" }, refusedReuse},
		{"another task", func(p *workflow.Proposal) { p.TaskID = "T-2" }, refusedReuse},
		{"other evidence", func(p *workflow.Proposal) { p.Evidence = nil }, refusedReuse},
		{"another requester, the same proposal", func(p *workflow.Proposal) { p.Requester.ID = "U0LEAD0002"; p.Requester.Name = "Someone else" }, anotherRun},
		{"another requester, another amount", func(p *workflow.Proposal) {
			p.Requester.ID = "U0LEAD0002"
			p.Actions[0].Args = json.RawMessage(`{"payment_id":"PAY-1","amount":118}`)
		}, anotherRun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			p := refund("PAY-1", 119)
			p.IdempotencyKey = "ticket-T-1"
			first := h.submit(p)
			again := refund("PAY-1", 119)
			again.IdempotencyKey = "ticket-T-1"
			tt.change(again)
			second, err := h.engine.Submit(ctx, again)
			runs := 1
			switch tt.want {
			case retry:
				if err != nil || second.ID != first.ID {
					t.Fatalf("retry: run %v, %v; want the first run %s", second, err, first.ID)
				}
			case refusedReuse:
				r := wantRefused(t, err, record.CodeIdempotencyKeyReused)
				if !errors.Is(err, record.ErrIdempotencyKeyReused) || r.RunID != first.ID || !strings.Contains(err.Error(), first.ID) {
					t.Fatalf("refusal %v (run %q), want ErrIdempotencyKeyReused naming %s", err, r.RunID, first.ID)
				}
			case anotherRun:
				if err != nil || second.ID == first.ID || second.RequesterID != again.Requester.ID || second.IdempotencyKey != "ticket-T-1" {
					t.Fatalf("another requester's key: run %+v, %v; want a run of its own beside %s", second, err, first.ID)
				}
				runs = 2
				// Each requester's retry still finds its own run.
				for _, retry := range []struct {
					p    *workflow.Proposal
					want string
				}{{p, first.ID}, {again, second.ID}} {
					if got, err := h.engine.Submit(ctx, retry.p); err != nil || got.ID != retry.want {
						t.Fatalf("%s's retry: %v, %v; want %s", retry.p.Requester.ID, got, err, retry.want)
					}
				}
			}
			all, err := h.engine.List(ctx, storage.RunFilter{})
			if err != nil || len(all) != runs {
				t.Fatalf("runs %d, %v; want %d", len(all), err, runs)
			}
		})
	}
}

// TestConcurrentRetriesOfOneSubmitGetOneRun: an agent that sends the same
// proposal with the same key from several goroutines at once (a retry that
// overlaps the first try) gets one run, the same for every try, and no error.
// The tries meet in one group commit, where the first one's run is not
// committed yet when the others find its key taken.
func TestConcurrentRetriesOfOneSubmitGetOneRun(t *testing.T) {
	const rounds, tries = 10, 8
	for round := range rounds {
		h := newHarness(t)
		ids := make([]string, tries)
		errs := make([]error, tries)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range tries {
			wg.Go(func() {
				p := refund("PAY-1", 119)
				p.IdempotencyKey = "ticket-T-1"
				<-start
				run, err := h.engine.Submit(ctx, p)
				if err == nil {
					ids[i] = run.ID
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, try %d: %v", round, i, err)
			}
			if ids[i] != ids[0] {
				t.Fatalf("round %d: one key, two runs: %s and %s", round, ids[0], ids[i])
			}
		}
		if runs, err := h.engine.List(ctx, storage.RunFilter{}); err != nil || len(runs) != 1 {
			t.Fatalf("round %d: %d runs, %v", round, len(runs), err)
		}
	}
}

// TestIdempotencyKeyBindsTheSubmittedProposal: arguments an approver edited do
// not change what the key holds: the agent's retry still gets its run.
func TestIdempotencyKeyBindsTheSubmittedProposal(t *testing.T) {
	h := newHarness(t)
	p := refund("PAY-1", 119)
	p.IdempotencyKey = "ticket-T-1"
	first := h.submit(p)
	_, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: first.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove,
		Via: "cli", Edit: json.RawMessage(`{"payment_id":"PAY-1","amount":60}`)})
	if err != nil {
		t.Fatal(err)
	}
	again := refund("PAY-1", 119)
	again.IdempotencyKey = "ticket-T-1"
	if run, err := h.engine.Submit(ctx, again); err != nil || run.ID != first.ID {
		t.Fatalf("retry after an edit: %v, %v; want run %s", run, err, first.ID)
	}
}

func TestInvalidProposalsChangeNothing(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"no requester", `{"actions":[{"name":"request_refund","args":{"payment_id":"PAY-1","amount":1}}]}`},
		{"no actions", `{"requester":{"id":"a"},"actions":[]}`},
		{"unknown action", `{"requester":{"id":"a"},"actions":[{"name":"wire_money","args":{}}]}`},
		{"schema violation", `{"requester":{"id":"a"},"actions":[{"name":"request_refund","args":{"payment_id":"PAY-1","amount":"lots"}}]}`},
		{"extra argument", `{"requester":{"id":"a"},"actions":[{"name":"request_refund","args":{"payment_id":"PAY-1","amount":1,"note":"x"}}]}`},
		{"unknown field", `{"requester":{"id":"a"},"actions":[{"name":"request_refund","args":{"payment_id":"PAY-1","amount":1}}],"priority":1}`},
		{"duplicate key", `{"requester":{"id":"a"},"actions":[{"name":"request_refund","args":{"payment_id":"PAY-1","amount":1,"amount":500}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			p, err := workflow.ParseProposal([]byte(tt.body))
			if err == nil {
				_, err = h.engine.Submit(ctx, p)
			}
			wantRefused(t, err, record.CodeInvalidInput)
			runs, lerr := h.engine.List(ctx, storage.RunFilter{})
			if lerr != nil || len(runs) != 0 || len(h.target.Effects()) != 0 {
				t.Fatalf("runs %d effects %v (%v)", len(runs), h.target.Effects(), lerr)
			}
		})
	}
}

func TestFailedCheckFailsTheRun(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-404", 10))
	if run.Status != record.StatusFailed || !strings.Contains(run.Reason, "not a captured charge") {
		t.Fatalf("status %s reason %q", run.Status, run.Reason)
	}
}

func TestEditThenApproveRunsTheEditedArguments(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	oldFP := h.get(run.ID).Fingerprint

	// Invalid edits are refused and change nothing.
	before := h.snapshot(run.ID)
	for _, bad := range []string{`{"payment_id":"PAY-1","amount":-5}`, `{"payment_id":"PAY-1"}`, `{"payment_id":"PAY-1","amount":500}`} {
		_, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli", Edit: json.RawMessage(bad)})
		wantRefused(t, err, record.CodeInvalidInput)
	}
	if h.snapshot(run.ID) != before {
		t.Fatal("a refused edit changed the run")
	}

	got, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli", Edit: json.RawMessage(`{"payment_id":"PAY-1","amount":60}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusExecuting || got.Fingerprint == oldFP {
		t.Fatalf("status %s fingerprint unchanged=%v", got.Status, got.Fingerprint == oldFP)
	}
	if got, err = h.engine.Resume(ctx, run.ID); err != nil || got.Status != record.StatusDone {
		t.Fatalf("resume: %v %v", got, err)
	}
	if e := h.target.Effects(); len(e) != 1 || !strings.Contains(e[0], "60.00") {
		t.Fatalf("effects %v, want the edited refund of 60", e)
	}
	v := h.get(run.ID)
	if len(v.Requests) != 2 || v.Requests[0].Status != record.RequestSuperseded || v.Requests[1].Status != record.RequestApproved {
		t.Fatalf("requests %+v", v.Requests)
	}
}

func TestForkNeedsItsOwnApproval(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictReject, Reason: "wrong amount", Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	fork, err := h.engine.Fork(ctx, run.ID, 1, record.Person{ID: "U0LEAD0001"})
	if err != nil {
		t.Fatal(err)
	}
	if fork.ID == run.ID || fork.Status != record.StatusWaitingApproval {
		t.Fatalf("fork %s status %s", fork.ID, fork.Status)
	}
	fv, ov := h.get(fork.ID), h.get(run.ID)
	if fv.Fingerprint == ov.Fingerprint || fv.ForkedFrom == nil || fv.ForkedFrom.RunID != run.ID || len(fv.Decisions) != 0 {
		t.Fatalf("fork view %+v", fv)
	}
	_, err = h.engine.Fork(ctx, run.ID, 99, record.Person{ID: "U0LEAD0001"})
	wantRefused(t, err, record.CodeInvalidInput)
}

func TestCancel(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	_, err := h.engine.Cancel(ctx, run.ID, record.Person{ID: "U0STRANGER"}, "no")
	wantRefused(t, err, record.CodeNoRole)
	got, err := h.engine.Cancel(ctx, run.ID, record.Person{ID: "agent:resolver"}, "duplicate ticket")
	if err != nil || got.Status != record.StatusCancelled {
		t.Fatalf("requester cancel: %v %v", got, err)
	}
	_, err = h.approve(run.ID, "U0LEAD0001")
	wantRefused(t, err, record.CodeAlreadyDecided)
	if e := h.target.Effects(); len(e) != 0 {
		t.Fatalf("effects %v", e)
	}
}

// twoLeads is a policy where a refund over 50 needs two team leads.
func twoLeads(t *testing.T, h *harness) *policy.Policy {
	t.Helper()
	p, err := policy.New("rev-1", []policy.Rule{
		{Name: "two-leads", When: `double(action.args.amount) > 50.0`, Risk: "high",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: 2, Expires: record.Seconds(3600)}},
		{Name: "rest", When: "true", Risk: "low"},
	}, h.roles)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestQuorumNeedsDistinctApprovers(t *testing.T) {
	h := newHarness(t)
	h.open(twoLeads(t, h))
	run := h.submit(refund("PAY-1", 119))
	got, err := h.approve(run.ID, "U0LEAD0001")
	if err != nil || got.Status != record.StatusWaitingApproval {
		t.Fatalf("after one approval: %v %v", got, err)
	}
	_, err = h.approve(run.ID, "U0LEAD0001")
	wantRefused(t, err, record.CodeAlreadyVoted)
	if e := h.target.Effects(); len(e) != 0 {
		t.Fatalf("effects after one of two approvals: %v", e)
	}
	// A manager outranks a team lead and counts as the second approver.
	got, err = h.approve(run.ID, "U0MGR00001")
	if err != nil || got.Status != record.StatusDone {
		t.Fatalf("after two approvals: %v %v", got, err)
	}
	if v := h.get(run.ID); len(v.Decisions) != 2 || len(h.target.Effects()) != 1 {
		t.Fatalf("decisions %+v effects %v", v.Decisions, h.target.Effects())
	}
}

// flaky fails its first checks with errors that say nothing about the outcome.
type flaky struct {
	*ledger
	failures int
	checks   int
}

func (f *flaky) Check(ctx context.Context, a record.Action) error {
	f.checks++
	if f.checks <= f.failures {
		return errors.New("connection refused")
	}
	return f.ledger.Check(ctx, a)
}

func TestChecksRetryTransientFailuresWithinABudget(t *testing.T) {
	for _, tt := range []struct {
		name     string
		failures int
		want     record.Status
	}{
		{"recovers within the budget", 2, record.StatusDone},
		{"budget exhausted", 3, record.StatusFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &flaky{failures: tt.failures}
			h := newHarness(t, func(c *workflow.Config) {
				f.ledger = c.Actions["request_refund"].Executor.(*ledger)
				spec, err := workflow.NewActionSpec("request_refund", []byte(refundSchema), f, nil)
				if err != nil {
					t.Fatal(err)
				}
				c.Actions["request_refund"] = spec
			})
			run := h.submit(refund("PAY-2", 5))
			if run.Status != tt.want {
				t.Fatalf("status %s (%s), want %s", run.Status, run.Reason, tt.want)
			}
			if v := h.get(run.ID); v.Checks[0].Attempts != min(tt.failures+1, 3) {
				t.Fatalf("check attempts %d", v.Checks[0].Attempts)
			}
		})
	}
}

// TestExtendHasACeilingAndFollowsSelfApproval: a request cannot be kept
// alive past its maximum lifetime by repeated extensions (the third of three
// identical 10-day extensions is refused, whoever sends it and however often),
// and a requester who may not approve their own request may not extend it.
func TestExtendHasACeilingAndFollowsSelfApproval(t *testing.T) {
	h := newHarness(t, func(c *workflow.Config) { c.MaxRequestLifetime = 25 * 24 * time.Hour })
	run := h.submit(refund("PAY-1", 119)) // waits 72h for a team lead
	lead := record.Person{ID: "U0LEAD0002"}
	for i := range 2 {
		if _, err := h.engine.Extend(ctx, run.ID, lead, 10*24*time.Hour); err != nil {
			t.Fatalf("extension %d: %v", i+1, err)
		}
	}
	before := h.get(run.ID).Deadline
	_, err := h.engine.Extend(ctx, run.ID, lead, 10*24*time.Hour)
	r := wantRefused(t, err, record.CodeInvalidInput)
	if !strings.Contains(r.Msg, "a request lives at most 25 days") {
		t.Fatalf("refusal %q", r.Msg)
	}
	if after := h.get(run.ID).Deadline; !after.Equal(*before) {
		t.Fatalf("a refused extension moved the deadline from %s to %s", before, after)
	}
	_, err = h.engine.Extend(ctx, run.ID, lead, 26*24*time.Hour)
	wantRefused(t, err, record.CodeInvalidInput)

	p := refund("PAY-2", 9.95)
	p.Requester = record.Person{ID: "U0LEAD0001"} // a team lead asks; the rule forbids approving one's own
	p.Actions[0].Args = []byte(`{"payment_id":"PAY-1","amount":100}`)
	own := h.submit(p)
	if own.Status != record.StatusWaitingApproval {
		t.Fatalf("status %s", own.Status)
	}
	_, err = h.engine.Extend(ctx, own.ID, record.Person{ID: "U0LEAD0001"}, time.Hour)
	wantRefused(t, err, record.CodeSelfApproval)
	if _, err := h.engine.Extend(ctx, own.ID, record.Person{ID: "U0LEAD0002"}, time.Hour); err != nil {
		t.Fatalf("another lead extends: %v", err)
	}
}

func TestReassignAndExtend(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	_, err := h.engine.Reassign(ctx, run.ID, record.Person{ID: "U0LEAD0001"}, record.Person{ID: "agent:resolver"})
	wantRefused(t, err, record.CodeNoRole) // the agent cannot approve
	if _, err := h.engine.Reassign(ctx, run.ID, record.Person{ID: "U0LEAD0001"}, record.Person{ID: "U0LEAD0002"}); err != nil {
		t.Fatal(err)
	}
	// Assigned to lead 2: lead 1 may no longer decide, a manager still may.
	_, err = h.approve(run.ID, "U0LEAD0001")
	wantRefused(t, err, record.CodeNoRole)

	_, err = h.engine.Extend(ctx, run.ID, record.Person{ID: "agent:resolver"}, 24*time.Hour)
	wantRefused(t, err, record.CodeNoRole)
	if _, err := h.engine.Extend(ctx, run.ID, record.Person{ID: "U0LEAD0002"}, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(80 * time.Hour) // past the first deadline, inside the extended one
	if n, err := h.engine.ExpireDue(ctx); err != nil || n != 0 {
		t.Fatalf("expired %d %v", n, err)
	}
	if got, err := h.approve(run.ID, "U0LEAD0002"); err != nil || got.Status != record.StatusDone {
		t.Fatalf("assignee approves: %v %v", got, err)
	}
}

func TestTextEveryStoreCanKeep(t *testing.T) {
	h := newHarness(t)
	p := refund("PAY-1", 119)
	p.Summary = "refund\x00"
	_, err := h.engine.Submit(ctx, p)
	wantRefused(t, err, record.CodeInvalidInput)
	p = refund("PAY-1", 119)
	p.TaskID = "T-\xff"
	_, err = h.engine.Submit(ctx, p)
	wantRefused(t, err, record.CodeInvalidInput)

	run := h.submit(refund("PAY-1", 119))
	before := h.snapshot(run.ID)
	_, err = h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictReject, Reason: "no\x00", Via: "cli"})
	wantRefused(t, err, record.CodeInvalidInput)
	if h.snapshot(run.ID) != before {
		t.Fatal("a refused decision changed the run")
	}
}

func TestForkOfAFinishedLowRiskRunWaitsForAPerson(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-2", 4))
	if run.Status != record.StatusDone {
		t.Fatalf("source run %s", run.Status)
	}
	fork, err := h.engine.Fork(ctx, run.ID, 1, record.Person{ID: "U0LEAD0001"})
	if err != nil {
		t.Fatal(err)
	}
	if fork.Status != record.StatusWaitingApproval {
		t.Fatalf("fork %s: a fork must not run again without a person", fork.Status)
	}
	if v := h.get(fork.ID); v.Requests[0].Role != "manager" || !strings.Contains(v.Gate.Rule, "fork of "+run.ID) {
		t.Fatalf("fork gate %+v requests %+v", v.Gate, v.Requests)
	}
	if e := h.target.Effects(); len(e) != 1 {
		t.Fatalf("effects %v, want only the source run's", e)
	}
}

func TestCancelNeedsMoreThanTheLowestRole(t *testing.T) {
	h := newHarness(t)
	p := refund("PAY-1", 119)
	p.Requester = record.Person{ID: "U0LEAD0002"}
	run := h.submit(p)
	_, err := h.engine.Cancel(ctx, run.ID, record.Person{ID: "agent:resolver"}, "not mine to cancel")
	wantRefused(t, err, record.CodeNoRole)
	_, err = h.engine.Cancel(ctx, run.ID, record.Person{ID: "U0LEAD0001"}, "bad\xffreason")
	wantRefused(t, err, record.CodeInvalidInput)
	if got, err := h.engine.Cancel(ctx, run.ID, record.Person{ID: "U0LEAD0001"}, "duplicate"); err != nil || got.Status != record.StatusCancelled {
		t.Fatalf("lead cancels: %v %v", got, err)
	}
}

// TestUnknownRequesters: a requester who holds no role is refused before
// anything is written, even for an action policy lets through unapproved,
// unless the engine lets anyone propose; conditions see the requester's role.
func TestUnknownRequesters(t *testing.T) {
	stranger := func() *workflow.Proposal {
		p := refund("PAY-1", 5) // small: policy lets it through without a person
		p.Requester = record.Person{ID: "U0STRANGER", Name: "Someone"}
		return p
	}
	t.Run("refused by default", func(t *testing.T) {
		h := newHarness(t)
		_, err := h.engine.Submit(ctx, stranger())
		wantRefused(t, err, record.CodeUnknownRequester)
		runs, lerr := h.engine.List(ctx, storage.RunFilter{})
		if lerr != nil || len(runs) != 0 || len(h.target.Effects()) != 0 {
			t.Fatalf("runs %d effects %v (%v)", len(runs), h.target.Effects(), lerr)
		}
	})
	t.Run("allowed when the config says so", func(t *testing.T) {
		h := newHarness(t, func(c *workflow.Config) { c.AllowUnknownRequesters = true })
		if run := h.submit(stranger()); run.Status != record.StatusDone {
			t.Fatalf("status %s, want done", run.Status)
		}
	})
	t.Run("policy sees the role", func(t *testing.T) {
		h := newHarness(t, func(c *workflow.Config) { c.AllowUnknownRequesters = true })
		p, err := policy.New("rev-role", []policy.Rule{
			{Name: "roleless", When: `requester.role == ""`, Risk: "high",
				Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: 3600}},
			{Name: "agents", When: `requester.role == "agent"`, Risk: "low"},
		}, h.roles)
		if err != nil {
			t.Fatal(err)
		}
		h.build(h.store, p, func(c *workflow.Config) { c.AllowUnknownRequesters = true })
		if run := h.submit(stranger()); run.Status != record.StatusWaitingApproval {
			t.Errorf("a requester in no role: status %s, want waiting_approval", run.Status)
		}
		if run := h.submit(refund("PAY-1", 5)); run.Status != record.StatusDone {
			t.Errorf("the agent: status %s, want done", run.Status)
		}
	})
}

// TestExplainDecidesAsSubmitDoes: Explain gives the rule, risk and approval
// Submit then applies, refuses what Submit refuses, and writes nothing.
func TestExplainDecidesAsSubmitDoes(t *testing.T) {
	h := newHarness(t)
	cfg := workflow.Config{Policy: h.engine.Policy(), Roles: h.roles, Actions: map[string]*workflow.ActionSpec{}}
	spec, err := workflow.NewActionSpec("request_refund", []byte(refundSchema), h.target, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Actions["request_refund"] = spec
	for i, amount := range []float64{119, 5} {
		ex, err := workflow.Explain(ctx, cfg, refund("PAY-1", amount))
		if err != nil {
			t.Fatalf("Explain: %v", err)
		}
		if runs, _ := h.engine.List(ctx, storage.RunFilter{}); len(runs) != i {
			t.Fatalf("Explain wrote runs: %+v", runs)
		}
		run := h.submit(refund("PAY-1", amount))
		v := h.get(run.ID)
		if ex.Gate.Rule != v.Gate.Rule || ex.Gate.Risk != v.Gate.Risk || (ex.Gate.Approval == nil) != (v.Gate.Approval == nil) ||
			len(ex.Actions) != 1 || ex.Actions[0].Rule != v.Gate.Rule || ex.RequesterRole != "agent" {
			t.Errorf("amount %v: Explain %+v, Submit gated %+v", amount, ex, v.Gate)
		}
	}
	p := refund("PAY-1", 5)
	p.Requester.ID = "U0STRANGER"
	_, err = workflow.Explain(ctx, cfg, p)
	wantRefused(t, err, record.CodeUnknownRequester)
}

// TestARetriedSubmitLeavesTheCallToTheFirstTry: an agent's retry of a submit
// that is still executing (its call to the target not answered yet) gets the
// run as it stands, executing, and calls nothing: one goroutine of a process
// executes a run at a time, and the first try finishes the run.
func TestARetriedSubmitLeavesTheCallToTheFirstTry(t *testing.T) {
	h := newHarness(t)
	inCall, answer := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	h.target.onExecute = func() {
		if calls.Add(1) == 1 { // the first call waits for its answer; any other goes through
			close(inCall)
			<-answer
		}
	}
	submit := func() (*record.Run, error) {
		p := refund("PAY-2", 5) // low risk: it runs at once
		p.IdempotencyKey = "ticket-T-9"
		return h.engine.Submit(ctx, p)
	}
	type result struct {
		run *record.Run
		err error
	}
	firstTry := make(chan result, 1)
	go func() {
		run, err := submit()
		firstTry <- result{run, err}
	}()
	<-inCall
	retry, err := submit()
	if err != nil || retry.Status != record.StatusExecuting {
		t.Fatalf("the retry during the first try's call: %+v, %v; want the run, executing", retry, err)
	}
	close(answer)
	r := <-firstTry
	if r.err != nil || r.run.Status != record.StatusDone || r.run.ID != retry.ID {
		t.Fatalf("the first try: %+v, %v; want run %s done", r.run, r.err, retry.ID)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the target was called %d times for one refund, want 1", n)
	}
}
