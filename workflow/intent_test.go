package workflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
)

// operationRows are runID's operation rows as the store holds them.
func operationRows(t *testing.T, h *harness, runID string) []*record.Operation {
	t.Helper()
	var ops []*record.Operation
	err := h.engine.Store().View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		ops, err = tx.Operations(ctx, runID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// TestAnIntentIsKeptInItsCheckpoint: the intent is recorded in the
// checkpoint of its commit, not in a row of its own. A run that crashed
// right after it shows its operation pending with its attempt counted; the
// next process asks the target first, as for any attempt without an
// outcome, and sends it once under the same attempt.
func TestAnIntentIsKeptInItsCheckpoint(t *testing.T) {
	h := newHarness(t, crashAt("after-intent"))
	run := h.submit(refund("PAY-1", 119))
	if !survive(t, func() { _, _ = h.approve(run.ID, "U0LEAD0001") }) {
		t.Fatal("failpoint after-intent never fired")
	}
	if ops := operationRows(t, h, run.ID); len(ops) != 0 {
		t.Fatalf("the intent wrote operation rows: %+v", ops)
	}
	cps := checkpointsOf(t, h, run.ID)
	st, err := chain.Decode(cps[len(cps)-1].State)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Operations) != 1 || st.Operations[0].Status != record.OpPending || st.Operations[0].Intended == nil || st.Operations[0].ArgsDigest == "" {
		t.Fatalf("the intent's checkpoint holds %+v", st.Operations)
	}
	v := h.get(run.ID)
	if len(v.Operations) != 1 || v.Operations[0].Status != record.OpPending || v.Operations[0].Attempts != 1 || v.Operations[0].Key != st.Operations[0].Key {
		t.Fatalf("shown operations %+v", v.Operations)
	}

	h.open(testPolicy(t, "rev-1", h.roles)) // a new process
	got, err := h.engine.Resume(ctx, run.ID)
	if err != nil || got.Status != record.StatusDone {
		t.Fatalf("resume: %v %v", got, err)
	}
	if h.target.lookups != 1 || h.target.calls != 1 || len(h.target.Effects()) != 1 {
		t.Fatalf("lookups %d, calls %d, effects %v; want the target asked once and called once", h.target.lookups, h.target.calls, h.target.Effects())
	}
	ops := operationRows(t, h, run.ID)
	if len(ops) != 1 || ops[0].Status != record.OpCommitted || ops[0].Attempts != 1 || len(ops[0].Receipt) == 0 {
		t.Fatalf("operation rows %+v, want one, committed after its one attempt", ops)
	}
	if v := h.get(run.ID); len(v.Operations) != 1 || v.Operations[0].Status != record.OpCommitted {
		t.Fatalf("shown operations %+v", v.Operations)
	}
	if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify %+v %v", rep, err)
	}
}

// TestAFailedAttemptWritesTheOperationRow: an attempt that comes back
// failing writes the operation's row, with the failure counted, and the
// retry moves that row on: the run ends with one row, two attempts and one
// effect.
func TestAFailedAttemptWritesTheOperationRow(t *testing.T) {
	h := newHarness(t, crashAt("after-park"))
	h.target.failNext = []error{workflow.Transient(errors.New("503"))}
	run := h.submit(refund("PAY-1", 119))
	if !survive(t, func() { _, _ = h.approve(run.ID, "U0LEAD0001") }) {
		t.Fatal("failpoint after-park never fired")
	}
	ops := operationRows(t, h, run.ID)
	if len(ops) != 1 || ops[0].Status != record.OpPending || ops[0].Attempts != 1 || ops[0].Error == "" {
		t.Fatalf("operation rows after the failed attempt %+v", ops)
	}
	h.open(testPolicy(t, "rev-1", h.roles)) // a new process
	got, err := h.engine.Resume(ctx, run.ID)
	if err != nil || got.Status != record.StatusDone {
		t.Fatalf("resume: %v %v", got, err)
	}
	ops = operationRows(t, h, run.ID)
	if len(ops) != 1 || ops[0].Status != record.OpCommitted || ops[0].Attempts != 2 || ops[0].Error != "" {
		t.Fatalf("operation rows %+v, want one, committed after two attempts", ops)
	}
	if e := h.target.Effects(); len(e) != 1 {
		t.Fatalf("effects %v, want one", e)
	}
}

// TestResolvingAnIntentWithoutARow: a run whose intent alone was recorded
// (the process died after it) and that then needed attention before any
// call (this build had no executor for the action) is resolved as the
// person found it at the target: the operation's row is written then, with
// the person's receipt, and nothing is sent.
func TestResolvingAnIntentWithoutARow(t *testing.T) {
	h := newHarness(t, withKeys(testKeys(t)), crashAt("after-intent"))
	run := h.submit(refund("PAY-1", 119))
	if !survive(t, func() { _, _ = h.approve(run.ID, "U0LEAD0001") }) {
		t.Fatal("failpoint after-intent never fired")
	}
	noExecutor := func(c *workflow.Config) { delete(c.Actions, "request_refund") }
	h.open(testPolicy(t, "rev-1", h.roles), withKeys(testKeys(t)), noExecutor)
	got, err := h.engine.Resume(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusNeedsAttention || !strings.Contains(got.Reason, "no executor") {
		t.Fatalf("status %s (%s), want needs_attention for want of an executor", got.Status, got.Reason)
	}
	if ops := operationRows(t, h, run.ID); len(ops) != 0 {
		t.Fatalf("operation rows before the resolution %+v", ops)
	}

	h.open(testPolicy(t, "rev-1", h.roles), withKeys(testKeys(t)))
	got, err = resolve(h, run.ID, "U0MGR00001", record.ResolveHappened, `{"id": "RF-9"}`)
	if err != nil || got.Status != record.StatusDone {
		t.Fatalf("resolve: %v %v", got, err)
	}
	ops := operationRows(t, h, run.ID)
	if len(ops) != 1 || ops[0].Status != record.OpCommitted || !strings.Contains(string(ops[0].Receipt), "RF-9") {
		t.Fatalf("operation rows %+v, want one with the person's receipt", ops)
	}
	if h.target.calls != 0 || h.target.lookups != 0 {
		t.Fatalf("the target was called %d times and asked %d", h.target.calls, h.target.lookups)
	}
	if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify after resolving: %+v, %v", rep, err)
	}
}
