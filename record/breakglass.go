package record

import "time"

// BreakGlass is a rule's break_glass: people of Role or above may force
// its approval with a justification, and each force opens a follow-up
// review that someone of Review.Role must acknowledge within
// Review.Within.
type BreakGlass struct {
	Role   string           `json:"role"`
	Review BreakGlassReview `json:"review"`
}

// BreakGlassReview is who reviews a forced approval, and how soon.
type BreakGlassReview struct {
	Role   string  `json:"role"`
	Within Seconds `json:"within_seconds"`
}

// ForceRecord is a forced approval as the checkpoint remembers it: who
// forced the request, in what role, why, and when the follow-up review is
// due.
type ForceRecord struct {
	RequestID  string    `json:"request_id"`
	By         string    `json:"by"`
	Role       string    `json:"role"`
	Reason     string    `json:"reason"`
	Via        Via       `json:"via"`
	At         time.Time `json:"at"`
	ReviewRole string    `json:"review_role"`
	ReviewDue  time.Time `json:"review_due"`
}

// ReviewStatus is where a forced approval's follow-up review stands.
type ReviewStatus string

// The statuses of a review.
const (
	ReviewPending      ReviewStatus = "pending"
	ReviewAcknowledged ReviewStatus = "acknowledged"
)

// Review is the follow-up review a forced approval opens: someone of Role
// or above (never the one who forced it) must acknowledge it by Due. It is
// a record of its own, one per forced run, sealed, and written by
// compare-and-set on Version.
type Review struct {
	RunID          string
	RequestID      string
	Rule           string
	Role           string
	ForcedBy       string
	Reason         string // the justification of the force
	Due            time.Time
	Status         ReviewStatus
	AcknowledgedBy string
	AcknowledgedAt time.Time
	Note           string
	// RemindedAt is when the review's role was last reminded (zero: never).
	RemindedAt time.Time
	CreatedAt  time.Time
	Version    int64
	Seal
}
