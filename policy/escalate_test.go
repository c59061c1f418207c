package policy

import (
	"context"
	"errors"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

// A rule's escalation steps come out of Evaluate as a copy; New refuses steps
// a rule cannot keep.
func TestEscalateIsCheckedAndCopied(t *testing.T) {
	roles, err := NewRoles([]Role{{Name: "team_lead", Members: []string{"U0LEAD0001"}}, {Name: "manager", Members: []string{"U0MGR00001"}}})
	if err != nil {
		t.Fatal(err)
	}
	approval := &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: 72 * 3600}
	steps := []record.EscalationStep{{After: 3600, Role: "manager", Extend: 3600}, {After: 7200, Users: []string{"U0BOSS0001"}}}
	p, err := New("r1", []Rule{{Name: "big", When: "true", Risk: record.RiskHigh, Approval: approval, Escalate: steps}}, roles)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Evaluate(context.Background(), Input{Action: record.Action{Name: "x"}})
	if err != nil || len(out.Escalate) != 2 || out.Escalate[0].Role != "manager" || out.Escalate[1].Users[0] != "U0BOSS0001" {
		t.Fatalf("escalate %+v, %v", out.Escalate, err)
	}
	out.Escalate[1].Users[0] = "U0OTHER001"
	if again, _ := p.Evaluate(context.Background(), Input{Action: record.Action{Name: "x"}}); again.Escalate[1].Users[0] != "U0BOSS0001" {
		t.Fatalf("a caller's change reached the policy: %+v", again.Escalate)
	}
	for name, bad := range map[string][]record.EscalationStep{
		"zero":       {{After: 0, Role: "manager"}},
		"decreasing": {{After: 7200, Role: "manager"}, {After: 3600, Role: "manager"}},
		"too late":   {{After: 72 * 3600, Role: "manager"}},
		"nobody":     {{After: 60}},
		"both":       {{After: 60, Role: "manager", Users: []string{"U1"}}},
		"unknown":    {{After: 60, Role: "owner"}},
	} {
		_, err := New("r1", []Rule{{Name: name, When: "true", Risk: record.RiskHigh, Approval: approval, Escalate: bad}}, roles)
		var re *RuleError
		if !errors.As(err, &re) || re.Field != "escalate" {
			t.Errorf("%s: %v, want a refusal of escalate", name, err)
		}
	}
	if _, err := New("r1", []Rule{{Name: "none", When: "true", Risk: record.RiskLow, Escalate: steps}}, roles); err == nil {
		t.Error("a rule without approval escalates")
	}
}
