package sqlstore

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
)

// A checkpoint row's events come back as they were written, byte for byte
// in every field the event's hash covers; no detail and an empty one stay
// apart.
func TestEventsComeBackAsWritten(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 123e6, time.UTC)
	evs := []*record.AuditEvent{
		{Seq: 7, Format: record.AuditPerRun, Actor: "U0LEAD0001", Action: "decided", Detail: []byte(`{"verdict":"approve"}`), At: at,
			PrevHash: "p", Hash: "h1", Seal: record.Seal{KeyID: "k1", MAC: "m1"}},
		{Seq: 8, Format: record.AuditPerRun, Actor: "signoff", Action: "scheduled", At: at, PrevHash: "h1", Hash: "h2"},
		{Seq: 9, Format: record.AuditPerRun, Actor: "ünïcode \x00 and \xff", Action: "finished", Detail: []byte{}, PrevHash: "h2", Hash: "h3"},
		// Digests kept as bytes, and text that only looks like one.
		{Seq: 10, Format: record.AuditPerRun, Action: "pruned", PrevHash: hex64, Hash: strings.ToUpper(hex64),
			Seal: record.Seal{KeyID: "k1", MAC: hex64[:63] + "g"}},
	}
	got, err := DecodeEvents("run-1", 3, "cp3", EncodeEvents(evs))
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		want := *e
		want.RunID, want.CheckpointSeq, want.CheckpointHash = "run-1", 3, "cp3"
		if !reflect.DeepEqual(got[i], &want) {
			t.Errorf("event %d = %+v, want %+v", i, got[i], &want)
		}
	}
	if got[1].Detail != nil || got[2].Detail == nil {
		t.Errorf("details %q and %q: want none and an empty one", got[1].Detail, got[2].Detail)
	}
}

// hex64 is a SHA-256 as the records write one.
var hex64 = strings.Repeat("0123456789abcdef", 4)

// A digest is kept in half the bytes of its text.
func TestDigestsAreKeptAsTheirBytes(t *testing.T) {
	e := &record.AuditEvent{Seq: 1, Format: 2, PrevHash: hex64, Hash: hex64, Seal: record.Seal{MAC: hex64}}
	if n := len(EncodeEvents([]*record.AuditEvent{e})); n > 3*33+12 {
		t.Errorf("an event with three digests takes %d bytes, want at most %d", n, 3*33+12)
	}
}

// Anything but whole events is refused, whatever byte it stops at.
func TestCutEventsAreRefused(t *testing.T) {
	b := EncodeEvents([]*record.AuditEvent{{Seq: 1, Format: 2, Actor: "a", Action: "b", Detail: []byte(`{}`), PrevHash: "p", Hash: "h"}})
	for n := 1; n < len(b); n++ {
		if evs, err := DecodeEvents("run-1", 1, "h", b[:n]); err == nil {
			t.Errorf("the first %d of %d bytes decode to %+v", n, len(b), evs)
		}
	}
	if _, err := DecodeEvents("run-1", 1, "h", append([]byte{0}, b...)); err == nil {
		t.Error("an event at seq 0 decodes")
	}
}

// FuzzDecodeEvents: whatever a row holds, decoding it returns events or an
// error, never panics, and events decoded encode to bytes that decode to
// the same events.
func FuzzDecodeEvents(f *testing.F) {
	f.Add(EncodeEvents([]*record.AuditEvent{{Seq: 1, Format: 2, Actor: "a", Action: "b", Detail: []byte(`{}`), PrevHash: "p", Hash: "h", At: time.UnixMilli(5)}}))
	f.Add([]byte{})
	f.Add([]byte{1, 2, 0, 0, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := DecodeEvents("run-1", 1, "h", b)
		if err != nil {
			return
		}
		again, err := DecodeEvents("run-1", 1, "h", EncodeEvents(evs))
		if err != nil || !reflect.DeepEqual(again, evs) {
			t.Fatalf("events %+v encode to bytes that decode to %+v, %v", evs, again, err)
		}
	})
}

// Columns added to an insert go at the end of its column list, each with a
// value to bind.
func TestAddColumns(t *testing.T) {
	q, _ := appendCheckpoint(&record.Checkpoint{})
	got := addColumns(q, `events, last_event_seq`)
	want := `INSERT INTO checkpoints (` + checkpointColumns + `, events, last_event_seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	if got != want {
		t.Errorf("addColumns =\n%s\nwant\n%s", got, want)
	}
}
