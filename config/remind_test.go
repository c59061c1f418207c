package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

// TestParseRemind: remind: lists durations before the deadline, each
// positive and shorter than the rule's expires, on a rule that needs
// approval; they come out longest first, once each, and anything else is
// refused with its line.
func TestParseRemind(t *testing.T) {
	approvalLine := `approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}`
	withRemind := func(list string) string {
		return strings.Replace(valid, approvalLine, approvalLine+"\n      remind: "+list, 1)
	}
	tests := []struct {
		name   string
		yaml   string
		remind []record.Seconds // rules[0]'s on success
		want   string           // the error, "" for none
	}{
		{"sorted and once each", withRemind("[1h, 24h, 1h, 2d]"), []record.Seconds{48 * 3600, 24 * 3600, 3600}, ""},
		{"none", valid, nil, ""},
		{"not a duration", withRemind("[24h, soon]"), nil,
			`signoff.yaml:12: policy.rules[0].remind[1]: "soon" is not a duration: write it like 72h, 30m or 3d`},
		{"zero", withRemind("[0s]"), nil, `signoff.yaml:12: policy.rules[0].remind[0]: "0s": must be longer than zero`},
		{"part of a second", withRemind("[1500ms]"), nil,
			`signoff.yaml:12: policy.rules[0].remind[0]: "1500ms": must be whole seconds`},
		{"as long as the expiry", withRemind("[1h, 3d]"), nil,
			`signoff.yaml:12: policy.rules[0].remind[1]: 3d: a reminder must be shorter than the approval's expires (72h), or it would be due before the request is made`},
		{"without an approval", strings.Replace(valid, `{name: everything-else, when: "true", risk: low}`, `{name: everything-else, when: "true", risk: low, remind: [1h]}`, 1), nil,
			`signoff.yaml:12: policy.rules[1].remind: the rule needs no approval, so there is no deadline to remind of`},
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
			if got := c.Policy.Rules()[0].Remind; !slices.Equal(got, tt.remind) {
				t.Fatalf("remind %v, want %v", got, tt.remind)
			}
		})
	}
}
