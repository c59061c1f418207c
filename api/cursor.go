package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A cursor is where a page ended: the (created_at, id) of its last run,
// and the key of the filter the page was made with, so that a cursor sent
// with another filter is refused instead of quietly skipping runs. It is
// opaque to clients (base64url), sealed, and checked strictly on the way
// back in.
type cursor struct {
	created time.Time
	id      string
	filter  string // filterKey of the list's filter
}

// cursorSeal seals the cursors the API gives out with an HMAC, so that one
// it never gave out (a well-formed position a client made up) is refused.
// The first key seals; each opens, so that a key can be rotated without
// breaking the pages being read.
type cursorSeal struct {
	keys [][]byte
}

// minCursorKey is the shortest key a cursor may be sealed with.
const minCursorKey = 32

// newCursorSeal seals with keys, or, without any, with a random key of this
// process alone: its cursors then last as long as the process.
func newCursorSeal(keys [][]byte) (*cursorSeal, error) {
	for i, k := range keys {
		if len(k) < minCursorKey {
			return nil, fmt.Errorf("cursor key %d: %d bytes, at least %d needed", i+1, len(k), minCursorKey)
		}
	}
	if len(keys) == 0 {
		k := make([]byte, minCursorKey)
		if _, err := rand.Read(k); err != nil {
			return nil, fmt.Errorf("make a cursor key: %w", err)
		}
		keys = [][]byte{k}
	}
	return &cursorSeal{keys: slices.Clone(keys)}, nil
}

// cursorVersion is the first field of every cursor; cursors of earlier
// versions (unsealed) are refused.
const cursorVersion = "3"

// macOf is the seal of a cursor's fields under key: the first 16 bytes of
// HMAC-SHA256, in hex.
func (s *cursorSeal) macOf(key []byte, created, filter, id string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("signoff/api-cursor/v" + cursorVersion + "\n" + created + "\n" + filter + "\n" + id))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

func (s *cursorSeal) encode(c cursor) string {
	ms := strconv.FormatInt(c.created.UnixMilli(), 10)
	mac := s.macOf(s.keys[0], ms, c.filter, c.id)
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + ":" + ms + ":" + c.filter + ":" + mac + ":" + c.id))
}

// filterKey names what a list keeps (statuses in any order, task,
// requester), not its page size, which may change from page to page.
func filterKey(f storage.RunFilter) string {
	st := make([]string, len(f.Statuses))
	for i, s := range f.Statuses {
		st[i] = string(s)
	}
	slices.Sort(st)
	st = slices.Compact(st)
	b, _ := json.Marshal([]any{st, f.TaskID, f.RequesterID})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

var errCursor = errors.New("not a cursor this API gave out")

func (s *cursorSeal) decode(str string) (cursor, error) {
	if len(str) > 512 {
		return cursor{}, errCursor
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(str)
	if err != nil {
		return cursor{}, errCursor
	}
	parts := strings.SplitN(string(b), ":", 5)
	if len(parts) != 5 || parts[0] != cursorVersion || !isHex(parts[2], 16) || !isHex(parts[3], 32) {
		return cursor{}, errCursor
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	id := parts[4]
	if err != nil || ms < 0 || parts[1] != strconv.FormatInt(ms, 10) || id == "" || len(id) > 256 || !utf8.ValidString(id) ||
		strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return cursor{}, errCursor
	}
	sealed := slices.ContainsFunc(s.keys, func(k []byte) bool {
		return hmac.Equal([]byte(s.macOf(k, parts[1], parts[2], id)), []byte(parts[3]))
	})
	if !sealed {
		return cursor{}, errCursor
	}
	return cursor{created: time.UnixMilli(ms).UTC(), id: id, filter: parts[2]}, nil
}

// isHex: n lowercase hex digits, the one form the seal and filterKey make.
func isHex(s string, n int) bool {
	return len(s) == n && !strings.ContainsFunc(s, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') })
}
