package workflow_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/signoff-dev/signoff/workflow"
)

type waitResult struct {
	v       *workflow.RunView
	changed bool
	err     error
}

// TestWaitRunWakesOnADecision: a waiter sleeps until the run leaves
// waiting_approval and is woken by the commit of the decision, not by a poll.
func TestWaitRunWakesOnADecision(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	if run.Status != workflow.StatusWaitingApproval {
		t.Fatalf("status = %s", run.Status)
	}
	done := make(chan waitResult, 1)
	go func() {
		v, changed, err := h.engine.WaitRun(context.Background(), run.ID, workflow.StatusWaitingApproval)
		done <- waitResult{v, changed, err}
	}()
	for h.engine.Changes().Waiting() == 0 { // until the waiter sleeps
		runtime.Gosched()
	}
	select {
	case r := <-done:
		t.Fatalf("returned before any change: %+v", r)
	default:
	}
	if _, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: run.ID, Approver: workflow.Person{ID: "U0LEAD0001"}, Verdict: workflow.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !r.changed || r.v.Status == workflow.StatusWaitingApproval {
		t.Fatalf("WaitRun = %+v", r)
	}
	if n := h.engine.Changes().Waiting(); n != 0 {
		t.Errorf("%d runs still watched after the wait", n)
	}
}

// TestWaitRunAnswersAtOnceOrAtTheEnd: a run already past the status is
// answered without waiting; a wait that ends answers with the run as it is.
func TestWaitRunAnswersAtOnceOrAtTheEnd(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	v, changed, err := h.engine.WaitRun(context.Background(), run.ID, workflow.StatusExecuting)
	if err != nil || !changed || v.Status != workflow.StatusWaitingApproval {
		t.Fatalf("WaitRun(from executing) = %v %v %v", v, changed, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v, changed, err = h.engine.WaitRun(ctx, run.ID, workflow.StatusWaitingApproval)
	if err != nil || changed || v.Status != workflow.StatusWaitingApproval {
		t.Fatalf("WaitRun(ended) = %v %v %v", v, changed, err)
	}
	v, changed, err = h.engine.WaitRun(ctx, run.ID, "")
	if err != nil || changed || v.Status != workflow.StatusWaitingApproval {
		t.Fatalf("WaitRun(ended, any change) = %v %v %v", v, changed, err)
	}
	if _, _, err := h.engine.WaitRun(context.Background(), "run_missing", ""); err == nil {
		t.Fatal("WaitRun of a missing run: no error")
	}
	if n := h.engine.Changes().Waiting(); n != 0 {
		t.Errorf("%d runs still watched", n)
	}
}

// TestChangesWakesOnlyTheRunThatChanged.
func TestChangesWakesOnlyTheRunThatChanged(t *testing.T) {
	c := workflow.NewChanges()
	a, stopA := c.Watch("a")
	b, stopB := c.Watch("b")
	defer stopB()
	c.Notify("a", "x")
	select {
	case <-a:
	default:
		t.Fatal("a not woken")
	}
	select {
	case <-b:
		t.Fatal("b woken by a's change")
	default:
	}
	stopA()
	stopA() // twice is harmless
	c.NotifyAll()
	select {
	case <-b:
	default:
		t.Fatal("b not woken by NotifyAll")
	}
	if c.Waiting() != 0 {
		t.Errorf("Waiting = %d", c.Waiting())
	}
}
