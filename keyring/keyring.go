// Package keyring holds the integrity keys signoff seals its records with:
// parsing a key file's lines, making a fresh key, MACs over a record's parts
// under the sealing key and their check under any key of the ring, and keys
// derived for other uses.
//
// It is a leaf of the standard library alone, so that the engine, the
// program that reads key files and the edges that derive keys from them
// (the agent API's cursors) share one ring without importing each other.
package keyring

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Hash chains catch accidents; they do not stop someone who can write the
// database, who can recompute every hash. A Ring authenticates what the
// engine stores (checkpoints, approval requests, decisions, operations and
// audit events) with HMAC-SHA256 under a key kept outside the database: a
// changed row no longer matches its MAC, and a MAC cannot be recomputed
// without the key. Each row names the key that sealed it, so keys can rotate:
// the first key of a ring seals, every key of it verifies.

// Key is one integrity key: an id (recorded on each row it seals) and at least
// 32 bytes of secret.
type Key struct {
	ID     string
	Secret []byte
}

// Ring is the keys an engine seals and verifies with. The zero value and
// nil seal nothing and accept only unkeyed rows.
type Ring struct {
	active *Key
	keys   map[string][]byte
	ids    []string // in the order given, the sealing key first
}

var keyID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// MinKeyBytes is the shortest secret a Key may have.
const MinKeyBytes = 32

// New makes a ring whose first key seals and whose keys all verify.
func New(keys ...Key) (*Ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("integrity keys: at least one key is needed")
	}
	r := &Ring{keys: map[string][]byte{}}
	for i, k := range keys {
		if !keyID.MatchString(k.ID) {
			return nil, fmt.Errorf("integrity key %d: id %q must be 1 to 64 letters, digits, '.', '_' or '-'", i+1, k.ID)
		}
		if len(k.Secret) < MinKeyBytes {
			return nil, fmt.Errorf("integrity key %s: %d bytes of secret, at least %d needed", k.ID, len(k.Secret), MinKeyBytes)
		}
		if _, dup := r.keys[k.ID]; dup {
			return nil, fmt.Errorf("integrity key %s: the id is used twice", k.ID)
		}
		r.keys[k.ID] = append([]byte(nil), k.Secret...)
		r.ids = append(r.ids, k.ID)
	}
	r.active = &Key{ID: keys[0].ID, Secret: r.keys[keys[0].ID]}
	return r, nil
}

// Parse reads keys written one a line as `ID:SECRET`, the secret in
// base64 (standard or URL alphabet, padding optional); blank lines and lines
// starting with # are skipped. The first key seals; the others only verify,
// which is how a key is rotated: put the new key first, keep the old ones
// below it for as long as rows sealed with them are kept.
func Parse(text string) (*Ring, error) {
	var keys []Key
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, secret, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("integrity keys, line %d: want ID:SECRET (the secret in base64)", n+1)
		}
		b, err := decodeSecret(strings.TrimSpace(secret))
		if err != nil {
			return nil, fmt.Errorf("integrity keys, line %d (key %s): the secret is not base64", n+1, strings.TrimSpace(id))
		}
		keys = append(keys, Key{ID: strings.TrimSpace(id), Secret: b})
	}
	return New(keys...)
}

func decodeSecret(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if b, err := base64.RawStdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawURLEncoding.DecodeString(s)
}

// NewLine makes a fresh random key and returns it as a line of a key file.
func NewLine(id string) (string, error) {
	if !keyID.MatchString(id) {
		return "", fmt.Errorf("integrity key id %q must be 1 to 64 letters, digits, '.', '_' or '-'", id)
	}
	secret := make([]byte, MinKeyBytes)
	if _, err := rand.Read(secret); err != nil {
		return "", fmt.Errorf("generate integrity key: %w", err)
	}
	return id + ":" + base64.RawURLEncoding.EncodeToString(secret), nil
}

// ActiveKeyID is the id of the key that seals, or "" for no ring.
func (r *Ring) ActiveKeyID() string {
	if r == nil || r.active == nil {
		return ""
	}
	return r.active.ID
}

// IDs are the ids of the ring's keys, the sealing one first; none for no ring.
func (r *Ring) IDs() []string {
	if r == nil {
		return nil
	}
	return append([]string(nil), r.ids...)
}

// Has says whether the ring holds the key with this id.
func (r *Ring) Has(id string) bool {
	if r == nil {
		return false
	}
	_, ok := r.keys[id]
	return ok
}

// Seal returns the active key's id and the MAC of a record of kind made of
// parts, or "", "" without a ring.
func (r *Ring) Seal(kind string, parts ...string) (keyID, mac string) {
	if r == nil || r.active == nil {
		return "", ""
	}
	return r.active.ID, macOf(r.active.Secret, kind, parts)
}

// ErrUnkeyed says a row carries no MAC: written before keys, or stripped.
var ErrUnkeyed = errors.New("the row is not sealed with a key")

// Check verifies a record's MAC. A row without one is ErrUnkeyed; the caller
// decides whether that is acceptable (a store written before keys).
func (r *Ring) Check(kind, keyID, mac string, parts ...string) error {
	if keyID == "" && mac == "" {
		return ErrUnkeyed
	}
	if r == nil || r.keys == nil {
		return fmt.Errorf("sealed with key %s, but no integrity key is configured", keyID)
	}
	secret, ok := r.keys[keyID]
	if !ok {
		return fmt.Errorf("sealed with key %s, which is not among the configured keys", keyID)
	}
	want := macOf(secret, kind, parts)
	if !hmac.Equal([]byte(want), []byte(mac)) {
		return errors.New("its MAC does not match: the row was changed outside signoff")
	}
	return nil
}

// macOf is HMAC-SHA256 over the kind and the length-prefixed parts, so that no
// two different records (or kinds) share an input.
func macOf(secret []byte, kind string, parts []string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("signoff/" + kind + "/v1"))
	for _, p := range parts {
		m.Write([]byte{'\n'})
		m.Write([]byte(strconv.Itoa(len(p))))
		m.Write([]byte{':'})
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// Derive returns a key for purpose made from each key of the ring, the
// sealing key's first, so that another part of signoff (the agent API's
// cursors) can seal what it hands out with a secret kept where the ring is,
// outside the store, without holding the ring's own secrets. Every process
// with the same ring derives the same keys. None for no ring.
func (r *Ring) Derive(purpose string) [][]byte {
	if r == nil {
		return nil
	}
	out := make([][]byte, 0, len(r.ids))
	for _, id := range r.ids {
		m := hmac.New(sha256.New, r.keys[id])
		m.Write([]byte("signoff/derive:" + purpose))
		out = append(out, m.Sum(nil))
	}
	return out
}
