package record

import "time"

// SeenRequest is one request from an authenticated edge (a signed Slack
// request, a Socket Mode envelope), kept for as long as it could be replayed,
// so that a replay gets the first answer and changes nothing, on any replica.
type SeenRequest struct {
	// Digest names the request: the edge's hash of what makes it unique (for
	// Slack over HTTP, the signed timestamp and body).
	Digest  string
	Version int64 // compare-and-set counter: 1 when claimed, 2 once answered
	// CreatedAt is when the first copy was claimed; ExpiresAt is when no copy
	// can be accepted any more, so the row may be forgotten.
	CreatedAt, ExpiresAt time.Time
	// AnsweredAt is zero while the first copy is being handled (or if its
	// handler crashed); then the answer below is what every copy gets.
	AnsweredAt  time.Time
	Status      int // the HTTP status of the first answer
	ContentType string
	Body        []byte
}

// Answered reports whether the first copy's answer is recorded.
func (r *SeenRequest) Answered() bool { return !r.AnsweredAt.IsZero() }
