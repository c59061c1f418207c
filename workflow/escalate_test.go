package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// outsider holds no role: only an escalation to them lets them decide.
const outsider = "U0OUT00001"

// escalatePolicy is testPolicy whose large refunds need count of role within
// 72h, with these escalation steps.
func escalatePolicy(t testing.TB, roles *policy.Roles, role string, count int, steps ...record.EscalationStep) *policy.Policy {
	t.Helper()
	p, err := policy.New("rev-1", []policy.Rule{
		{Name: "large-refund", When: `action.name == "request_refund" && double(action.args.amount) > 50.0`, Risk: "high",
			Approval: &record.ApprovalSpec{Role: role, Count: count, Expires: record.Seconds(72 * 3600), Edit: true}, Escalate: steps},
		{Name: "everything-else", When: "true", Risk: "low"},
	}, roles)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

// managerThenLeadsThenOutsider: the manager decides; after 4h team leads
// may too and the deadline moves 4h later; after 8h the outsider may too.
var managerThenLeadsThenOutsider = []record.EscalationStep{
	{After: 4 * 3600, Role: "team_lead", Extend: 4 * 3600},
	{After: 8 * 3600, Users: []string{outsider}},
}

func (h *harness) escalateDue(n int) {
	h.t.Helper()
	got, err := h.engine.EscalateDue(context.Background())
	if err != nil || got != n {
		h.t.Fatalf("%s: escalated %d, %v; want %d", h.clock.Now().Format(time.RFC3339), got, err, n)
	}
}

func (h *harness) escalatedEvents(id string) int {
	h.t.Helper()
	evs, err := h.engine.AuditLog(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Action == record.EventEscalated {
			n++
		}
	}
	return n
}

func (h *harness) decideAs(id, who string) error {
	_, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: id, Approver: record.Person{ID: who}, Verdict: record.VerdictApprove, Via: "cli"})
	return err
}

// Before a step is due, who it names is refused (no_role); once it is
// swept they are accepted; the deadline moved by the step's extend; each
// step is applied once; the quorum is unchanged.
func TestEscalationWidensWhoMayDecide(t *testing.T) {
	h := newHarness(t)
	h.open(escalatePolicy(t, h.roles, "manager", 2, managerThenLeadsThenOutsider...))
	run := h.submit(refund("PAY-1", 119))
	deadline := h.get(run.ID).Deadline
	h.clock.Advance(4*time.Hour - time.Millisecond)
	h.escalateDue(0)
	if err := h.decideAs(run.ID, "U0LEAD0001"); !record.IsRefused(err, record.CodeNoRole) {
		t.Fatalf("a team lead before the escalation: %v, want no_role", err)
	}
	h.clock.Advance(time.Millisecond)
	h.escalateDue(1)
	h.escalateDue(0)
	v := h.get(run.ID)
	if want := deadline.Add(4 * time.Hour); !v.Deadline.Equal(want) || len(v.Escalations) != 1 || v.Escalations[0].Role != "team_lead" || v.Escalations[0].Extended != 4*3600 {
		t.Fatalf("deadline %v (want %v), escalations %+v", v.Deadline, want, v.Escalations)
	}
	if err := h.decideAs(run.ID, "U0LEAD0001"); err != nil {
		t.Fatalf("a team lead after the escalation: %v", err)
	}
	if err := h.decideAs(run.ID, outsider); !record.IsRefused(err, record.CodeNoRole) {
		t.Fatalf("the outsider before their step: %v, want no_role", err)
	}
	h.clock.Advance(4 * time.Hour)
	h.escalateDue(1)
	if err := h.decideAs(run.ID, outsider); err != nil {
		t.Fatalf("the escalated user: %v", err)
	}
	v = h.get(run.ID)
	if v.Status == record.StatusWaitingApproval {
		t.Fatalf("status %s after two approvals", v.Status)
	}
	if h.escalatedEvents(run.ID) != 2 {
		t.Fatalf("%d escalated events", h.escalatedEvents(run.ID))
	}
	h.clock.Advance(time.Hour)
	h.escalateDue(0)
	if n, err := h.engine.Verify(ctx); err != nil || !n.OK() {
		t.Fatalf("verify %+v %v", n, err)
	}
}

// Steps that fell due while the server was down are applied after it, in
// order, in one transition, once across a restart.
func TestEscalationsDueDuringADowntimeAreAppliedOnce(t *testing.T) {
	h := newHarness(t)
	p := func() *policy.Policy {
		return escalatePolicy(t, h.roles, "manager", 1, managerThenLeadsThenOutsider...)
	}
	h.open(p())
	run := h.submit(refund("PAY-1", 119))
	deadline := h.get(run.ID).Deadline
	h.clock.Advance(9 * time.Hour)
	h.open(p())
	h.escalateDue(1)
	h.open(p())
	h.escalateDue(0)
	v := h.get(run.ID)
	if len(v.Escalations) != 2 || v.Escalations[0].Step != 0 || v.Escalations[1].Step != 1 || h.escalatedEvents(run.ID) != 1 ||
		!v.Deadline.Equal(deadline.Add(4*time.Hour)) {
		t.Fatalf("escalations %+v, %d escalated events, deadline %v", v.Escalations, h.escalatedEvents(run.ID), v.Deadline)
	}
}

// A crash right after an escalation was recorded loses nothing and applies
// nothing twice.
func TestACrashAfterAnEscalationAppliesItOnce(t *testing.T) {
	h := newHarness(t, crashAt("after-escalate"))
	h.open(escalatePolicy(t, h.roles, "manager", 1, managerThenLeadsThenOutsider...), crashAt("after-escalate"))
	run := h.submit(refund("PAY-1", 119))
	deadline := h.get(run.ID).Deadline
	h.clock.Advance(5 * time.Hour)
	if !survive(t, func() { _, _ = h.engine.EscalateDue(ctx) }) {
		t.Fatal("the failpoint after-escalate was not reached")
	}
	h.open(escalatePolicy(t, h.roles, "manager", 1, managerThenLeadsThenOutsider...))
	h.escalateDue(0)
	if v := h.get(run.ID); len(v.Escalations) != 1 || h.escalatedEvents(run.ID) != 1 || !v.Deadline.Equal(deadline.Add(4*time.Hour)) {
		t.Fatalf("escalations %+v, %d escalated events, deadline %v", v.Escalations, h.escalatedEvents(run.ID), v.Deadline)
	}
}

// An escalation to the requester's role does not lift the self-approval ban.
func TestEscalationKeepsTheSelfApprovalBan(t *testing.T) {
	h := newHarness(t)
	h.open(escalatePolicy(t, h.roles, "manager", 1, record.EscalationStep{After: 3600, Role: "agent"}))
	run := h.submit(refund("PAY-1", 119))
	h.clock.Advance(time.Hour)
	h.escalateDue(1)
	if err := h.decideAs(run.ID, "agent:resolver"); !record.IsRefused(err, record.CodeSelfApproval) {
		t.Fatalf("the requester after an escalation to their role: %v, want self_approval", err)
	}
}

// Escalation steps are outside the fingerprint: the same proposal has the
// same fingerprint with and without them; none is applied once decided.
func TestEscalationKeepsTheFingerprintAndStopsOnceDecided(t *testing.T) {
	h := newHarness(t)
	h.open(escalatePolicy(t, h.roles, "manager", 1, managerThenLeadsThenOutsider...))
	run := h.submit(refund("PAY-1", 119))
	v := h.get(run.ID)
	g := v.Gate
	want, err := policy.Fingerprint(policy.FingerprintInput{RunID: run.ID, Actions: v.Actions, Evidence: v.Evidence, Risk: g.Risk, PolicyRevision: g.PolicyRevision})
	if err != nil || g.Fingerprint != want || len(g.Escalate) != 2 {
		t.Fatalf("fingerprint %s, want %s (%v); escalate %+v", g.Fingerprint, want, err, g.Escalate)
	}
	if err := h.decideAs(run.ID, "U0MGR00001"); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(9 * time.Hour)
	h.escalateDue(0)
	if h.escalatedEvents(run.ID) != 0 {
		t.Fatal("a decided request was escalated")
	}
}

// A reminder after an escalation mentions whom it names too.
func TestARemindAfterAnEscalationMentionsWhomItNames(t *testing.T) {
	h := newHarness(t)
	p, err := policy.New("rev-1", []policy.Rule{
		{Name: "large-refund", When: `action.name == "request_refund" && double(action.args.amount) > 50.0`, Risk: "high",
			Approval: &record.ApprovalSpec{Role: "manager", Count: 1, Expires: record.Seconds(72 * 3600)},
			Remind:   []record.Seconds{3600}, Escalate: []record.EscalationStep{{After: 3600, Users: []string{outsider}}}},
		{Name: "everything-else", When: "true", Risk: "low"},
	}, h.roles)
	if err != nil {
		t.Fatal(err)
	}
	h.open(p)
	run := h.submit(refund("PAY-1", 119))
	h.clock.Advance(71 * time.Hour)
	h.escalateDue(1)
	h.remindDue(1)
	if m := h.get(run.ID).Reminders[0].Mention; len(m) != 2 || m[0] != "U0MGR00001" || m[1] != outsider {
		t.Fatalf("mention %q, want the manager and the escalated user", m)
	}
}

// An extend moves the deadline no further than the request's longest
// lifetime, and records how far it did move it.
func TestAnEscalationExtendsWithinTheLifetime(t *testing.T) {
	life := func(c *workflow.Config) { c.MaxRequestLifetime = 74 * time.Hour }
	h := newHarness(t, life)
	h.open(escalatePolicy(t, h.roles, "manager", 1, record.EscalationStep{After: 3600, Role: "team_lead", Extend: 4 * 3600}), life)
	run := h.submit(refund("PAY-1", 119))
	created := h.get(run.ID).Deadline.Add(-72 * time.Hour)
	h.clock.Advance(time.Hour)
	h.escalateDue(1)
	v := h.get(run.ID)
	if !v.Deadline.Equal(created.Add(74*time.Hour)) || v.Escalations[0].Extended != 2*3600 {
		t.Fatalf("deadline %v, want %v; escalations %+v", v.Deadline, created.Add(74*time.Hour), v.Escalations)
	}
}
