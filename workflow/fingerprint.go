package workflow

import (
	"fmt"
)

// FingerprintInput is everything an approval binds: if any of it changes, an old
// button can no longer approve anything.
type FingerprintInput struct {
	RunID          string     `json:"run_id"`
	Actions        []Action   `json:"actions"`
	Evidence       []Evidence `json:"-"`
	Risk           string     `json:"risk"`
	PolicyRevision string     `json:"policy_revision"`
}

// Fingerprint is the SHA-256 over the canonical JSON of the run id, each action's
// name and normalised arguments, the digests of the evidence shown to the
// approver, the risk and the policy revision.
func Fingerprint(in FingerprintInput) (string, error) {
	type action struct {
		Name string `json:"name"`
		Args any    `json:"args"`
	}
	doc := struct {
		RunID          string   `json:"run_id"`
		Actions        []action `json:"actions"`
		Evidence       []string `json:"evidence"`
		Risk           string   `json:"risk"`
		PolicyRevision string   `json:"policy_revision"`
	}{RunID: in.RunID, Risk: in.Risk, PolicyRevision: in.PolicyRevision, Actions: []action{}, Evidence: []string{}}
	for i, a := range in.Actions {
		args, err := Canonical(a.Args)
		if err != nil {
			return "", fmt.Errorf("fingerprint: action %d: %w", i+1, err)
		}
		doc.Actions = append(doc.Actions, action{Name: a.Name, Args: args})
	}
	for i, ev := range in.Evidence {
		d, err := digestOf(ev)
		if err != nil {
			return "", fmt.Errorf("fingerprint: evidence %d: %w", i+1, err)
		}
		doc.Evidence = append(doc.Evidence, d)
	}
	return digestOf(doc)
}

// ShortFingerprint is the prefix of a fingerprint shown to people.
func ShortFingerprint(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

// fingerprintOf computes the fingerprint of a state's proposal under a policy revision.
func fingerprintOf(st *State, risk, revision string) (string, error) {
	return Fingerprint(FingerprintInput{
		RunID: st.RunID, Actions: st.Actions, Evidence: st.Evidence, Risk: risk, PolicyRevision: revision,
	})
}
