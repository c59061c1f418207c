package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func shopRoles(t *testing.T) *Roles {
	t.Helper()
	r, err := NewRoles([]Role{
		{Name: "agent", Members: []string{"agent:resolver"}},
		{Name: "team_lead", Members: []string{"U0LEAD0001", "U0LEAD0002", "U0BOTH"}},
		{Name: "manager", Members: []string{"U0MGR00001", "U0BOTH"}},
	})
	if err != nil {
		t.Fatalf("NewRoles: %v", err)
	}
	return r
}

func TestNewRolesRefuses(t *testing.T) {
	tests := []struct {
		name  string
		roles []Role
		index int
		field string
		want  string
	}{
		{"empty name", []Role{{Name: "a"}, {Name: ""}}, 1, "name", "must not be empty"},
		{"padded name", []Role{{Name: " a"}}, 0, "name", "leading or trailing spaces"},
		{"duplicate name", []Role{{Name: "a"}, {Name: "b"}, {Name: "a"}}, 2, "name", `duplicate role "a"`},
		{"empty member", []Role{{Name: "a", Members: []string{"x", ""}}}, 0, "members[1]", "must not be empty"},
		{"duplicate member", []Role{{Name: "a", Members: []string{"x", "x"}}}, 0, "members[1]", `duplicate member "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRoles(tt.roles)
			var re *RoleError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *RoleError", err)
			}
			if re.Index != tt.index || re.Field != tt.field || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %#v (%v), want index %d field %s containing %q", re, err, tt.index, tt.field, tt.want)
			}
		})
	}
}

func TestRolesRoleOf(t *testing.T) {
	r := shopRoles(t)
	tests := []struct {
		name, user, want string
		ok               bool
	}{
		{"agent", "agent:resolver", "agent", true},
		{"team lead", "U0LEAD0002", "team_lead", true},
		{"highest of several", "U0BOTH", "manager", true},
		{"stranger", "U0NOBODY", "", false},
		{"role name is not a member", "manager", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := r.RoleOf(tt.user)
			if got != tt.want || ok != tt.ok {
				t.Errorf("RoleOf(%q) = %q, %v; want %q, %v", tt.user, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestRolesAtLeast(t *testing.T) {
	r := shopRoles(t)
	tests := []struct {
		have, need string
		want       bool
	}{
		{"manager", "team_lead", true},
		{"team_lead", "team_lead", true},
		{"agent", "team_lead", false},
		{"team_lead", "manager", false},
		{"manager", "agent", true},
		{"", "agent", false},
		{"owner", "agent", false},
		{"manager", "owner", false},
	}
	for _, tt := range tests {
		t.Run(tt.have+">="+tt.need, func(t *testing.T) {
			if got := r.AtLeast(tt.have, tt.need); got != tt.want {
				t.Errorf("AtLeast(%q, %q) = %v, want %v", tt.have, tt.need, got, tt.want)
			}
		})
	}
}

func TestRolesAbove(t *testing.T) {
	r := shopRoles(t)
	tests := []struct {
		have, need string
		want       bool
	}{
		{"manager", "team_lead", true},
		{"team_lead", "team_lead", false},
		{"agent", "team_lead", false},
		{"owner", "agent", false},
		{"manager", "owner", false},
	}
	for _, tt := range tests {
		t.Run(tt.have+">"+tt.need, func(t *testing.T) {
			if got := r.Above(tt.have, tt.need); got != tt.want {
				t.Errorf("Above(%q, %q) = %v, want %v", tt.have, tt.need, got, tt.want)
			}
		})
	}
}

func TestRolesRankNamesMembers(t *testing.T) {
	r := shopRoles(t)
	if got, want := r.Names(), []string{"agent", "team_lead", "manager"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	r.Names()[0] = "changed" // a copy: callers cannot reorder the roles
	if got, _ := r.Rank("agent"); got != 0 {
		t.Errorf("Rank(agent) after changing a copy = %d, want 0", got)
	}
	tests := []struct {
		role    string
		rank    int
		ok      bool
		members []string
	}{
		{"agent", 0, true, []string{"U0BOTH", "U0LEAD0001", "U0LEAD0002", "U0MGR00001", "agent:resolver"}},
		{"team_lead", 1, true, []string{"U0BOTH", "U0LEAD0001", "U0LEAD0002", "U0MGR00001"}},
		{"manager", 2, true, []string{"U0BOTH", "U0MGR00001"}},
		{"owner", 0, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.role, func(t *testing.T) {
			rank, ok := r.Rank(tt.role)
			if rank != tt.rank || ok != tt.ok {
				t.Errorf("Rank = %d, %v; want %d, %v", rank, ok, tt.rank, tt.ok)
			}
			if got := r.Members(tt.role); !slices.Equal(got, tt.members) {
				t.Errorf("Members = %v, want %v", got, tt.members)
			}
		})
	}
}

func TestRolesNil(t *testing.T) {
	var r *Roles
	if _, ok := r.RoleOf("x"); ok {
		t.Error("nil Roles: RoleOf found a role")
	}
	if r.AtLeast("a", "a") || r.Above("b", "a") || r.Names() != nil || r.Members("a") != nil {
		t.Error("nil Roles must know no roles")
	}
}
