package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// Canonical returns the RFC 8785 canonical form of one JSON value: sorted keys,
// normalised numbers, no insignificant space. Duplicate keys and invalid UTF-8 are
// refused, so that two encodings that mean different things never hash alike.
func Canonical(b []byte) (json.RawMessage, error) {
	v := jsontext.Value(append([]byte(nil), b...))
	if err := v.Canonicalize(); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return json.RawMessage(v), nil
}

// Digest is the hex SHA-256 of the canonical form of a JSON value.
func Digest(b []byte) (string, error) {
	c, err := Canonical(b)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// digestOf marshals v deterministically and digests it.
func digestOf(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("digest: %w", err)
	}
	return Digest(b)
}
