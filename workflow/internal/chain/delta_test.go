package chain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/signoff-dev/signoff/record"
)

// TestDeltaRoundTrip: a state written against a base resolves to exactly
// that state, whatever changed since the base: a field, a field cleared
// (omitted, so unset), a list grown, shrunk or replaced, a field added.
func TestDeltaRoundTrip(t *testing.T) {
	deadline := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	msg := func(s string) record.Message { return record.Message{Role: "assistant", Content: s} }
	base := func() *record.State {
		return &record.State{
			SchemaVersion: record.SchemaVersion, RunID: "run-1", Workflow: "resolver", Status: record.StatusRunning, Step: 2,
			Requester: record.Person{ID: "agent:resolver"}, Summary: "refund",
			Messages: []record.Message{msg("one"), msg("two")},
			Evidence: []record.Evidence{{Source: "get_payments", Data: json.RawMessage(`{"payments":[]}`)}},
			Gate:     &record.Gate{Rule: "large-refund", Risk: "high", PolicyRevision: "1", Fingerprint: "fp", Deadline: &deadline},
		}
	}
	tests := []struct {
		name   string
		change func(st *record.State)
		grown  bool // the delta appends to a list
	}{
		{"nothing", func(*record.State) {}, false},
		{"status", func(st *record.State) { st.Status, st.Reason = record.StatusFailed, "a check failed" }, false},
		{"cleared", func(st *record.State) { st.Gate, st.Summary = nil, "" }, false},
		{"grown", func(st *record.State) { st.Messages = append(st.Messages, msg("three"), msg("four")) }, true},
		{"grown and changed", func(st *record.State) {
			st.Messages = append(st.Messages, msg("three"))
			st.Evidence = append(st.Evidence, record.Evidence{Source: "lookup", Data: json.RawMessage(`{"ok":true}`)})
			st.Step++
		}, true},
		{"shrunk", func(st *record.State) { st.Messages = st.Messages[:1] }, false},
		{"emptied", func(st *record.State) { st.Messages = nil }, false},
		{"replaced", func(st *record.State) { st.Messages = []record.Message{msg("one"), msg("2")} }, false},
		{"element changed inside", func(st *record.State) { st.Messages = []record.Message{msg("one"), msg("two, edited")} }, false},
		{"added", func(st *record.State) {
			st.Decisions = []record.DecisionRecord{{RequestID: "req-1", By: "U1", Role: "lead", Verdict: record.VerdictApprove, Via: "cli", At: deadline}}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Encode(base())
			if err != nil {
				t.Fatal(err)
			}
			next := base()
			tc.change(next)
			full, err := Encode(next)
			if err != nil {
				t.Fatal(err)
			}
			d, _, err := (&Base{Seq: 1, State: b}).Delta(full)
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Contains(d, []byte(`"`+appendMember+`"`)); got != tc.grown {
				t.Errorf("delta %s: appends %v, want %v", d, got, tc.grown)
			}
			if bytes.Contains(d, []byte(`"one"`)) && tc.grown {
				t.Errorf("delta %s repeats what the base holds", d)
			}
			cps := []*record.Checkpoint{
				{RunID: "run-1", Seq: 1, SchemaVersion: record.SchemaVersion, State: b},
				{RunID: "run-1", Seq: 2, SchemaVersion: record.SchemaVersion, State: d, BaseSeq: 1},
			}
			resolved, err := Resolve(cps, 1)
			if err != nil {
				t.Fatalf("resolve %s: %v", d, err)
			}
			st, err := Decode(resolved)
			if err != nil {
				t.Fatalf("decode %s: %v", resolved, err)
			}
			again, err := Encode(st)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, full) {
				t.Fatalf("resolved to\n%s\nwant\n%s", again, full)
			}
		})
	}
}

// BenchmarkMembers splits a state with 2 KB of varied evidence, as Delta
// splits each new state: checked for duplicate names and UTF-8 (strict),
// or read as this process's own encoding (own).
func BenchmarkMembers(b *testing.B) {
	var ev strings.Builder
	ev.WriteString(`{"payments":[`)
	for i := 0; ev.Len() < 1950; i++ {
		if i > 0 {
			ev.WriteByte(',')
		}
		fmt.Fprintf(&ev, `{"id":"pi_%014d","amount":%d,"currency":"usd","created":%d}`, i*7919, 100+i*37, 1796000000+i*1013)
	}
	ev.WriteString(`]}`)
	st := &record.State{SchemaVersion: record.SchemaVersion, RunID: "run-1", Summary: "refund",
		Evidence: []record.Evidence{{Source: "get_payments", Data: json.RawMessage(ev.String())}}}
	full, err := Encode(st)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts []jsontext.Options
	}{{"strict", nil}, {"own", ownEncoding}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := members(full, bc.opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
