package record

// Requirement is a composite approval requirement: a leaf (Role or Users,
// Count distinct people of them), or a group of requirements of which any
// one (AnyOf) or all (AllOf) must be met. One person fills at most one
// leaf, so an all_of of two leaves needs two different people.
type Requirement struct {
	AnyOf []Requirement `json:"any_of,omitempty"`
	AllOf []Requirement `json:"all_of,omitempty"`
	// A leaf: people of Role or above, or the Users, Count of them.
	Role  string   `json:"role,omitempty"`
	Users []string `json:"users,omitempty"`
	Count int      `json:"count,omitempty"`
}

// IsLeaf reports whether r names people rather than a group.
func (r Requirement) IsLeaf() bool { return len(r.AnyOf) == 0 && len(r.AllOf) == 0 }

// LeafFill is who fills one leaf of a requirement: the leaf's path (its
// indexes from the root, e.g. [1 0] for any_of[1].all_of[0]) and the people
// counted for it, oldest approval first.
type LeafFill struct {
	Path  []int    `json:"path"`
	Role  string   `json:"role,omitempty"`
	Users []string `json:"users,omitempty"`
	Count int      `json:"count"`
	By    []string `json:"by"`
}

// RequirementProgress is how far the approvals of a request went towards
// its requirement: every leaf in order, and whether it is met.
type RequirementProgress struct {
	Met bool `json:"met"`
	// Remaining is the fewest approvals more that could meet it.
	Remaining int        `json:"remaining"`
	Leaves    []LeafFill `json:"leaves"`
}
