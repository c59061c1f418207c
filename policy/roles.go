package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Role is a named group of people (or agents) who may do the same things.
type Role struct {
	Name    string   `json:"name"`
	Members []string `json:"members"`
}

// Roles is an ordered set of roles, lowest first. A higher role may do whatever
// a lower one may, so a manager can approve what a team lead can.
type Roles struct {
	names []string
	rank  map[string]int      // role name → position in names
	best  map[string]int      // member → rank of the highest role they hold
	holds map[string][]string // role name → its own members, as configured
}

// RoleError says which role of the list passed to NewRoles is wrong, so that a
// config loader can point at the line that defines it.
type RoleError struct {
	Index int    // position in the list
	Field string // "name" or "members[i]"
	Err   error
}

func (e *RoleError) Error() string {
	return fmt.Sprintf("roles[%d].%s: %v", e.Index, e.Field, e.Err)
}

func (e *RoleError) Unwrap() error { return e.Err }

// NewRoles orders roles lowest first. Names must be unique and non-empty, and
// member ids non-empty. A member may hold several roles; the highest counts.
func NewRoles(roles []Role) (*Roles, error) {
	r := &Roles{
		rank:  make(map[string]int, len(roles)),
		best:  map[string]int{},
		holds: make(map[string][]string, len(roles)),
	}
	for i, role := range roles {
		if err := checkName(role.Name); err != nil {
			return nil, &RoleError{Index: i, Field: "name", Err: err}
		}
		if _, dup := r.rank[role.Name]; dup {
			return nil, &RoleError{Index: i, Field: "name", Err: fmt.Errorf("duplicate role %q", role.Name)}
		}
		r.rank[role.Name] = i
		r.names = append(r.names, role.Name)
		members := make([]string, 0, len(role.Members))
		for j, m := range role.Members {
			if err := checkName(m); err != nil {
				return nil, &RoleError{Index: i, Field: fmt.Sprintf("members[%d]", j), Err: fmt.Errorf("member id: %w", err)}
			}
			if slices.Contains(members, m) {
				return nil, &RoleError{Index: i, Field: fmt.Sprintf("members[%d]", j), Err: fmt.Errorf("duplicate member %q", m)}
			}
			members = append(members, m)
			// Roles come lowest first, so a later role always outranks.
			r.best[m] = i
		}
		r.holds[role.Name] = members
	}
	return r, nil
}

// checkName refuses names that would look the same as another when printed.
func checkName(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case strings.TrimSpace(s) != s:
		return fmt.Errorf("%q has leading or trailing spaces", s)
	}
	return nil
}

// RoleOf returns the highest role userID holds, and false when it holds none.
func (r *Roles) RoleOf(userID string) (string, bool) {
	if r == nil {
		return "", false
	}
	i, ok := r.best[userID]
	if !ok {
		return "", false
	}
	return r.names[i], true
}

// Rank returns the position of a role, 0 for the lowest, and false when the
// role does not exist.
func (r *Roles) Rank(name string) (int, bool) {
	if r == nil {
		return 0, false
	}
	i, ok := r.rank[name]
	return i, ok
}

// AtLeast reports whether the role have may do what the role need may. An
// unknown role on either side is false: nobody is let in by a typo.
func (r *Roles) AtLeast(have, need string) bool {
	h, ok1 := r.Rank(have)
	n, ok2 := r.Rank(need)
	return ok1 && ok2 && h >= n
}

// Above reports whether the role have ranks strictly higher than need.
func (r *Roles) Above(have, need string) bool {
	h, ok1 := r.Rank(have)
	n, ok2 := r.Rank(need)
	return ok1 && ok2 && h > n
}

// Names returns the role names, lowest first.
func (r *Roles) Names() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.names)
}

// Members returns, sorted and without repeats, everyone who holds role or a
// higher one: the people who may approve what needs role. Nil for an unknown role.
func (r *Roles) Members(role string) []string {
	need, ok := r.Rank(role)
	if !ok {
		return nil
	}
	var out []string
	for _, name := range r.names[need:] {
		out = append(out, r.holds[name]...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
