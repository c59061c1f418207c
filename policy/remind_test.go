package policy

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

// A rule's remind offsets come out of New longest first, once each, and of
// Evaluate as a copy; New refuses offsets a rule cannot keep.
func TestRemindIsCheckedSortedAndCopied(t *testing.T) {
	roles, err := NewRoles([]Role{{Name: "team_lead", Members: []string{"U0LEAD0001"}}})
	if err != nil {
		t.Fatal(err)
	}
	approval := &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: 72 * 3600}
	p, err := New("r1", []Rule{
		{Name: "big", When: "true", Risk: record.RiskHigh, Approval: approval, Remind: []record.Seconds{3600, 86400, 3600}},
	}, roles)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Evaluate(context.Background(), Input{Action: record.Action{Name: "x"}})
	if err != nil || !slices.Equal(out.Remind, []record.Seconds{86400, 3600}) {
		t.Fatalf("remind %v, %v", out.Remind, err)
	}
	out.Remind[0] = 1
	if again, _ := p.Evaluate(context.Background(), Input{Action: record.Action{Name: "x"}}); again.Remind[0] != 86400 {
		t.Fatalf("a caller's change reached the policy: %v", again.Remind)
	}
	for _, bad := range []Rule{
		{Name: "none", When: "true", Risk: record.RiskLow, Remind: []record.Seconds{60}},
		{Name: "zero", When: "true", Risk: record.RiskHigh, Approval: approval, Remind: []record.Seconds{0}},
		{Name: "long", When: "true", Risk: record.RiskHigh, Approval: approval, Remind: []record.Seconds{72 * 3600}},
	} {
		_, err := New("r1", []Rule{bad}, roles)
		var re *RuleError
		if !errors.As(err, &re) || re.Field != "remind" {
			t.Errorf("%s: %v, want a refusal of remind", bad.Name, err)
		}
	}
}
