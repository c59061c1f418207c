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
