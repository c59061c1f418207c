package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

const compositeBase = `roles:
  - {name: agent, members: [agent:resolver]}
  - {name: devops, members: [U0DEV00001, U0DEV00002]}
  - {name: security, members: [U0SEC00001]}
  - {name: director, members: [U0DIR00001]}
policy:
  revision: "r1"
  rules:
    - name: prod
      when: action.name == "deploy"
      risk: high
      approval: APPROVAL
    - {name: everything-else, when: "true", risk: low}
actions:
  deploy: {executor: demo}
`

// TestParseComposite: an approval's any_of/all_of is read into its
// requirement (counts default to 1; the request's role and count sum it
// up), and a requirement that is malformed, too deep, or that the people
// listed could never fill is refused with its line.
func TestParseComposite(t *testing.T) {
	with := func(a string) string { return strings.Replace(compositeBase, "APPROVAL", a, 1) }
	example := `{any_of: [{role: director}, {all_of: [{role: devops, count: 1}, {role: security, count: 1}]}], expires: 24h}`
	tests := []struct {
		name string
		yaml string
		want *record.ApprovalSpec
		err  string
	}{
		{"director or devops and security", with(example), &record.ApprovalSpec{Role: "devops", Count: 1, Expires: 24 * 3600,
			Requirement: &record.Requirement{AnyOf: []record.Requirement{{Role: "director", Count: 1},
				{AllOf: []record.Requirement{{Role: "devops", Count: 1}, {Role: "security", Count: 1}}}}}}, ""},
		{"all of, with users", with(`{all_of: [{role: devops, count: 2}, {users: [U0AUD00001]}], expires: 1h}`), &record.ApprovalSpec{Role: "devops", Count: 3, Expires: 3600,
			Requirement: &record.Requirement{AllOf: []record.Requirement{{Role: "devops", Count: 2}, {Users: []string{"U0AUD00001"}, Count: 1}}}}, ""},
		{"plain form unchanged", with(`{role: devops, count: 2, expires: 1h}`), &record.ApprovalSpec{Role: "devops", Count: 2, Expires: 3600}, ""},
		{"unknown role", with(`{any_of: [{role: director}, {role: ceo}], expires: 1h}`), nil,
			`signoff.yaml:12: policy.rules[0].approval.any_of[1].role: unknown role "ceo" (roles: agent, devops, security, director)`},
		{"both forms", with(`{role: devops, any_of: [{role: director}], expires: 1h}`), nil,
			`signoff.yaml:12: policy.rules[0].approval.role: an approval names a role and count, or any_of/all_of of them, not both`},
		{"too deep", with("\n        any_of:\n          - all_of:\n              - any_of: [{role: devops}]\n        expires: 1h"), nil,
			`signoff.yaml:15: policy.rules[0].approval.any_of[0].all_of[0].any_of: groups nest at most 2 deep (an any_of of all_of, or an all_of of any_of)`},
		{"empty leaf", with(`{all_of: [{role: devops}, {count: 1}], expires: 1h}`), nil,
			`signoff.yaml:12: policy.rules[0].approval.all_of[1].role: name a role or users`},
		{"zero count", with(`{all_of: [{role: devops, count: 0}], expires: 1h}`), nil,
			`signoff.yaml:12: policy.rules[0].approval.all_of[0].count: count 0: at least 1 approver is needed`},
		// Only one person is security or above besides the director, and
		// one person fills one place: two security and a director are three.
		{"more than there are people", with(`{all_of: [{role: security, count: 2}, {role: director}], expires: 1h}`), nil,
			`signoff.yaml:12: policy.rules[0].approval.all_of[1]: 2 security and one director (different people) needed, but the people listed can fill at most part of it (each fills one place; short of 1 more director): the rule could never be satisfied`},
		{"the same person twice", with(`{all_of: [{role: director}, {users: [U0DIR00001]}], expires: 1h}`), nil,
			`signoff.yaml:12: policy.rules[0].approval.all_of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("signoff.yaml", []byte(tt.yaml))
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("error\n got: %v\nwant: %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Policy.Rules()[0].Approval; !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("approval\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestCompositeWithUserGroupWarns: when the people listed fall short but a
// Slack user group holds a role that could fill the rest, the config loads
// with a warning naming the group, at the line of the leaf left open.
func TestCompositeWithUserGroupWarns(t *testing.T) {
	yaml := strings.Replace(compositeBase, "APPROVAL", `{all_of: [{role: devops}, {role: security, count: 3}], expires: 1h}`, 1) +
		"slack:\n  user_groups: {security: S0SEC00001}\n"
	c, err := Parse("signoff.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range c.Warnings {
		got = append(got, w.Error())
	}
	want := "signoff.yaml:12: policy.rules[0].approval.all_of[1]: one devops and 3 security (different people) needed and the people listed are short of 1 more security; the rest must come from Slack user group S0SEC00001 (security), whose size is known only when a run waits"
	if !slicesContains(got, want) {
		t.Fatalf("warnings %q\nwant %q", got, want)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
