package workflow_test

import (
	"log/slog"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/workflow"
)

// TestARefusedClickDuringTheCallKeepsTheReceipt: a click refused while the
// call is out appends an event to the run's audit log and nothing else. On
// PostgreSQL the receipt's write follows the audit head the intent left,
// which that event moved: the write is refused, and written again after it.
// Either way the receipt is recorded as the call's (executed, not
// reconciled), the target is called once and never asked, nothing is
// logged as a late write, and the audit log verifies.
func TestARefusedClickDuringTheCallKeepsTheReceipt(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
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
			var clickErr error
			h.target.onExecute = func() {
				_, clickErr = h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0002"}, Verdict: record.VerdictReject, Via: record.ViaSlack})
			}
			got, err := h.engine.Resume(ctx, run.ID)
			if err != nil || got.Status != record.StatusDone {
				t.Fatalf("resume: %v %v, want done", got, err)
			}
			if !record.IsRefused(clickErr) {
				t.Fatalf("the click during the call: %v, want it refused", clickErr)
			}
			if n := h.events(run.ID, record.EventRefused); n != 1 {
				t.Errorf("%d refusals audited, want 1", n)
			}
			if ex, rc := h.events(run.ID, record.EventExecuted), h.events(run.ID, record.EventReconciled); ex != 1 || rc != 0 {
				t.Errorf("%d executed and %d reconciled events, want the call's receipt once", ex, rc)
			}
			if h.target.calls != 1 || h.target.lookups != 0 || len(h.target.Effects()) != 1 {
				t.Errorf("calls %d, lookups %d, effects %v; want one call and no lookup", h.target.calls, h.target.lookups, h.target.Effects())
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
