package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// duplicateDecisions is a store that refuses every transition carrying a
// decision as one whose approver's decision is stored already: what a
// second decision by the same person meets when it gets past the checks
// before the write.
type duplicateDecisions struct{ storage.Store }

func (s duplicateDecisions) Update(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	return s.Store.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return fn(ctx, duplicateDecisionsTx{tx}) })
}

type duplicateDecisionsTx struct{ storage.Tx }

func (t duplicateDecisionsTx) SaveRun(ctx context.Context, w *storage.RunWrite) error {
	if w.Decision != nil {
		return fmt.Errorf("insert decision of %s: %w", w.Decision.ApproverID, storage.ErrDuplicate)
	}
	return t.Tx.SaveRun(ctx, w)
}

// onceOnEveryEvent is a hook that queues a message under the same Once key
// at every transition: the second is refused by the store (ErrDuplicate).
type onceOnEveryEvent struct{}

func (onceOnEveryEvent) OnTransition(_ context.Context, tr *workflow.Transition) ([]*record.OutboxMessage, error) {
	return []*record.OutboxMessage{{RunID: tr.Run.ID, Kind: "slack.post", Payload: []byte(`{}`), Once: "once-" + tr.Run.ID}}, nil
}

// TestADuplicateDecisionIsAlreadyVoted: a decision refused by the store as
// a duplicate, written with its transition, is the approver's
// already_voted, and the run still waits. A duplicate that something else
// in the transaction met (a hook's message) is not said to be the
// approver's: it is an error, and the run still waits too.
func TestADuplicateDecisionIsAlreadyVoted(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	h.build(duplicateDecisions{h.store}, testPolicy(t, "rev-1", h.roles))
	_, err := h.engine.Decide(t.Context(), workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"})
	wantRefused(t, err, record.CodeAlreadyVoted)
	if got := h.get(run.ID).Status; got != record.StatusWaitingApproval {
		t.Fatalf("after the refused decision the run is %s, want waiting_approval", got)
	}

	h2 := newHarness(t, func(c *workflow.Config) { c.Hooks = append(c.Hooks, onceOnEveryEvent{}) })
	run = h2.submit(refund("PAY-1", 119))
	_, err = h2.engine.Decide(t.Context(), workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"})
	if err == nil || record.IsRefused(err, record.CodeAlreadyVoted) {
		t.Fatalf("a decision whose hook's message was refused: %v, want an error that is not already_voted", err)
	}
	if got := h2.get(run.ID).Status; got != record.StatusWaitingApproval {
		t.Fatalf("after the failed decision the run is %s, want waiting_approval", got)
	}
}

// conflicts is a store that counts the Updates that lost a
// compare-and-set.
type conflicts struct {
	storage.Store
	n int
}

func (s *conflicts) Update(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	err := s.Store.Update(ctx, fn)
	if errors.Is(err, storage.ErrConflict) {
		s.n++
	}
	return err
}

// TestADecisionOnARunWrittenSinceItsReadCountsWhatIsStored: a decision
// decides on the run as read, and when another approver's decision is
// committed between that read and its write, its write loses the
// compare-and-set (on PostgreSQL, at COMMIT, where the write travels with
// the events after the audit head it reserved) and it decides again on the
// run as it then stands: both approvals count, and the second completes the
// quorum of two.
func TestADecisionOnARunWrittenSinceItsReadCountsWhatIsStored(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			h, counted := countedHarness(t, driver)
			h.build(counted, twoLeads(t, h))
			run := h.submit(refund("PAY-1", 119))
			lost := &conflicts{Store: counted}
			st := &afterView{Store: lost}
			h.build(st, twoLeads(t, h))
			st.then = func() {
				if _, err := h.engine.Decide(t.Context(), workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
					t.Errorf("the decision in between: %v", err)
				}
			}
			got, err := h.engine.Decide(t.Context(), workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0002"}, Verdict: record.VerdictApprove, Via: "cli"})
			if err != nil {
				t.Fatalf("the decision whose run was written since its read: %v", err)
			}
			if lost.n != 1 {
				t.Fatalf("its write lost %d compare-and-sets, want 1: the other decision did not come between its read and its write", lost.n)
			}
			if got.Status != record.StatusExecuting {
				t.Fatalf("after the second of two approvals the run is %s, want executing", got.Status)
			}
			v := h.get(run.ID)
			var by []string
			for _, d := range v.Decisions {
				by = append(by, d.By)
			}
			if !slices.Equal(by, []string{"U0LEAD0001", "U0LEAD0002"}) {
				t.Fatalf("decisions by %v, want U0LEAD0001 then U0LEAD0002", by)
			}
			if _, err := h.engine.Resume(t.Context(), run.ID); err != nil {
				t.Fatal(err)
			}
			if e := h.target.Effects(); len(e) != 1 {
				t.Fatalf("effects %v, want the one refund", e)
			}
			if rep, err := h.engine.Verify(t.Context()); err != nil || !rep.OK() {
				t.Fatalf("the store after the decision made again does not verify: %v %+v", err, rep)
			}
		})
	}
}

// TestAnExecutionWhoseRunsAuditMovedSinceItsReadRunsOnce: an approved run's
// execution reads the run (and, on PostgreSQL, reserves its audit head), and
// a refused decision audited on the run before the intent's write moves
// that head. The intent's write then loses (on PostgreSQL) and the run is
// read again; either way the action runs once and the chains verify.
func TestAnExecutionWhoseRunsAuditMovedSinceItsReadRunsOnce(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			h, counted := countedHarness(t, driver)
			lost := &conflicts{Store: counted}
			st := &afterView{Store: lost}
			h.build(st, testPolicy(t, "rev-1", h.roles))
			run := h.submit(refund("PAY-1", 119))
			if _, err := h.engine.Decide(t.Context(), workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
				t.Fatal(err)
			}
			st.then = func() {
				_, err := h.engine.Decide(t.Context(), workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0002"}, Verdict: record.VerdictApprove, Via: "cli"})
				wantRefused(t, err, record.CodeAlreadyDecided)
			}
			got, err := h.engine.Resume(t.Context(), run.ID)
			if err != nil {
				t.Fatalf("the execution: %v", err)
			}
			if got.Status != record.StatusDone {
				t.Fatalf("after the execution the run is %s, want done", got.Status)
			}
			if want := map[string]int{"sqlite": 0, "postgres": 1}[driver]; lost.n != want {
				t.Fatalf("the intent's write lost %d compare-and-sets, want %d", lost.n, want)
			}
			if e := h.target.Effects(); len(e) != 1 {
				t.Fatalf("effects %v, want the one refund", e)
			}
			if rep, err := h.engine.Verify(t.Context()); err != nil || !rep.OK() {
				t.Fatalf("the store after the execution does not verify: %v %+v", err, rep)
			}
		})
	}
}
