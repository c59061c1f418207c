package jsonvalue

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"unicode/utf16"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/signoff-dev/signoff/record"
)

// A digest of a document that holds evidence (a fingerprint, a proposal's
// digest) used to marshal the whole document and canonicalise the result,
// reading each piece of evidence twice for every digest. The helpers here
// build the same bytes from parts that are canonical already, so that
// evidence is read once per digest.

// Member is an object member whose value is already canonical: Canonical's
// output, or CanonicalObject's, CanonicalArray's or CanonicalEvidence's.
type Member struct {
	Name  string
	Value []byte
}

// CanonicalObject is what Canonical gives for the object of members: the
// names quoted and sorted by their UTF-16 code units as RFC 8785 sorts them,
// each value as it is. Names must be distinct.
func CanonicalObject(members ...Member) []byte {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b Member) int { return compareUTF16(a.Name, b.Name) })
	n := 2
	for _, m := range ms {
		n += len(m.Name) + len(m.Value) + 4
	}
	b := append(make([]byte, 0, n), '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, m.Name)
		b = append(append(b, ':'), m.Value...)
	}
	return append(b, '}')
}

// CanonicalArray is what Canonical gives for the array of values, each
// already canonical.
func CanonicalArray(values ...[]byte) []byte {
	n := 2
	for _, v := range values {
		n += len(v) + 1
	}
	b := append(make([]byte, 0, n), '[')
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v...)
	}
	return append(b, ']')
}

// CanonicalOf is the canonical form of v marshalled, as DigestOf digests it.
func CanonicalOf(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Canonical(b)
}

// CanonicalEvidence is the canonical form of ev as CanonicalOf(ev) gives
// it, with ev.Data read once instead of twice. ok is false when that cannot
// be done for these bytes (the data does not canonicalise on its own): the
// caller then uses CanonicalOf, whose result or error is the one to give.
func CanonicalEvidence(ev record.Evidence) (c []byte, ok bool) {
	data := []byte(ev.Data)
	if ev.Data == nil {
		data = []byte("null") // json.Marshal writes a nil RawMessage so
	}
	cd, err := Canonical(data)
	if err != nil {
		return nil, false
	}
	return CanonicalObject(Member{"data", cd}, Member{"source", appendString(nil, ev.Source)}), true
}

// EvidenceDigest is DigestOf(ev), reading ev.Data once.
func EvidenceDigest(ev record.Evidence) (string, error) {
	c, ok := CanonicalEvidence(ev)
	if !ok {
		return DigestOf(ev)
	}
	return DigestCanonical(c), nil
}

// DigestCanonical is the hex SHA-256 of bytes already canonical: Digest
// without canonicalising them again.
func DigestCanonical(c []byte) string {
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:])
}

// appendString appends s quoted as RFC 8785 writes a string. Invalid UTF-8
// becomes U+FFFD, as json.Marshal writes it: the error that says so is
// dropped because the marshalled form never reports it either.
func appendString(b []byte, s string) []byte {
	b, _ = jsontext.AppendQuote(b, s)
	return b
}

// compareUTF16 orders names as RFC 8785 does: by their UTF-16 code units.
func compareUTF16(a, b string) int {
	if isASCII(a) && isASCII(b) {
		return cmp.Compare(a, b)
	}
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
