// Package fingerprint computes the fingerprints that bind an approval to a
// proposal's exact arguments (policy.Fingerprint), and remembers the ones
// this process computed last. A run's fingerprint is computed from the same
// bytes at its submission, at its decision and before each call of its
// execution; canonicalising its arguments and evidence is most of that
// work, and hashing the bytes that went in is a tenth of it.
package fingerprint

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"sync"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
)

// DefaultSize is how many fingerprints a Memo holds: the runs a busy
// process decides and executes within minutes of their submission, in a
// few hundred KB.
const DefaultSize = 4096

// Memo is policy.Fingerprint with the latest results kept by a SHA-256 of
// exactly what each was computed from. Safe for concurrent use.
type Memo struct {
	mu    sync.Mutex
	byKey map[[sha256.Size]byte]string
	ring  [][sha256.Size]byte // keys in the order they came, the oldest dropped first
	next  int
}

// NewMemo holds up to size fingerprints (at least one).
func NewMemo(size int) *Memo {
	return &Memo{byKey: make(map[[sha256.Size]byte]string, max(size, 1)), ring: make([][sha256.Size]byte, max(size, 1))}
}

// Of is the fingerprint of st's proposal (its run id, actions and evidence)
// under risk and a policy revision. Any byte of those that differs from a
// proposal's remembered is a different key, so a result is reused only for
// the very bytes it came from.
func (m *Memo) Of(st *record.State, risk record.Risk, revision string) (string, error) {
	in := policy.FingerprintInput{RunID: st.RunID, Actions: st.Actions, Evidence: st.Evidence, Risk: risk, PolicyRevision: revision}
	k := key(in)
	m.mu.Lock()
	fp, ok := m.byKey[k]
	m.mu.Unlock()
	if ok {
		return fp, nil
	}
	fp, err := policy.Fingerprint(in)
	if err != nil {
		return "", err
	}
	m.keep(k, fp)
	return fp, nil
}

func (m *Memo) keep(k [sha256.Size]byte, fp string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byKey[k]; ok {
		return
	}
	if len(m.byKey) == len(m.ring) {
		delete(m.byKey, m.ring[m.next])
	}
	m.ring[m.next] = k
	m.next = (m.next + 1) % len(m.ring)
	m.byKey[k] = fp
}

// key hashes every field of in, each with its length and each list with
// its count, so that no two inputs write the same bytes.
func key(in policy.FingerprintInput) [sha256.Size]byte {
	h := sha256.New()
	part(h, []byte(in.RunID))
	count(h, len(in.Actions))
	for _, a := range in.Actions {
		part(h, []byte(a.Name))
		part(h, a.Args)
	}
	count(h, len(in.Evidence))
	for _, e := range in.Evidence {
		part(h, []byte(e.Source))
		part(h, e.Data)
	}
	part(h, []byte(in.Risk))
	part(h, []byte(in.PolicyRevision))
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

func part(h hash.Hash, b []byte) {
	count(h, len(b))
	h.Write(b)
}

func count(h hash.Hash, n int) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}
