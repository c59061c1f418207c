package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/signoff-dev/signoff/workflow"
)

// A cursor is where a page ended: the (created_at, id) of its last run,
// and the key of the filter the page was made with, so that a cursor sent
// with another filter is refused instead of quietly skipping runs. It is
// opaque to clients (base64url) and checked strictly on the way back in.
type cursor struct {
	created time.Time
	id      string
	filter  string // filterKey of the list's filter
}

func (c cursor) encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte("2:" + strconv.FormatInt(c.created.UnixMilli(), 10) + ":" + c.filter + ":" + c.id))
}

// filterKey names what a list keeps (statuses in any order, task,
// requester), not its page size, which may change from page to page.
func filterKey(f workflow.RunFilter) string {
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

func decodeCursor(s string) (cursor, error) {
	if len(s) > 512 {
		return cursor{}, errCursor
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return cursor{}, errCursor
	}
	parts := strings.SplitN(string(b), ":", 4)
	if len(parts) != 4 || parts[0] != "2" || !isFilterKey(parts[2]) {
		return cursor{}, errCursor
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	id := parts[3]
	if err != nil || ms < 0 || parts[1] != strconv.FormatInt(ms, 10) || id == "" || len(id) > 256 || !utf8.ValidString(id) ||
		strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return cursor{}, errCursor
	}
	return cursor{created: time.UnixMilli(ms).UTC(), id: id, filter: parts[2]}, nil
}

// isFilterKey: 16 lowercase hex digits, the one form filterKey makes.
func isFilterKey(s string) bool {
	return len(s) == 16 && !strings.ContainsFunc(s, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') })
}
