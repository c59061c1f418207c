package bot

import (
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// compositeView is refundView under "one team lead and one manager": a
// team lead approved, the manager's place waits.
func compositeView() *workflow.RunView {
	v := refundView()
	v.Gate.Approval = &record.ApprovalSpec{Role: "team_lead", Count: 2, Expires: 72 * 3600,
		Requirement: &record.Requirement{AllOf: []record.Requirement{{Role: "team_lead", Count: 1}, {Role: "manager", Count: 1}}}}
	v.Requests[0].Count = 2
	v.Decisions = []workflow.DecisionView{{RequestID: gReqID, By: leadGrace, Role: "team_lead", Decision: record.VerdictApprove, Via: "slack", At: ts("2026-11-30T11:42:10Z")}}
	v.Progress = &record.RequirementProgress{Leaves: []record.LeafFill{
		{Path: []int{0}, Role: "team_lead", Count: 1, By: []string{leadGrace}},
		{Path: []int{1}, Role: "manager", Count: 1, By: []string{}},
	}}
	return v
}

// TestCompositeMessageShowsEachPlace: the approval message says the
// requirement in words and, for each place, who filled it or that it waits.
func TestCompositeMessageShowsEachPlace(t *testing.T) {
	got := string(marshalPretty(t, RenderRun(compositeView(), goldenContext(t))))
	for _, want := range []string{"one team_lead and one manager (different people)", "team_lead ✓ \u003c@" + leadGrace + "\u003e · manager: waiting"} {
		if !strings.Contains(got, want) {
			t.Errorf("the message does not say %q:\n%s", want, got)
		}
	}
}

// TestCompositePrecheck: a person who could fill no place is told before a
// form opens; one who could is let through to the engine.
func TestCompositePrecheck(t *testing.T) {
	roles := goldenRoles(t)
	r := &record.Requirement{AllOf: []record.Requirement{{Role: "manager", Count: 1}, {Users: []string{"U0AUDIT001"}, Count: 1}}}
	if msg := precheckComposite(roles, r, leadGrace, "team_lead", true); !strings.Contains(msg, "you fill no place") {
		t.Errorf("a team lead: %q", msg)
	}
	if msg := precheckComposite(roles, r, "U0AUDIT001", "", false); msg != "" {
		t.Errorf("the named user of no role: %q", msg)
	}
}
