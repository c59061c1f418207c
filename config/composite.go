package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
)

// fileRequirement is a composite approval requirement: any_of or all_of a
// list of requirements, or a leaf (role or users, and a count).
type fileRequirement struct {
	AnyOf []fileRequirement `yaml:"any_of"`
	AllOf []fileRequirement `yaml:"all_of"`
	Role  string            `yaml:"role"`
	Users []string          `yaml:"users"`
	Count *int              `yaml:"count"`
}

// maxRequirementDepth is how deeply groups nest: any_of of all_of (or the
// other way round) is as far as a person reads a rule at a glance.
const maxRequirementDepth = 2

// requirement reads an approval's any_of/all_of, nil when it has neither
// (the plain role and count).
func (c *checker) requirement(path string, fa *fileApproval) (*record.Requirement, error) {
	if len(fa.AnyOf) == 0 && len(fa.AllOf) == 0 {
		return nil, nil
	}
	if fa.Role != "" || fa.Count != nil {
		field := ".role"
		if fa.Role == "" {
			field = ".count"
		}
		return nil, c.failf(path+field, "an approval names a role and count, or any_of/all_of of them, not both")
	}
	r, err := c.requirementOf(path, fileRequirement{AnyOf: fa.AnyOf, AllOf: fa.AllOf}, 0)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (c *checker) requirementOf(path string, fr fileRequirement, depth int) (record.Requirement, error) {
	r := record.Requirement{Role: fr.Role, Users: fr.Users, Count: 1}
	if fr.Count != nil {
		r.Count = *fr.Count
	}
	groups := []struct {
		name string
		list []fileRequirement
		to   *[]record.Requirement
	}{{"any_of", fr.AnyOf, &r.AnyOf}, {"all_of", fr.AllOf, &r.AllOf}}
	for _, g := range groups {
		if len(g.list) == 0 {
			continue
		}
		p := path + "." + g.name
		if depth >= maxRequirementDepth {
			return r, c.failf(p, "groups nest at most %d deep (an any_of of all_of, or an all_of of any_of)", maxRequirementDepth)
		}
		for i, child := range g.list {
			cr, err := c.requirementOf(fmt.Sprintf("%s[%d]", p, i), child, depth+1)
			if err != nil {
				return r, err
			}
			*g.to = append(*g.to, cr)
		}
		if fr.Count == nil {
			r.Count = 0 // a group has no count of its own
		}
	}
	return r, nil
}

// checkComposite refuses a composite requirement that the people the roles
// and the requirement name could never meet, one person per leaf; when the
// rest may come from a Slack user group, whose size is known only at run
// time, it is a warning.
func (c *checker) checkComposite(path string, a *record.ApprovalSpec, cfg *Config) error {
	var people []policy.Approver
	known := cfg.Roles.Members(firstRole(cfg.Roles))
	for _, l := range policy.Leaves(a.Requirement) {
		known = append(known, l.Users...)
	}
	slices.Sort(known)
	for _, id := range slices.Compact(known) {
		role, ok := cfg.Roles.RoleOf(id)
		people = append(people, policy.Approver{ID: id, Role: role, HasRole: ok})
	}
	open := policy.Unmet(a.Requirement, cfg.Roles, people)
	if open == nil {
		return nil
	}
	var what, groups []string
	for _, l := range open {
		what = append(what, fmt.Sprintf("%d more %s", l.Count-len(l.By), leafName(l)))
		for _, role := range cfg.Roles.Names() {
			if g, ok := cfg.Slack.UserGroups[role]; ok && l.Role != "" && cfg.Roles.AtLeast(role, l.Role) {
				groups = appendNew(groups, fmt.Sprintf("%s (%s)", g, role))
			}
		}
	}
	at := path + ".approval"
	if f := policy.LeafField(a.Requirement, open[0].Path); f != "" {
		at += "." + f
	}
	sentence := policy.Sentence(a.Requirement)
	if len(groups) == 0 {
		return c.failf(at, "%s needed, but the people listed can fill at most part of it (each fills one place; short of %s): the rule could never be satisfied", sentence, strings.Join(what, ", "))
	}
	c.warnf(at, "%s needed and the people listed are short of %s; the rest must come from Slack user group %s, whose size is known only when a run waits",
		sentence, strings.Join(what, ", "), strings.Join(groups, ", "))
	return nil
}

func leafName(l record.LeafFill) string {
	if l.Role != "" {
		return l.Role
	}
	return "of " + strings.Join(l.Users, ", ")
}

func firstRole(r *policy.Roles) string {
	if names := r.Names(); len(names) > 0 {
		return names[0]
	}
	return ""
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}
