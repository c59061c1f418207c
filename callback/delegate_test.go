package callback_test

import (
	"context"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// TestTheDoneEventSaysOnWhoseBehalf: a run approved under a delegation
// tells its callback so, on the decision its event carries.
func TestTheDoneEventSaysOnWhoseBehalf(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	run := e.submit("T-1")
	e.drain(1)
	if _, err := e.engine.Delegate(ctx, record.Delegation{From: "U0LEAD0001", To: "U0DEPUTY01", Until: e.clock.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0DEPUTY01"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	e.drain(1)
	got := e.recv.events()
	if len(got) != 2 || got[1].Run == nil || len(got[1].Run.Decisions) != 1 {
		t.Fatalf("events %+v", got)
	}
	if d := got[1].Run.Decisions[0]; d.By != "U0DEPUTY01" || d.OnBehalfOf != "U0LEAD0001" {
		t.Fatalf("the done event's decision %+v", d)
	}
}
