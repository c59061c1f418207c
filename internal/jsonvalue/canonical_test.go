package jsonvalue

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

// evidenceCases are evidence whose digest must not change: what a
// fingerprint or a proposal digest stored yesterday was made of.
var evidenceCases = []record.Evidence{
	{Source: "get_payments", Data: json.RawMessage(`{"payments":[{"id":"pi_1","amount":119.00,"currency":"usd"}]}`)},
	{Source: "orders", Data: json.RawMessage(" \n{ \"b\" : 1e2, \"a\" : [true, false, null, -0, 0.1] } \t")},
	{Source: "<html> & \u2028", Data: json.RawMessage(`"<b>\u00e9\ud83d\ude00\u0007"`)},
	{Source: "nil data"},
	{Source: "", Data: json.RawMessage(`null`)},
	{Source: "keys", Data: json.RawMessage(`{"\u20ac":1,"\ud83d\ude00":2,"z":3,"a":4,"\u00e9":5}`)},
	{Source: "bad \xff utf-8", Data: json.RawMessage(`[1]`)},
}

// TestEvidenceDigestIsDigestOf: the digest read in one pass is the one
// DigestOf gives, byte for byte, and so is the canonical form.
func TestEvidenceDigestIsDigestOf(t *testing.T) {
	for _, ev := range evidenceCases {
		want, err := DigestOf(ev)
		if err != nil {
			t.Fatalf("DigestOf(%q): %v", ev.Source, err)
		}
		got, err := EvidenceDigest(ev)
		if err != nil || got != want {
			t.Errorf("EvidenceDigest(%q) = %s, %v; want %s", ev.Source, got, err, want)
		}
		wantC, _ := CanonicalOf(ev)
		if c, ok := CanonicalEvidence(ev); !ok || !bytes.Equal(c, wantC) {
			t.Errorf("CanonicalEvidence(%q) = %s, %v; want %s", ev.Source, c, ok, wantC)
		}
	}
}

// TestEvidenceDigestErrors: evidence DigestOf refuses is refused with
// DigestOf's error.
func TestEvidenceDigestErrors(t *testing.T) {
	for _, data := range []string{`{`, ``, `{"a":1,"a":2}`, "\"\xff\"", `[1] [2]`} {
		ev := record.Evidence{Source: "x", Data: json.RawMessage(data)}
		_, want := DigestOf(ev)
		_, got := EvidenceDigest(ev)
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Errorf("data %q: EvidenceDigest error %v, DigestOf error %v", data, got, want)
		}
	}
}

func TestCanonicalObjectAndArray(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		of   any
	}{
		{"names sorted by UTF-16 code units", CanonicalObject(
			Member{"\U0001F600", []byte(`1`)}, Member{"\u20ac", []byte(`2`)}, Member{"b", []byte(`3`)}, Member{"a\"", []byte(`4`)}),
			map[string]int{"\U0001F600": 1, "\u20ac": 2, "b": 3, "a\"": 4}},
		{"empty object", CanonicalObject(), map[string]int{}},
		{"array", CanonicalArray([]byte(`{"a":1}`), []byte(`"x"`), []byte(`null`)), []any{map[string]int{"a": 1}, "x", nil}},
		{"empty array", CanonicalArray(), []any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := CanonicalOf(tt.of)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(tt.got, want) {
				t.Errorf("got %s, want %s", tt.got, want)
			}
		})
	}
}

// FuzzEvidenceDigest: for any source and data, EvidenceDigest gives what
// DigestOf gives, or the same error.
func FuzzEvidenceDigest(f *testing.F) {
	for _, ev := range evidenceCases {
		f.Add(ev.Source, []byte(ev.Data), ev.Data == nil)
	}
	f.Add("x", []byte(`{"a":1,"a":2}`), false)
	f.Add("x", []byte(``), false)
	f.Fuzz(func(t *testing.T, source string, data []byte, isNil bool) {
		ev := record.Evidence{Source: source, Data: json.RawMessage(data)}
		if isNil {
			ev.Data = nil
		}
		want, wantErr := DigestOf(ev)
		got, gotErr := EvidenceDigest(ev)
		if got != want || (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
			t.Fatalf("EvidenceDigest = %q, %v; DigestOf = %q, %v", got, gotErr, want, wantErr)
		}
	})
}
