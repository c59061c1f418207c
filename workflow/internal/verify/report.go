package verify

import (
	"time"

	"github.com/signoff-dev/signoff/record"
)

// Report is what Verify found.
type Report struct {
	Runs         int                      `json:"runs"`
	Checkpoints  int                      `json:"checkpoints"`
	AuditEvents  int                      `json:"audit_events"`
	Anchors      int                      `json:"anchors"`
	Damaged      []*record.IntegrityError `json:"damaged"`
	AuditProblem string                   `json:"audit_problem,omitempty"`
	// Keyed: the store has a sealed head, so its records are sealed since
	// KeyedSince. Unkeyed counts the rows accepted without a seal because
	// they were written before that (or in a store never keyed).
	// Pruned counts the runs whose older states a prune removed (their
	// chains verify through the seqs, hashes and seals it kept).
	Pruned     int        `json:"pruned"`
	Keyed      bool       `json:"keyed"`
	KeyedSince *time.Time `json:"keyed_since,omitempty"`
	Unkeyed    int        `json:"unkeyed"`
	// Unverified: no key was configured, or not the store's (KeyNotGiven),
	// so seals were not checked.
	Unverified bool `json:"unverified,omitempty"`
	// KeyNotGiven is the key the store's head is sealed with when the keys
	// configured do not include it: every seal would fail for that one
	// reason, so none is checked, and the report says so rather than call
	// the store damaged.
	KeyNotGiven string `json:"key_not_given,omitempty"`
	// Head is the newest anchor (zero before the first): record it
	// elsewhere, and `verify --anchor` proves later that the log still
	// extends it.
	Head Anchor `json:"head"`
}

// OK reports whether nothing was damaged and, with keys, the seals could be
// checked: a head sealed with a key not given is a mistaken key as often as
// a changed head, and neither is a store verified.
func (r *Report) OK() bool {
	return len(r.Damaged) == 0 && r.AuditProblem == "" && r.KeyNotGiven == ""
}
