package config

import (
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

// TestParseStepUp: confirm: web asks for a sign-in within 5m, step_up:
// {max_age: …} within its own time (it wins when both are given); anything
// else, or either on a rule that needs no approval, is refused with its line.
func TestParseStepUp(t *testing.T) {
	approvalLine := `approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}`
	with := func(s string) string {
		return strings.Replace(valid, approvalLine, approvalLine+"\n      "+s, 1)
	}
	for _, tc := range []struct {
		name string
		yaml string
		want record.Seconds
		err  string
	}{
		{"none", valid, 0, ""},
		{"confirm: web", with("confirm: web"), 300, ""},
		{"step_up", with("step_up: {max_age: 2m}"), 120, ""},
		{"both: step_up's max_age", with("confirm: web\n      step_up: {max_age: 15m}"), 900, ""},
		{"confirm elsewhere", with("confirm: slack"), 0, `signoff.yaml:12: policy.rules[0].confirm: "slack": the one place to confirm an approval is web (confirm: web)`},
		{"no max_age", with("step_up: {}"), 0, `signoff.yaml:12: policy.rules[0].step_up.max_age: required: a duration like 4h`},
		{"zero max_age", with("step_up: {max_age: 0s}"), 0, `policy.rules[0].step_up.max_age: "0s": must be longer than zero`},
		{"unknown field", with("step_up: {maxage: 5m}"), 0, `unknown field "maxage" (known: max_age)`},
		{"with break_glass", with("confirm: web\n      break_glass: {role: manager, review: {role: team_lead, within: 24h}}"), 0, "cannot be forced"},
		{"without an approval", strings.Replace(valid, `{name: everything-else, when: "true", risk: low}`, `{name: everything-else, when: "true", risk: low, confirm: web}`, 1), 0,
			`policy.rules[1]: confirm: web and step_up need an approval`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("signoff.yaml", []byte(tc.yaml))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error\n got: %v\nwant: %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Policy.Rules()[0].Approval.StepUp; got != tc.want {
				t.Fatalf("step-up %d s, want %d s", got, tc.want)
			}
		})
	}
}
