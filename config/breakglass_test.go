package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

// TestParseBreakGlass: break_glass: names a known role that may force the
// approval and a review by a known role within a time; a rule that may be
// forced needs slack.audit_channel when the config speaks to Slack; anything
// else is refused with its line.
func TestParseBreakGlass(t *testing.T) {
	approvalLine := `approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}`
	with := func(bg string) string {
		return strings.Replace(valid, approvalLine, approvalLine+"\n      break_glass: "+bg, 1)
	}
	slack := "slack: {channel: C0APPROVALS, audit_channel: C0AUDIT001}\n"
	tests := []struct {
		name string
		yaml string
		bg   *record.BreakGlass
		want string
	}{
		{"forced by a manager, reviewed by a team lead", with(`{role: manager, review: {role: team_lead, within: 24h}}`) + slack,
			&record.BreakGlass{Role: "manager", Review: record.BreakGlassReview{Role: "team_lead", Within: 24 * 3600}}, ""},
		{"none", valid, nil, ""},
		{"no slack section", with(`{role: manager, review: {role: team_lead, within: 24h}}`),
			&record.BreakGlass{Role: "manager", Review: record.BreakGlassReview{Role: "team_lead", Within: 24 * 3600}}, ""},
		{"slack without an audit channel", with(`{role: manager, review: {role: team_lead, within: 24h}}`) + "slack: {channel: C0APPROVALS}\n", nil,
			`signoff.yaml:12: policy.rules[0].break_glass: a rule that may be forced needs slack.audit_channel, the channel where a forced approval is announced`},
		{"audit channel not an id", with(`{role: manager, review: {role: team_lead, within: 24h}}`) + "slack: {channel: C0APPROVALS, audit_channel: \"#audit\"}\n", nil,
			`signoff.yaml:16: slack.audit_channel: "#audit" is not a Slack channel id (C… or G…)`},
		{"unknown role", with(`{role: incident_commander, review: {role: team_lead, within: 24h}}`), nil,
			`signoff.yaml:12: policy.rules[0].break_glass.role: "incident_commander" is not a role: roles are agent, team_lead, manager`},
		{"no role", with(`{review: {role: team_lead, within: 24h}}`), nil,
			`signoff.yaml:12: policy.rules[0].break_glass.role: required: the role that may force the approval, e.g. {role: incident_commander}`},
		{"no review", with(`{role: manager}`), nil,
			`signoff.yaml:12: policy.rules[0].break_glass.review: required: who reviews a forced approval and how soon, e.g. {role: security, within: 24h}`},
		{"unknown review role", with(`{role: manager, review: {role: security, within: 24h}}`), nil,
			`signoff.yaml:12: policy.rules[0].break_glass.review.role: "security" is not a role: roles are agent, team_lead, manager`},
		{"no within", with(`{role: manager, review: {role: team_lead}}`), nil,
			`signoff.yaml:12: policy.rules[0].break_glass.review.within: required: a duration like 4h`},
		{"without an approval", strings.Replace(valid, `{name: everything-else, when: "true", risk: low}`, `{name: everything-else, when: "true", risk: low, break_glass: {role: manager, review: {role: team_lead, within: 1h}}}`, 1), nil,
			`signoff.yaml:12: policy.rules[1].break_glass: the rule needs no approval, so there is nothing to force`},
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
			if got := c.Policy.Rules()[0].BreakGlass; !reflect.DeepEqual(got, tt.bg) {
				t.Fatalf("break_glass %+v, want %+v", got, tt.bg)
			}
		})
	}
}
