package workflow_test

import (
	"slices"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
)

// A reminder mentions, after each who may still decide, whom a delegation
// that holds lets decide on their behalf; not the delegate of a revoked
// delegation; and once a delegate decided, neither them nor their
// delegator.
func TestARemindMentionsTheDelegatesOfWhoMayStillDecide(t *testing.T) {
	h := reminders(t, 2, 24*time.Hour, time.Hour)
	run := h.submit(refund("PAY-1", 119))
	h.delegate("U0LEAD0002", deputyID, 96*time.Hour)
	gone := h.delegate("U0LEAD0001", "U0DEPUTY02", 96*time.Hour)
	if _, err := h.engine.RevokeDelegation(ctx, gone.ID, "U0LEAD0001"); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(48 * time.Hour)
	h.remindDue(1)
	if m := h.get(run.ID).Reminders[0].Mention; !slices.Equal(m, []string{"U0LEAD0001", "U0LEAD0002", deputyID, "U0MGR00001"}) {
		t.Fatalf("mention %q, want the delegate after their delegator", m)
	}
	if err := h.decideAs(run.ID, deputyID); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(23 * time.Hour)
	h.remindDue(1)
	if m := h.get(run.ID).Reminders[1].Mention; !slices.Equal(m, []string{"U0LEAD0001", "U0MGR00001"}) {
		t.Fatalf("mention %q, want neither the delegate who decided nor their delegator", m)
	}
}

// An escalation to a user records the delegates of that user, who may
// then decide on their behalf.
func TestAnEscalationNamesTheDelegatesOfItsUsers(t *testing.T) {
	h := newHarness(t)
	h.open(escalatePolicy(t, h.roles, "manager", 1, record.EscalationStep{After: 4 * 3600, Users: []string{"U0LEAD0001"}}))
	run := h.submit(refund("PAY-1", 119))
	h.delegate("U0LEAD0001", deputyID, 24*time.Hour)
	h.delegate("U0LEAD0002", "U0DEPUTY02", 24*time.Hour) // a delegator the step does not name
	h.clock.Advance(4 * time.Hour)
	h.escalateDue(1)
	v := h.get(run.ID)
	if len(v.Escalations) != 1 || !slices.Equal(v.Escalations[0].Deputies, []record.Deputy{{To: deputyID, OnBehalfOf: "U0LEAD0001"}}) {
		t.Fatalf("escalations %+v", v.Escalations)
	}
	if err := h.decideAs(run.ID, deputyID); err != nil {
		t.Fatalf("the escalated user's delegate: %v", err)
	}
	if v := h.get(run.ID); v.Status == record.StatusWaitingApproval || v.Decisions[0].OnBehalfOf != "U0LEAD0001" {
		t.Fatalf("status %s, decisions %+v", v.Status, v.Decisions)
	}
	if n, err := h.engine.Verify(ctx); err != nil || !n.OK() {
		t.Fatalf("verify %+v %v", n, err)
	}
}
