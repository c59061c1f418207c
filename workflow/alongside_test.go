package workflow_test

import (
	"context"
	"fmt"
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
