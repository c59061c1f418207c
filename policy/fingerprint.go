package policy

import (
	"fmt"
	"strings"

	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/record"
)

// FingerprintInput is everything an approval binds: if any of it changes, an old
// button can no longer approve anything.
type FingerprintInput struct {
	RunID          string            `json:"run_id"`
	Actions        []record.Action   `json:"actions"`
	Evidence       []record.Evidence `json:"-"`
	Risk           record.Risk       `json:"risk"`
	PolicyRevision string            `json:"policy_revision"`
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
		RunID          string      `json:"run_id"`
		Actions        []action    `json:"actions"`
		Evidence       []string    `json:"evidence"`
		Risk           record.Risk `json:"risk"`
		PolicyRevision string      `json:"policy_revision"`
	}{RunID: in.RunID, Risk: in.Risk, PolicyRevision: in.PolicyRevision, Actions: []action{}, Evidence: []string{}}
	for i, a := range in.Actions {
		args, err := jsonvalue.Canonical(a.Args)
		if err != nil {
			return "", fmt.Errorf("fingerprint: action %d: %w", i+1, err)
		}
		doc.Actions = append(doc.Actions, action{Name: a.Name, Args: args})
	}
	for i, ev := range in.Evidence {
		d, err := jsonvalue.EvidenceDigest(ev)
		if err != nil {
			return "", fmt.Errorf("fingerprint: evidence %d: %w", i+1, err)
		}
		doc.Evidence = append(doc.Evidence, d)
	}
	return jsonvalue.DigestOf(doc)
}

// ShortFingerprintLen is how much of a fingerprint people are shown, and may
// type back to approve: 16 hex digits are 64 bits, too many to meet by chance.
const ShortFingerprintLen = 16

// ShortFingerprint is the prefix of a fingerprint shown to people.
func ShortFingerprint(fp string) string {
	if len(fp) > ShortFingerprintLen {
		return fp[:ShortFingerprintLen]
	}
	return fp
}

// FingerprintGiven tells whether given names the fingerprint full: all of it, or
// the short form people are shown (any prefix of at least ShortFingerprintLen),
// in either case. short reports a prefix of full that is too short to bind.
func FingerprintGiven(given, full string) (ok, short bool) {
	g := strings.ToLower(strings.TrimSpace(given))
	if g == "" || !strings.HasPrefix(full, g) {
		return false, false
	}
	ok = len(g) >= ShortFingerprintLen || g == full
	return ok, !ok
}

// DistinctFingerprints shortens two fingerprints for people, each to the same
// length, long enough that they read differently when they differ: at least
// the short form, and past the first character where they part.
func DistinctFingerprints(a, b string) (string, string) {
	n := ShortFingerprintLen
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if a != b {
		n = max(n, i+1)
	}
	return cutFingerprint(a, n), cutFingerprint(b, n)
}

func cutFingerprint(fp string, n int) string {
	if len(fp) > n {
		return fp[:n]
	}
	return fp
}
