package verify

import (
	"fmt"
	"strconv"
	"strings"
)

// Anchor names, as recorded outside the store, either an anchor record by
// its id and hash (A12:HASH: serve writes one every ten minutes and logs
// it), which commits to every run's audit events up to its time, or, as
// anchors did before the log was chained per run, one event of the global
// chain by its seq and hash (SEQ:HASH).
type Anchor struct {
	Seq  int64  `json:"seq"` // the anchor's id, or the event's seq
	Hash string `json:"hash"`
	// Event: Seq names an event of the global chain, not an anchor record.
	Event bool `json:"event,omitempty"`
}

// String is the anchor as `verify --anchor` takes it: A12:HASH, or SEQ:HASH
// for an event.
func (a Anchor) String() string {
	if a.Event {
		return fmt.Sprintf("%d:%s", a.Seq, a.Hash)
	}
	return fmt.Sprintf("A%d:%s", a.Seq, a.Hash)
}

// ParseAnchor reads A12:HASH (an anchor record) or SEQ:HASH (an event of
// the global chain, as anchors were written before).
func ParseAnchor(s string) (Anchor, error) {
	id, hash, ok := strings.Cut(strings.TrimSpace(s), ":")
	rest, record := strings.CutPrefix(id, "A")
	n, err := strconv.ParseInt(rest, 10, 64)
	if !ok || err != nil || n < 1 || len(hash) != 64 || strings.HasPrefix(rest, "+") {
		return Anchor{}, fmt.Errorf("anchor %q: want A12:HASH, as serve logs it and verify prints it (a positive id, a 64-character hash), or SEQ:HASH as earlier versions logged it", s)
	}
	return Anchor{Seq: n, Hash: strings.ToLower(hash), Event: !record}, nil
}
