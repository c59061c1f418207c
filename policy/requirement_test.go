package policy

import (
	"testing"

	"github.com/signoff-dev/signoff/record"
)

func compositeRoles(t *testing.T) *Roles {
	t.Helper()
	r, err := NewRoles([]Role{{Name: "agent"}, {Name: "devops", Members: []string{"D1", "D2"}},
		{Name: "security", Members: []string{"S1"}}, {Name: "director", Members: []string{"B1"}}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var directorOrBoth = &record.Requirement{AnyOf: []record.Requirement{{Role: "director", Count: 1},
	{AllOf: []record.Requirement{{Role: "devops", Count: 1}, {Role: "security", Count: 1}}}}}

func TestRequirementSentence(t *testing.T) {
	tests := []struct {
		r    *record.Requirement
		want string
	}{
		{directorOrBoth, "a director, or one devops and one security (different people)"},
		{&record.Requirement{AllOf: []record.Requirement{{Role: "devops", Count: 2}, {Users: []string{"U1", "U2"}, Count: 1}}}, "2 devops and one of U1, U2 (different people)"},
		{&record.Requirement{AnyOf: []record.Requirement{{Role: "admin", Count: 1}, {Users: []string{"U1"}, Count: 1}}}, "an admin, or U1"},
		{&record.Requirement{AllOf: []record.Requirement{{Role: "devops", Count: 1}, {AnyOf: []record.Requirement{{Role: "security", Count: 1}, {Role: "director", Count: 1}}}}}, "one devops and (one security or one director) (different people)"},
	}
	for _, tt := range tests {
		if got := Sentence(tt.r); got != tt.want {
			t.Errorf("Sentence = %q, want %q", got, tt.want)
		}
	}
}

func by(roles *Roles, ids ...string) []Approver {
	var out []Approver
	for _, id := range ids {
		role, ok := roles.RoleOf(id)
		out = append(out, Approver{ID: id, Role: role, HasRole: ok})
	}
	return out
}

// TestRequirementQuorum: one person fills one leaf; any_of is met by one
// branch, all_of needs every leaf; a higher role fills a lower leaf, never
// the other way round.
func TestRequirementQuorum(t *testing.T) {
	roles := compositeRoles(t)
	tests := []struct {
		name      string
		approvers []string
		met       bool
		needed    string
	}{
		{"nobody", nil, false, "a director, or one devops and one security"},
		{"the director alone", []string{"B1"}, true, "nothing"},
		{"devops alone", []string{"D1"}, false, "a director, or one security"},
		{"two devops", []string{"D1", "D2"}, false, "a director, or one security"},
		{"devops and security", []string{"D1", "S1"}, true, "nothing"},
		// A security person fills the devops leaf too (roles count upward),
		// but not both leaves at once.
		{"security alone", []string{"S1"}, false, "a director, or one security"},
		{"security then devops", []string{"S1", "D1"}, true, "nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := by(roles, tt.approvers...)
			if got := Progress(directorOrBoth, roles, a).Met; got != tt.met {
				t.Errorf("met = %v, want %v", got, tt.met)
			}
			if got := StillNeeded(directorOrBoth, roles, a); got != tt.needed {
				t.Errorf("still needed %q, want %q", got, tt.needed)
			}
		})
	}
	// A second devops fills nothing once the devops leaf is filled; a
	// security person still does.
	one := by(roles, "D1")
	if Fills(directorOrBoth, roles, one, by(roles, "D2")[0]) {
		t.Error("a second devops filled the security leaf")
	}
	if !Fills(directorOrBoth, roles, one, by(roles, "S1")[0]) {
		t.Error("security could not fill the security leaf")
	}
	if !Fills(directorOrBoth, roles, one, Approver{ID: "X9", Escalated: true}) {
		t.Error("an escalated person could not fill an open leaf")
	}
	all := &record.Requirement{AllOf: []record.Requirement{{Role: "devops", Count: 2}, {Role: "security", Count: 1}}}
	if got := Progress(all, roles, by(roles, "S1")).Remaining; got != 2 {
		t.Errorf("remaining after security of two devops and one security: %d, want 2", got)
	}
	p := Progress(directorOrBoth, roles, by(roles, "D1"))
	if p.Remaining != 1 || len(p.Leaves) != 3 || len(p.Leaves[0].By) != 0 || p.Leaves[1].By[0] != "D1" || len(p.Leaves[2].By) != 0 {
		t.Errorf("progress %+v", p)
	}
}
