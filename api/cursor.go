package api

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A cursor is where a page ended: the (created_at, id) of its last run. It
// is opaque to clients (base64url) and checked strictly on the way back in.
type cursor struct {
	created time.Time
	id      string
}

func (c cursor) encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte("1:" + strconv.FormatInt(c.created.UnixMilli(), 10) + ":" + c.id))
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
	parts := strings.SplitN(string(b), ":", 3)
	if len(parts) != 3 || parts[0] != "1" {
		return cursor{}, errCursor
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	id := parts[2]
	if err != nil || ms < 0 || parts[1] != strconv.FormatInt(ms, 10) || id == "" || len(id) > 256 || !utf8.ValidString(id) ||
		strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return cursor{}, errCursor
	}
	return cursor{created: time.UnixMilli(ms).UTC(), id: id}, nil
}
