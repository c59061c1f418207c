package record

import "time"

// Delegation lets one person (To) decide, for a while, what another (From)
// may decide, on their behalf. It is sealed like a decision: it says who may
// approve. Revoking it sets RevokedAt and RevokedBy; nothing else changes.
type Delegation struct {
	ID        string
	From      string // who delegates: a Slack user id or a person of the config
	To        string // who may decide on From's behalf
	Until     time.Time
	Reason    string
	CreatedBy string
	CreatedAt time.Time
	RevokedAt time.Time // zero while it stands
	RevokedBy string
	Version   int64
	Seal
}

// ActiveAt says whether the delegation holds at t: not revoked, not yet over.
func (d *Delegation) ActiveAt(t time.Time) bool {
	return d.RevokedAt.IsZero() && t.Before(d.Until)
}

// Deputy is a delegate named with their delegator: To may decide on
// OnBehalfOf's behalf.
type Deputy struct {
	To         string `json:"to"`
	OnBehalfOf string `json:"on_behalf_of"`
}
