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
