package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

// TestParseEscalate: escalate: lists steps after the request, increasing and
// sooner than the expiry, to a known role or Slack users, with an optional
// extend; anything else is refused with its line.
func TestParseEscalate(t *testing.T) {
	approvalLine := `approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}`
	with := func(list string) string {
		return strings.Replace(valid, approvalLine, approvalLine+"\n      escalate: "+list, 1)
	}
	tests := []struct {
		name  string
		yaml  string
		steps []record.EscalationStep
		want  string
	}{
		{"role then users", with(`[{after: 4h, to: {role: manager}, extend: 4h}, {after: 8h, to: {users: [U0BOSS0001]}}]`),
			[]record.EscalationStep{{After: 4 * 3600, Role: "manager", Extend: 4 * 3600}, {After: 8 * 3600, Users: []string{"U0BOSS0001"}}}, ""},
		{"none", valid, nil, ""},
		{"unknown role", with(`[{after: 4h, to: {role: owner}}]`), nil,
			`signoff.yaml:12: policy.rules[0].escalate[0].to.role: "owner" is not a role: roles are agent, team_lead, manager`},
		{"not a user id", with(`[{after: 4h, to: {users: [boss]}}]`), nil,
			`signoff.yaml:12: policy.rules[0].escalate[0].to.users[0]: "boss" is not a Slack user id (U… or W…)`},
		{"nobody", with(`[{after: 4h}]`), nil,
			`signoff.yaml:12: policy.rules[0].escalate[0].to: required: {role: R} or {users: [U…]}, who may decide from then on`},
		{"not increasing", with(`[{after: 8h, to: {role: manager}}, {after: 4h, to: {role: manager}}]`), nil,
			`signoff.yaml:12: policy.rules[0].escalate[1].after: 4h: each step must come later than the one before (8h)`},
		{"zero", with(`[{after: 0s, to: {role: manager}}]`), nil,
			`signoff.yaml:12: policy.rules[0].escalate[0].after: "0s": must be longer than zero`},
		{"as late as the expiry", with(`[{after: 3d, to: {role: manager}}]`), nil,
			`signoff.yaml:12: policy.rules[0].escalate[0].after: 3d: an escalation must come sooner than the approval's expires (72h)`},
		{"bad extend", with(`[{after: 4h, to: {role: manager}, extend: later}]`), nil,
			`signoff.yaml:12: policy.rules[0].escalate[0].extend: "later" is not a duration: write it like 72h, 30m or 3d`},
		{"without an approval", strings.Replace(valid, `{name: everything-else, when: "true", risk: low}`, `{name: everything-else, when: "true", risk: low, escalate: [{after: 1h, to: {role: manager}}]}`, 1), nil,
			`signoff.yaml:12: policy.rules[1].escalate: the rule needs no approval, so there is nobody to escalate to`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("signoff.yaml", []byte(tt.yaml))
			if tt.want != "" {
				if err == nil || err.Error() != tt.want {
					t.Fatalf("error\n got: %v\nwant: %s", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Policy.Rules()[0].Escalate; !reflect.DeepEqual(got, tt.steps) {
				t.Fatalf("escalate %+v, want %+v", got, tt.steps)
			}
		})
	}
}
