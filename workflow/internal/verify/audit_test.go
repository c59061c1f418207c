package verify

import (
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
)

// logOf is an audit log: first global events, each linked to the one
// before, then per-run events linked within their run, seqs from 1.
func logOf(global int, runs ...string) []*record.AuditEvent {
	var evs []*record.AuditEvent
	prev, runPrev := "", map[string]string{}
	add := func(format int, run string) {
		ev := &record.AuditEvent{Seq: int64(len(evs) + 1), Format: format, RunID: run, Action: record.EventSubmitted, At: time.UnixMilli(int64(len(evs)))}
		if format == record.AuditPerRun {
			ev.PrevHash = runPrev[run]
		} else {
			ev.PrevHash = prev
		}
		ev.Hash = record.AuditHash(ev)
		prev, runPrev[run] = ev.Hash, ev.Hash
		evs = append(evs, ev)
	}
	for range global {
		add(record.AuditGlobal, "run-0")
	}
	for _, run := range runs {
		add(record.AuditPerRun, run)
	}
	return evs
}

// rehashed recomputes an event's hash after a change, as someone who can
// write the store would.
func rehashed(ev *record.AuditEvent) { ev.Hash = record.AuditHash(ev) }

// TestChainProblem: an intact log of both formats has no problem; a log
// reordered, with a gap in its global chain, with a link broken or with an
// older global event after per-run ones is named for what it is.
func TestChainProblem(t *testing.T) {
	tests := []struct {
		name   string
		damage func(evs []*record.AuditEvent) []*record.AuditEvent
		want   string
	}{
		{"intact", func(evs []*record.AuditEvent) []*record.AuditEvent { return evs }, ""},
		{"reordered", func(evs []*record.AuditEvent) []*record.AuditEvent {
			evs[3], evs[4] = evs[4], evs[3]
			return evs
		}, "the log was reordered"},
		{"global event missing", func(evs []*record.AuditEvent) []*record.AuditEvent {
			return append(evs[:1:1], evs[2:]...)
		}, "audit event 2 missing (found 3)"},
		{"global link broken", func(evs []*record.AuditEvent) []*record.AuditEvent {
			evs[1].PrevHash = "x"
			rehashed(evs[1])
			return evs
		}, "audit chain broken at event 2"},
		{"per-run event changed", func(evs []*record.AuditEvent) []*record.AuditEvent {
			evs[4].Actor = "someone"
			return evs
		}, "audit chain broken at event 5, of run run-b"},
		{"global after per-run", func(evs []*record.AuditEvent) []*record.AuditEvent {
			evs[4].Format = record.AuditGlobal
			rehashed(evs[4])
			return evs
		}, "comes after events chained per run"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := chainProblem(tc.damage(logOf(3, "run-a", "run-b", "run-a", "run-b")))
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestParseAnchor: what String prints parses back, for an anchor record and
// for an event of the global chain, its hash read in lower case; an id that
// is not a positive number or a hash of another length is refused.
func TestParseAnchor(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	for _, a := range []Anchor{{Seq: 12, Hash: hash}, {Seq: 3, Hash: hash, Event: true}} {
		if got, err := ParseAnchor(a.String()); err != nil || got != a {
			t.Errorf("%s parses as %+v, %v", a, got, err)
		}
	}
	if got, err := ParseAnchor(" A7:" + strings.ToUpper(hash) + "\n"); err != nil || got != (Anchor{Seq: 7, Hash: hash}) {
		t.Errorf("upper case: %+v, %v", got, err)
	}
	for _, s := range []string{"", "A0:" + hash, "A+1:" + hash, "-1:" + hash, "A1:" + hash[:62], "A1" + hash, "Ax:" + hash} {
		if _, err := ParseAnchor(s); err == nil || !strings.Contains(err.Error(), "want A12:HASH") {
			t.Errorf("ParseAnchor(%q) = %v, want it refused", s, err)
		}
	}
}
