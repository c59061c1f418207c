package record

import "encoding/json"

// Action is one proposed change to the world: a name and its arguments.
// Args holds canonical JSON (see Canonical) once the engine has accepted it.
type Action struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Evidence is something a step found and an approver is shown.
type Evidence struct {
	Source string          `json:"source"`
	Data   json.RawMessage `json:"data"`
}

// Person is someone who asks or decides.
type Person struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// Receipt is the target's proof that an operation happened.
type Receipt struct {
	ID     string          `json:"id"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

// Risk is how risky a rule says an action is. It is stored with every gate
// and approval request and is part of the fingerprint, so a constant's value
// never changes.
type Risk string

// Risk levels a rule may assign, lowest first.
const (
	RiskLow    Risk = "low"
	RiskMedium Risk = "medium"
	RiskHigh   Risk = "high"
)

// Risks lists every risk level, lowest first.
var Risks = []Risk{RiskLow, RiskMedium, RiskHigh}

// Valid reports whether r is one of Risks.
func (r Risk) Valid() bool { return r.Rank() >= 0 }

// Rank is r's position in Risks, -1 for none.
func (r Risk) Rank() int {
	for i, v := range Risks {
		if r == v {
			return i
		}
	}
	return -1
}

// Resolution is what a person found out about a run that needs attention.
// The value is stored in the run's audit event, so it never changes.
type Resolution string

const (
	// ResolveHappened: the effect took place (the person saw it at the
	// target); the operation gets the receipt the person gives.
	ResolveHappened Resolution = "happened"
	// ResolveRetry: it certainly did not happen; run it again under the same
	// idempotency key.
	ResolveRetry Resolution = "retry"
	// ResolveAbandon: it certainly did not happen; end the run as failed.
	ResolveAbandon Resolution = "abandon"
)

// Describe says in words what a person found.
func (r Resolution) Describe() string {
	switch r {
	case ResolveHappened:
		return "it happened"
	case ResolveRetry:
		return "it did not happen, and is sent again under the same key"
	case ResolveAbandon:
		return "it did not happen, and the run is abandoned"
	}
	return string(r)
}

// Resolutions lists every resolution.
var Resolutions = []Resolution{ResolveHappened, ResolveRetry, ResolveAbandon}

// Redaction is what a redacted field shows instead of its value.
const Redaction = "[redacted]"
