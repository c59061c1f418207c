package workflow_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/workflow"
)

// TestARefusedClickDuringTheCallKeepsItsOutcome: a click refused while
// the call is out appends an event to the run's audit log and nothing
// else. On PostgreSQL what the call came to is written after the audit
// head the intent left, which that event moved: the write is refused, and
// made again after it. Either way the outcome is the call's (a receipt
// recorded as executed, not reconciled; a refusal that fails the
// operation), the target is called once and never asked, nothing is
// logged as a late write, and the audit log verifies.
func TestARefusedClickDuringTheCallKeepsItsOutcome(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		for _, tc := range []struct {
			name       string
			fail       error // the call's answer (nil: a receipt)
			wantStatus record.Status
			wantOp     record.OpStatus
		}{
			{name: "receipt", wantStatus: record.StatusDone, wantOp: record.OpCommitted},
			{name: "refused by the target", fail: workflow.Permanent(errors.New("card expired")), wantStatus: record.StatusNeedsAttention, wantOp: record.OpFailed},
		} {
			t.Run(driver+"/"+tc.name, func(t *testing.T) {
				if driver == "postgres" {
					pgtest.DSN(t)
				}
				h, counted := countedHarness(t, driver)
				var log recorder
				h.build(counted, testPolicy(t, "rev-1", h.roles), func(c *workflow.Config) { c.Logger = slog.New(&log) })
				run := h.submit(refund("PAY-1", 119))
				if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: record.ViaCLI}); err != nil {
					t.Fatal(err)
				}
				if tc.fail != nil {
					h.target.failNext = []error{tc.fail}
				}
				var clickErr error
				h.target.onExecute = func() {
					_, clickErr = h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0002"}, Verdict: record.VerdictReject, Via: record.ViaSlack})
				}
				got, err := h.engine.Resume(ctx, run.ID)
				if err != nil || got.Status != tc.wantStatus {
					t.Fatalf("resume: %v %v, want %s", got, err, tc.wantStatus)
				}
				if !record.IsRefused(clickErr) {
					t.Fatalf("the click during the call: %v, want it refused", clickErr)
				}
				if n := h.events(run.ID, record.EventRefused); n != 1 {
					t.Errorf("%d refusals audited, want 1", n)
				}
				if ops := h.get(run.ID).Operations; len(ops) != 1 || ops[0].Status != tc.wantOp || ops[0].Attempts != 1 {
					t.Errorf("operations %+v, want one %s after one attempt", ops, tc.wantOp)
				}
				wantExecuted := 0
				if tc.fail == nil {
					wantExecuted = 1
				}
				if ex, rc := h.events(run.ID, record.EventExecuted), h.events(run.ID, record.EventReconciled); ex != wantExecuted || rc != 0 {
					t.Errorf("%d executed and %d reconciled events, want %d and none", ex, rc, wantExecuted)
				}
				if h.target.calls != 1 || h.target.lookups != 0 {
					t.Errorf("calls %d, lookups %d; want one call and no lookup", h.target.calls, h.target.lookups)
				}
				if late := log.lines("late write refused: the run moved on without us"); len(late) != 0 {
					t.Errorf("logged %d late writes: %+v", len(late), late)
				}
				if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() {
					t.Fatalf("verify %+v %v", rep, err)
				}
			})
		}
	}
}
