package runtx

import (
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
)

// FingerprintOf computes the fingerprint of a state's proposal under a policy revision.
func FingerprintOf(st *record.State, risk record.Risk, revision string) (string, error) {
	return policy.Fingerprint(policy.FingerprintInput{
		RunID: st.RunID, Actions: st.Actions, Evidence: st.Evidence, Risk: risk, PolicyRevision: revision,
	})
}

// FingerprintOf is the package's FingerprintOf, answered from the memo of
// the fingerprints this process computed when st's proposal is one of them.
func (rs *Runs) FingerprintOf(st *record.State, risk record.Risk, revision string) (string, error) {
	if rs.fps == nil {
		return FingerprintOf(st, risk, revision)
	}
	return rs.fps.Of(st, risk, revision)
}
