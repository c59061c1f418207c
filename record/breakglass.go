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
