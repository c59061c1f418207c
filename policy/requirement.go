package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/signoff-dev/signoff/record"
)

// Approver is one person as a composite requirement sees them: the highest
// role they hold (HasRole false for none) and whether an escalation lets
// them fill any leaf.
type Approver struct {
	ID        string
	Role      string
	HasRole   bool
	Escalated bool
}

// RequirementError says which part of a requirement is wrong: Path is the
// field path under the approval, e.g. any_of[1].all_of[0].role.
type RequirementError struct {
	Path string
	Err  error
}

func (e *RequirementError) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *RequirementError) Unwrap() error { return e.Err }

// CheckRequirement refuses a requirement that names an unknown role, an
// empty group, a leaf with neither role nor users, or a count below 1.
func CheckRequirement(r *record.Requirement, roles *Roles) error {
	return checkReq(*r, "", roles)
}

func checkReq(r record.Requirement, path string, roles *Roles) error {
	at := func(field string) string {
		if path == "" {
			return field
		}
		return path + "." + field
	}
	if len(r.AnyOf) > 0 && len(r.AllOf) > 0 {
		return &RequirementError{Path: at("any_of"), Err: errors.New("a requirement is any_of or all_of, not both")}
	}
	groups := map[string][]record.Requirement{"any_of": r.AnyOf, "all_of": r.AllOf}
	for _, name := range []string{"any_of", "all_of"} {
		for i, c := range groups[name] {
			if err := checkReq(c, fmt.Sprintf("%s[%d]", at(name), i), roles); err != nil {
				return err
			}
		}
	}
	if !r.IsLeaf() {
		if r.Role != "" || len(r.Users) > 0 || r.Count != 0 {
			return &RequirementError{Path: at("role"), Err: errors.New("a group (any_of, all_of) names no role, users or count of its own")}
		}
		return nil
	}
	switch {
	case r.Role == "" && len(r.Users) == 0:
		return &RequirementError{Path: at("role"), Err: errors.New("name a role or users")}
	case r.Role != "" && len(r.Users) > 0:
		return &RequirementError{Path: at("users"), Err: errors.New("a leaf names a role or users, not both")}
	case r.Count < 1:
		return &RequirementError{Path: at("count"), Err: fmt.Errorf("count %d: at least 1 approver is needed", r.Count)}
	}
	if r.Role != "" {
		if _, ok := roles.Rank(r.Role); !ok {
			return &RequirementError{Path: at("role"), Err: fmt.Errorf("unknown role %q (roles: %s)", r.Role, strings.Join(roles.Names(), ", "))}
		}
	}
	for j, u := range r.Users {
		if err := checkName(u); err != nil {
			return &RequirementError{Path: fmt.Sprintf("%s[%d]", at("users"), j), Err: err}
		}
	}
	if len(r.Users) > 0 && r.Count > len(slices.Compact(slices.Sorted(slices.Values(r.Users)))) {
		return &RequirementError{Path: at("count"), Err: fmt.Errorf("%d approvals needed of %d %s", r.Count, len(r.Users), plural(len(r.Users), "user", "users"))}
	}
	return nil
}

// Summary is the request's Role and Count for a composite requirement: the
// lowest role a leaf names (the highest role when no leaf names one, so a
// check by role alone lets nobody else in) and the fewest approvals that can
// meet it.
func Summary(r *record.Requirement, roles *Roles) (string, int) {
	low, lowRank := "", -1
	for _, l := range Leaves(r) {
		if k, ok := roles.Rank(l.Role); ok && (lowRank < 0 || k < lowRank) {
			low, lowRank = l.Role, k
		}
	}
	if low == "" {
		if names := roles.Names(); len(names) > 0 {
			low = names[len(names)-1]
		}
	}
	fewest := 0
	for i, alt := range alternatives(*r, nil) {
		n := 0
		for _, l := range alt {
			n += l.Count
		}
		if i == 0 || n < fewest {
			fewest = n
		}
	}
	return low, fewest
}

// Depth is how many groups deep r nests: 0 for a leaf.
func Depth(r record.Requirement) int {
	d := 0
	for _, c := range append(slices.Clone(r.AnyOf), r.AllOf...) {
		d = max(d, Depth(c))
	}
	if r.IsLeaf() {
		return 0
	}
	return d + 1
}

// Leaves lists r's leaves in order, each with its path.
func Leaves(r *record.Requirement) []record.LeafFill {
	var out []record.LeafFill
	var walk func(r record.Requirement, path []int)
	walk = func(r record.Requirement, path []int) {
		if r.IsLeaf() {
			out = append(out, record.LeafFill{Path: slices.Clone(path), Role: r.Role, Users: slices.Clone(r.Users), Count: r.Count, By: []string{}})
			return
		}
		for i, c := range append(slices.Clone(r.AnyOf), r.AllOf...) {
			walk(c, append(slices.Clone(path), i))
		}
	}
	walk(*r, nil)
	return out
}

// leafRef is a leaf of an alternative, with its position in Leaves.
type leafRef struct {
	index int
	record.Requirement
}

// alternatives are the ways r can be met: for each, the leaves that must all
// be filled (any_of picks one child, all_of takes every child).
func alternatives(r record.Requirement, next *int) [][]leafRef {
	if next == nil {
		next = new(int)
	}
	if r.IsLeaf() {
		*next++
		return [][]leafRef{{{index: *next - 1, Requirement: r}}}
	}
	if len(r.AnyOf) > 0 {
		var out [][]leafRef
		for _, c := range r.AnyOf {
			out = append(out, alternatives(c, next)...)
		}
		return out
	}
	out := [][]leafRef{{}}
	for _, c := range r.AllOf {
		var product [][]leafRef
		for _, ca := range alternatives(c, next) {
			for _, o := range out {
				product = append(product, append(slices.Clone(o), ca...))
			}
		}
		out = product
	}
	return out
}

// qualifies reports whether a may fill leaf l: by role (a higher role counts
// for a lower one), by being named, or by an escalation.
func qualifies(roles *Roles, l record.Requirement, a Approver) bool {
	return a.Escalated || slices.Contains(l.Users, a.ID) ||
		(l.Role != "" && a.HasRole && roles.AtLeast(a.Role, l.Role))
}

// match assigns approvers, in order, to the slots of alt (Count slots per
// leaf), each approver to at most one slot: a maximum bipartite matching.
// It returns for each slot the approver's index, -1 when open.
func match(roles *Roles, alt []leafRef, approvers []Approver) []int {
	var slots []int // slot → position in alt
	for i, l := range alt {
		for range l.Count {
			slots = append(slots, i)
		}
	}
	owner := make([]int, len(slots))
	for i := range owner {
		owner[i] = -1
	}
	var try func(a int, seen []bool) bool
	try = func(a int, seen []bool) bool {
		for s, li := range slots {
			if seen[s] || !qualifies(roles, alt[li].Requirement, approvers[a]) {
				continue
			}
			seen[s] = true
			if owner[s] < 0 || try(owner[s], seen) {
				owner[s] = a
				return true
			}
		}
		return false
	}
	for a := range approvers {
		try(a, make([]bool, len(slots)))
	}
	return owner
}

func filled(owner []int) int {
	n := 0
	for _, o := range owner {
		if o >= 0 {
			n++
		}
	}
	return n
}

// Progress is how far approvers (in the order they approved) went towards
// r: met when some way of meeting it is filled, one person per leaf. The
// leaves show the people of the way filled furthest (the first, of equals).
func Progress(r *record.Requirement, roles *Roles, approvers []Approver) record.RequirementProgress {
	p := record.RequirementProgress{Leaves: Leaves(r)}
	best, bestAlt, bestOwner := -1, []leafRef(nil), []int(nil)
	for i, alt := range alternatives(*r, nil) {
		owner := match(roles, alt, approvers)
		n, open := filled(owner), len(owner)-filled(owner)
		if i == 0 || open < p.Remaining {
			p.Remaining = open
		}
		if open == 0 {
			best, bestAlt, bestOwner, p.Met = n, alt, owner, true
			break
		}
		if n > best {
			best, bestAlt, bestOwner = n, alt, owner
		}
	}
	var slot int
	for _, l := range bestAlt {
		for range l.Count {
			if a := bestOwner[slot]; a >= 0 {
				p.Leaves[l.index].By = append(p.Leaves[l.index].By, approvers[a].ID)
			}
			slot++
		}
	}
	for i := range p.Leaves {
		// Oldest approval first, as they came.
		slices.SortStableFunc(p.Leaves[i].By, func(x, y string) int {
			return slices.IndexFunc(approvers, func(a Approver) bool { return a.ID == x }) - slices.IndexFunc(approvers, func(a Approver) bool { return a.ID == y })
		})
	}
	return p
}

// Fills reports whether candidate, approving after approvers, fills a leaf
// still open: in some way of meeting r, one more slot is filled with them.
func Fills(r *record.Requirement, roles *Roles, approvers []Approver, candidate Approver) bool {
	with := append(slices.Clone(approvers), candidate)
	for _, alt := range alternatives(*r, nil) {
		if filled(match(roles, alt, with)) > filled(match(roles, alt, approvers)) {
			return true
		}
	}
	return false
}

// Sentence says r in words: "a director, or one devops and one security
// (different people)".
func Sentence(r *record.Requirement) string {
	return sentence(*r, true)
}

func sentence(r record.Requirement, top bool) string {
	switch {
	case r.IsLeaf():
		return leafWords(r, top)
	case len(r.AnyOf) > 0:
		parts := make([]string, len(r.AnyOf))
		for i, c := range r.AnyOf {
			parts[i] = sentence(c, top)
		}
		if top {
			return strings.Join(parts, ", or ")
		}
		return "(" + strings.Join(parts, " or ") + ")"
	}
	parts := make([]string, len(r.AllOf))
	for i, c := range r.AllOf {
		parts[i] = sentence(c, false)
	}
	s := strings.Join(parts, " and ")
	if slots(r) > 1 {
		s += " (different people)"
	}
	return s
}

func slots(r record.Requirement) int {
	if r.IsLeaf() {
		return r.Count
	}
	n := 0
	for _, c := range append(slices.Clone(r.AnyOf), r.AllOf...) {
		n += slots(c)
	}
	return n
}

// leafWords says one leaf: "a director" alone, "one devops" beside others,
// "2 devops", "one of U1, U2".
func leafWords(l record.Requirement, alone bool) string {
	if len(l.Users) > 0 {
		who := strings.Join(l.Users, ", ")
		if len(l.Users) == 1 {
			return who
		}
		if l.Count == 1 {
			return "one of " + who
		}
		return fmt.Sprintf("%d of %s", l.Count, who)
	}
	if l.Count > 1 {
		return fmt.Sprintf("%d %s", l.Count, l.Role)
	}
	if !alone {
		return "one " + l.Role
	}
	if l.Role != "" && strings.ContainsAny(l.Role[:1], "aeiouAEIOU") {
		return "an " + l.Role
	}
	return "a " + l.Role
}

// StillNeeded says, for a refusal, what the requirement still needs after
// the progress p: the open places of each way of meeting it, or "nothing".
func StillNeeded(r *record.Requirement, roles *Roles, approvers []Approver) string {
	var ways []string
	for _, alt := range alternatives(*r, nil) {
		owner := match(roles, alt, approvers)
		var open []string
		slot := 0
		for _, l := range alt {
			n := 0
			for range l.Count {
				if owner[slot] < 0 {
					n++
				}
				slot++
			}
			if n > 0 {
				left := l.Requirement
				left.Count = n
				open = append(open, leafWords(left, len(alt) == 1 && n == 1))
			}
		}
		if len(open) == 0 {
			return "nothing"
		}
		ways = append(ways, strings.Join(open, " and "))
	}
	return strings.Join(ways, ", or ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// composite checks a's requirement and sets a copy of it, with the Role and
// Count it sums up to, on a.
func composite(a *record.ApprovalSpec, roles *Roles) *RequirementError {
	if err := CheckRequirement(a.Requirement, roles); err != nil {
		var re *RequirementError
		errors.As(err, &re)
		return &RequirementError{Path: "approval." + re.Path, Err: re.Err}
	}
	req := cloneRequirement(*a.Requirement)
	a.Requirement = &req
	a.Role, a.Count = Summary(a.Requirement, roles)
	return nil
}

func cloneRequirement(r record.Requirement) record.Requirement {
	r.Users = slices.Clone(r.Users)
	if r.AnyOf != nil {
		r.AnyOf = slices.Clone(r.AnyOf)
		for i := range r.AnyOf {
			r.AnyOf[i] = cloneRequirement(r.AnyOf[i])
		}
	}
	if r.AllOf != nil {
		r.AllOf = slices.Clone(r.AllOf)
		for i := range r.AllOf {
			r.AllOf[i] = cloneRequirement(r.AllOf[i])
		}
	}
	return r
}

// LeafField is the field path of the leaf at path in r, e.g.
// any_of[1].all_of[0] for [1 0]; "" for a requirement that is one leaf.
func LeafField(r *record.Requirement, path []int) string {
	var parts []string
	cur := *r
	for _, i := range path {
		if len(cur.AnyOf) > 0 {
			parts = append(parts, fmt.Sprintf("any_of[%d]", i))
			cur = cur.AnyOf[i]
		} else {
			parts = append(parts, fmt.Sprintf("all_of[%d]", i))
			cur = cur.AllOf[i]
		}
	}
	return strings.Join(parts, ".")
}

// Unmet is, when no way of meeting r can be filled by people (each may
// fill one leaf), the leaves left open in the way filled furthest; nil
// when some way can be filled.
func Unmet(r *record.Requirement, roles *Roles, people []Approver) []record.LeafFill {
	p := Progress(r, roles, people)
	if p.Met {
		return nil
	}
	var open []record.LeafFill
	for _, l := range p.Leaves {
		if len(l.By) < l.Count {
			open = append(open, l)
		}
	}
	return open
}

// LeafLabel names a leaf for people: its role, or its users.
func LeafLabel(l record.LeafFill) string {
	if l.Role != "" {
		return l.Role
	}
	return strings.Join(l.Users, ", ")
}

// Open is how many places of the leaf are not filled yet.
func Open(l record.LeafFill) int { return max(l.Count-len(l.By), 0) }
