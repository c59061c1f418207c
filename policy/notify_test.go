package policy

import (
	"context"
	"slices"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

// A rule's notify list comes out of Evaluate and Rules as a copy: changing
// what a caller got changes no later outcome.
func TestNotifyIsTheRulesAndCopied(t *testing.T) {
	list := []string{"C0ONCALL01", "U0MGR00001"}
	p, err := New("r1", []Rule{
		{Name: "big", When: `action.name == "big"`, Risk: record.RiskHigh, Notify: list},
		{Name: "rest", When: "true", Risk: record.RiskLow},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	list[0] = "CHANGED"
	for _, tt := range []struct {
		action string
		want   []string
	}{{"big", []string{"C0ONCALL01", "U0MGR00001"}}, {"other", nil}} {
		out, err := p.Evaluate(context.Background(), Input{Action: record.Action{Name: tt.action}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out.Notify, tt.want) {
			t.Errorf("%s: notify %q, want %q", tt.action, out.Notify, tt.want)
		}
		if out.Notify != nil {
			out.Notify[0] = "CHANGED"
		}
	}
	rules := p.Rules()
	if !slices.Equal(rules[0].Notify, []string{"C0ONCALL01", "U0MGR00001"}) {
		t.Errorf("Rules()[0].Notify = %q", rules[0].Notify)
	}
	rules[0].Notify[0] = "CHANGED"
	if out, _ := p.Evaluate(context.Background(), Input{Action: record.Action{Name: "big"}}); out.Notify[0] != "C0ONCALL01" {
		t.Errorf("a caller's change reached the policy: %q", out.Notify)
	}
}
