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
	if run.Status != record.StatusWaitingApproval {
		t.Fatalf("status = %s", run.Status)
	}
	done := make(chan waitResult, 1)
	go func() {
		v, changed, err := h.engine.WaitRun(context.Background(), run.ID, record.StatusWaitingApproval)
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
	if _, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !r.changed || r.v.Status == record.StatusWaitingApproval {
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
	v, changed, err := h.engine.WaitRun(context.Background(), run.ID, record.StatusExecuting)
	if err != nil || !changed || v.Status != record.StatusWaitingApproval {
		t.Fatalf("WaitRun(from executing) = %v %v %v", v, changed, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v, changed, err = h.engine.WaitRun(ctx, run.ID, record.StatusWaitingApproval)
	if err != nil || changed || v.Status != record.StatusWaitingApproval {
		t.Fatalf("WaitRun(ended) = %v %v %v", v, changed, err)
	}
	v, changed, err = h.engine.WaitRun(ctx, run.ID, "")
	if err != nil || changed || v.Status != record.StatusWaitingApproval {
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
	c := storage.NewChanges()
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

// TestChangesAnyWakesOnEveryRunOnce: a waiter of any change is woken by a
// change of any run, or by NotifyAll, and not by a Notify of no run; a burst
// of changes closes its channel once, and the next wait waits for the next
// change. It keeps a feed looking (Wanted) without counting as a run's waiter.
func TestChangesAnyWakesOnEveryRunOnce(t *testing.T) {
	tests := []struct {
		name   string
		notify func(c *storage.Changes)
		woken  bool
	}{
		{"a run changed", func(c *storage.Changes) { c.Notify("a") }, true},
		{"a burst of changes", func(c *storage.Changes) { c.Notify("a"); c.Notify("b", "c"); c.NotifyAll() }, true},
		{"something changed", func(c *storage.Changes) { c.NotifyAll() }, true},
		{"no run named", func(c *storage.Changes) { c.Notify() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := storage.NewChanges()
			if c.Wanted() {
				t.Fatal("Wanted with no waiter")
			}
			any1, stop1 := c.Any()
			any2, stop2 := c.Any()
			_, stopRun := c.Watch("b")
			defer stopRun()
			if !c.Wanted() || c.Waiting() != 1 {
				t.Fatalf("Wanted %v, Waiting %d; want true, 1 (the run's waiter only)", c.Wanted(), c.Waiting())
			}
			tt.notify(c)
			for i, ch := range []<-chan struct{}{any1, any2} {
				select {
				case <-ch:
					if !tt.woken {
						t.Errorf("waiter %d of any change woken", i+1)
					}
				default:
					if tt.woken {
						t.Errorf("waiter %d of any change not woken", i+1)
					}
				}
			}
			stop1()
			stop1() // twice is harmless
			stop2()
			next, stopNext := c.Any()
			select {
			case <-next:
				t.Fatal("the next wait for any change was woken by the changes before it")
			default:
			}
			c.Notify("z") // a run nobody watches
			select {
			case <-next:
			default:
				t.Fatal("the next wait was not woken by the next change")
			}
			stopNext()
			stopRun()
			if c.Wanted() {
				t.Error("Wanted after every waiter stopped")
			}
		})
	}
}

// TestAnyWakesOnTheEnginesCommit: a worker waiting for any change is woken
// by the commit of a decision on a run it never named.
func TestAnyWakesOnTheEnginesCommit(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	woken, stop := h.engine.Changes().Any()
	defer stop()
	select {
	case <-woken:
		t.Fatal("woken before any commit")
	default:
	}
	if _, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictReject, Reason: "no", Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	default:
		t.Fatal("not woken by the decision's commit")
	}
}
