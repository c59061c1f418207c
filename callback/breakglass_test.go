package callback_test

import (
	"context"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// TestAForcedApprovalIsAnEventOfItsOwn: an agent hears run.policy_bypassed
// when its run's approval is forced, once, the run showing who forced it
// and why, then run.done as usual.
func TestAForcedApprovalIsAnEventOfItsOwn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	run := e.submit("T-1")
	if _, err := e.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove,
		Reason: "outage", Via: "cli", Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	e.drain(5)
	var types []string
	for _, ev := range e.recv.events() {
		types = append(types, ev.Type)
		if ev.Type == "run.policy_bypassed" && (ev.Run.Forced == nil || ev.Run.Forced.By != "U0LEAD0001" || ev.Run.Forced.Reason != "outage") {
			t.Fatalf("the event's run shows forced %+v", ev.Run.Forced)
		}
	}
	if len(types) != 3 || types[0] != "run.waiting" || types[1] != "run.policy_bypassed" || types[2] != "run.done" {
		t.Fatalf("events %v", types)
	}
}

// TestAnAcknowledgedReviewIsToldToTheAgent: acknowledging the review of a
// forced run is run.review_acknowledged, once, the run (done, as it was)
// showing its review acknowledged, by whom and with what note.
func TestAnAcknowledgedReviewIsToldToTheAgent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	run := e.submit("T-1")
	if _, err := e.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove,
		Reason: "outage", Via: "cli", Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	e.drain(5)
	before := len(e.recv.events())
	if _, err := e.engine.AcknowledgeReview(ctx, run.ID, record.Person{ID: "U0LEAD0002"}, "checked the change"); err != nil {
		t.Fatal(err)
	}
	e.drain(5)
	evs := e.recv.events()
	if len(evs) != before+1 {
		t.Fatalf("%d events after the acknowledgement, want one more than %d", len(evs), before)
	}
	ev := evs[len(evs)-1]
	if r := ev.Run.Review; ev.Type != "run.review_acknowledged" || ev.Run.Status != record.StatusDone || r == nil ||
		r.Status != record.ReviewAcknowledged || r.AcknowledgedBy != "U0LEAD0002" || r.Note != "checked the change" || r.AcknowledgedAt == nil {
		t.Fatalf("event %s, run %s, review %+v", ev.Type, ev.Run.Status, ev.Run.Review)
	}
	if _, err := e.engine.AcknowledgeReview(ctx, run.ID, record.Person{ID: "U0LEAD0002"}, ""); !record.IsRefused(err, record.CodeAlreadyDecided) {
		t.Fatalf("a second acknowledgement: %v", err)
	}
	e.drain(5)
	if n := len(e.recv.events()); n != before+1 {
		t.Fatalf("%d events after a refused acknowledgement", n)
	}
}
