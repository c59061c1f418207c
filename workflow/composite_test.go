package workflow_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

const (
	devops1  = "U0DEV00001"
	devops2  = "U0DEV00002"
	security = "U0SEC00001"
	director = "U0DIR00001"
)

// compositeRules are large refunds needing req (edits allowed), and
// refunds over 10 needing one devops, with these escalation steps.
func compositeRules(req *record.Requirement, steps ...record.EscalationStep) []policy.Rule {
	return []policy.Rule{
		{Name: "large-refund", When: `action.name == "request_refund" && double(action.args.amount) > 50.0`, Risk: "high",
			Approval: &record.ApprovalSpec{Expires: record.Seconds(72 * 3600), Edit: true, Requirement: req}, Escalate: steps},
		{Name: "refund", When: `action.name == "request_refund" && double(action.args.amount) > 10.0`, Risk: "medium",
			Approval: &record.ApprovalSpec{Role: "devops", Count: 1, Expires: record.Seconds(72 * 3600)}},
		{Name: "everything-else", When: "true", Risk: "low"},
	}
}

// directorOrDevopsAndSecurity: a director, or one devops and one security.
var directorOrDevopsAndSecurity = &record.Requirement{AnyOf: []record.Requirement{{Role: "director", Count: 1},
	{AllOf: []record.Requirement{{Role: "devops", Count: 1}, {Role: "security", Count: 1}}}}}

// compositeHarness is a harness whose large refunds need
// directorOrDevopsAndSecurity, with these escalation steps.
func compositeHarness(t *testing.T, steps ...record.EscalationStep) *harness {
	t.Helper()
	return compositeHarnessOf(t, directorOrDevopsAndSecurity, steps...)
}

func compositeHarnessOf(t *testing.T, req *record.Requirement, steps ...record.EscalationStep) *harness {
	t.Helper()
	h := newHarness(t)
	roles, err := policy.NewRoles([]policy.Role{
		{Name: "agent", Members: []string{"agent:resolver"}},
		{Name: "devops", Members: []string{devops1, devops2}},
		{Name: "security", Members: []string{security}},
		{Name: "director", Members: []string{director}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.roles = roles
	p, err := policy.New("rev-1", compositeRules(req, steps...), roles)
	if err != nil {
		t.Fatal(err)
	}
	h.open(p)
	return h
}

func (h *harness) decideVerdict(id, who string, v record.Verdict) error {
	reason := ""
	if v == record.VerdictReject {
		reason = "not now"
	}
	_, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: id, Approver: record.Person{ID: who}, Verdict: v, Reason: reason, Via: "cli"})
	return err
}

func filledBy(v *workflow.RunView) [][]string {
	if v.Progress == nil {
		return nil
	}
	var out [][]string
	for _, l := range v.Progress.Leaves {
		out = append(out, l.By)
	}
	return out
}

// TestCompositeQuorum: any_of is met by one branch (a director alone);
// all_of needs both leaves, each by a different person; a second devops
// cannot fill the security leaf and is refused naming what is still
// needed, changing nothing; the request shows who filled which leaf.
func TestCompositeQuorum(t *testing.T) {
	t.Run("a director alone", func(t *testing.T) {
		h := compositeHarness(t)
		run := h.submit(refund("PAY-1", 119))
		if got := h.get(run.ID).Requests[0]; got.Role != "devops" || got.Count != 1 {
			t.Errorf("request role %s count %d, want devops 1 (the lowest role, the fewest approvals)", got.Role, got.Count)
		}
		if err := h.decideAs(run.ID, director); err != nil {
			t.Fatal(err)
		}
		if v := h.get(run.ID); v.Status != record.StatusExecuting || !v.Progress.Met {
			t.Fatalf("status %s progress %+v, want executing and met", v.Status, v.Progress)
		}
	})
	t.Run("devops and security", func(t *testing.T) {
		h := compositeHarness(t)
		run := h.submit(refund("PAY-1", 119))
		if err := h.decideAs(run.ID, devops1); err != nil {
			t.Fatal(err)
		}
		v := h.get(run.ID)
		if v.Status != record.StatusWaitingApproval || v.Progress.Met {
			t.Fatalf("after one devops: %s, met %v; want still waiting", v.Status, v.Progress.Met)
		}
		if got := filledBy(v); len(got) != 3 || len(got[0]) != 0 || len(got[1]) != 1 || got[1][0] != devops1 || len(got[2]) != 0 {
			t.Fatalf("leaves filled by %q, want [[] [devops1] []]", got)
		}
		before, audit := h.snapshot(run.ID), h.auditCount(run.ID)
		err := h.decideAs(run.ID, devops2)
		r := wantRefused(t, err, record.CodeNoRole)
		if !strings.Contains(r.Msg, "still needed: a director, or one security") {
			t.Errorf("refusal %q does not say what is still needed", r.Msg)
		}
		if h.snapshot(run.ID) != before || h.auditCount(run.ID) != audit+1 {
			t.Error("a refused second devops changed more than the audit log")
		}
		if _, err := h.approve(run.ID, security); err != nil {
			t.Fatal(err)
		}
		v = h.get(run.ID)
		if v.Status != record.StatusDone {
			t.Fatalf("after devops and security: %s, want done", v.Status)
		}
		if got := filledBy(v); got[1][0] != devops1 || got[2][0] != security {
			t.Errorf("leaves filled by %q", got)
		}
	})
	t.Run("security first fills the devops leaf, then a devops fills nothing of security's", func(t *testing.T) {
		h := compositeHarness(t)
		run := h.submit(refund("PAY-1", 119))
		if err := h.decideAs(run.ID, security); err != nil {
			t.Fatal(err)
		}
		// Security counts for devops (a higher role counts for a lower one),
		// so the devops approval that follows completes the all_of.
		if err := h.decideAs(run.ID, devops1); err != nil {
			t.Fatal(err)
		}
		if v := h.get(run.ID); v.Status != record.StatusExecuting {
			t.Fatalf("status %s, want executing", v.Status)
		}
	})
}

// TestCompositeRejectAndRoles: someone who can fill no leaf may neither
// approve nor reject; anyone who can, even with their place taken,
// rejects.
func TestCompositeRejectAndRoles(t *testing.T) {
	h := compositeHarness(t)
	run := h.submit(refund("PAY-1", 119))
	r := wantRefused(t, h.decideVerdict(run.ID, outsider, record.VerdictReject), record.CodeNoRole)
	if !strings.Contains(r.Msg, "a director, or one devops and one security (different people)") {
		t.Errorf("refusal %q does not say what the approval needs", r.Msg)
	}
	wantRefused(t, h.decideVerdict(run.ID, "agent:resolver", record.VerdictApprove), record.CodeNoRole)
	if err := h.decideAs(run.ID, devops1); err != nil {
		t.Fatal(err)
	}
	if err := h.decideVerdict(run.ID, devops2, record.VerdictReject); err != nil {
		t.Fatal(err)
	}
	if v := h.get(run.ID); v.Status != record.StatusRejected {
		t.Fatalf("status %s, want rejected", v.Status)
	}
}

// TestCompositeEscalation: once an escalation names them, someone of no
// role may fill a leaf still open, still one place per person.
func TestCompositeEscalation(t *testing.T) {
	h := compositeHarness(t, record.EscalationStep{After: 4 * 3600, Users: []string{outsider}})
	run := h.submit(refund("PAY-1", 119))
	if err := h.decideAs(run.ID, devops1); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, h.decideAs(run.ID, outsider), record.CodeNoRole)
	h.clock.Advance(4 * time.Hour)
	h.escalateDue(1)
	if err := h.decideAs(run.ID, outsider); err != nil {
		t.Fatal(err)
	}
	if v := h.get(run.ID); v.Status != record.StatusExecuting {
		t.Fatalf("status %s, want executing", v.Status)
	}
}

// TestPlainApprovalKeepsItsGate: a rule with a role and count stores its
// gate as before, without a requirement, and has no progress to show.
func TestPlainApprovalKeepsItsGate(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	v := h.get(run.ID)
	b, err := json.Marshal(v.Gate.Approval)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"role":"team_lead","count":1,"expires_seconds":259200,"self_approval":false,"edit":true}`; string(b) != want {
		t.Errorf("approval %s, want %s", b, want)
	}
	if v.Progress != nil {
		t.Errorf("progress %+v on a plain approval", v.Progress)
	}
}

// TestCompositeSelfApprovalBanHolds: a requester named by a leaf still may
// not approve their own request where the rule forbids it.
func TestCompositeSelfApprovalBanHolds(t *testing.T) {
	h := compositeHarnessOf(t, &record.Requirement{AnyOf: []record.Requirement{{Users: []string{"agent:resolver"}, Count: 1}, {Role: "director", Count: 1}}})
	run := h.submit(refund("PAY-1", 119))
	wantRefused(t, h.decideAs(run.ID, "agent:resolver"), record.CodeSelfApproval)
}

// TestCompositeMergedWithAPlainApproval: a proposal one action of which
// needs the composite approval and another one devops needs both, each
// filled by its own people: the director alone is not enough.
func TestCompositeMergedWithAPlainApproval(t *testing.T) {
	h := compositeHarness(t)
	p := refund("PAY-1", 119)
	p.Actions = append(p.Actions, record.Action{Name: "request_refund", Args: json.RawMessage(`{"payment_id":"PAY-1","amount":20}`)})
	run := h.submit(p)
	if err := h.decideAs(run.ID, director); err != nil {
		t.Fatal(err)
	}
	if v := h.get(run.ID); v.Status != record.StatusWaitingApproval {
		t.Fatalf("after the director alone: %s, want still waiting for a devops", v.Status)
	}
	if err := h.decideAs(run.ID, devops1); err != nil {
		t.Fatal(err)
	}
	if v := h.get(run.ID); v.Status != record.StatusExecuting {
		t.Fatalf("after the director and a devops: %s, want executing", v.Status)
	}
}

// TestCompositeEdit: an edit by someone who alone meets the requirement
// approves the edited proposal; an edit by someone who fills one place of
// two leaves the new request waiting with that place filled.
func TestCompositeEdit(t *testing.T) {
	edit := func(h *harness, id, who string) {
		t.Helper()
		if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: id, Approver: record.Person{ID: who}, Verdict: record.VerdictApprove,
			Via: "cli", Edit: json.RawMessage(`{"payment_id":"PAY-1","amount":100}`)}); err != nil {
			t.Fatal(err)
		}
	}
	h := compositeHarness(t)
	run := h.submit(refund("PAY-1", 119))
	edit(h, run.ID, director)
	if v := h.get(run.ID); v.Status != record.StatusExecuting {
		t.Fatalf("after the director's edit: %s, want executing", v.Status)
	}
	h = compositeHarness(t)
	run = h.submit(refund("PAY-1", 119))
	edit(h, run.ID, devops1)
	v := h.get(run.ID)
	if v.Status != record.StatusWaitingApproval || len(v.Requests) != 2 || v.Progress == nil || len(v.Progress.Leaves[1].By) != 1 {
		t.Fatalf("after a devops's edit: %s, %d requests, progress %+v", v.Status, len(v.Requests), v.Progress)
	}
}

// TestCompositeReminderMentionsWhoCanFillAnOpenPlace: once a devops
// approved, a reminder mentions the director and security, not the other
// devops, whose place is taken.
func TestCompositeReminderMentionsWhoCanFillAnOpenPlace(t *testing.T) {
	h := newHarness(t)
	roles, err := policy.NewRoles([]policy.Role{{Name: "agent", Members: []string{"agent:resolver"}},
		{Name: "devops", Members: []string{devops1, devops2}}, {Name: "security", Members: []string{security}}, {Name: "director", Members: []string{director}}})
	if err != nil {
		t.Fatal(err)
	}
	h.roles = roles
	rules := compositeRules(directorOrDevopsAndSecurity)
	rules[0].Remind = []record.Seconds{3600}
	p, err := policy.New("rev-1", rules, roles)
	if err != nil {
		t.Fatal(err)
	}
	h.open(p)
	run := h.submit(refund("PAY-1", 119))
	if err := h.decideAs(run.ID, devops1); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(71 * time.Hour)
	h.remindDue(1)
	if m := h.get(run.ID).Reminders[0].Mention; !slices.Equal(m, []string{director, security}) {
		t.Fatalf("mention %q, want the director and security", m)
	}
}
