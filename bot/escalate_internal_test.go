package bot

import (
	"testing"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// The early role check of a click lets in whom an escalation of the current
// request names (a role or above, a user), and nobody else.
func TestMayDecideEscalated(t *testing.T) {
	roles, err := policy.NewRoles([]policy.Role{{Name: "team_lead", Members: []string{"U0LEAD0001"}}, {Name: "manager", Members: []string{"U0MGR00001"}}})
	if err != nil {
		t.Fatal(err)
	}
	v := &workflow.RunView{Gate: &record.Gate{RequestID: "req_2"}, Escalations: []record.EscalationRecord{
		{RequestID: "req_1", Users: []string{"U0OLD00001"}},
		{RequestID: "req_2", Role: "team_lead"},
		{RequestID: "req_2", Users: []string{"U0OUT00001"}},
	}}
	for _, tt := range []struct {
		who, role string
		has, want bool
	}{
		{"U0LEAD0001", "team_lead", true, true},
		{"U0MGR00001", "manager", true, true},
		{"U0OUT00001", "", false, true},
		{"U0OLD00001", "", false, false}, // an escalation of an earlier request
		{"U0NOBODY01", "", false, false},
	} {
		if got := mayDecideEscalated(roles, v, tt.who, tt.role, tt.has); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.who, got, tt.want)
		}
	}
	if mayDecideEscalated(roles, &workflow.RunView{}, "U0OUT00001", "", false) {
		t.Error("a run without a gate let someone in")
	}
}
