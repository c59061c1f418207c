package fingerprint

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
)

func proposal() *record.State {
	return &record.State{
		RunID:    "run_1",
		Actions:  []record.Action{{Name: "request_refund", Args: json.RawMessage(`{"payment_id":"PAY-1","amount":119}`)}},
		Evidence: []record.Evidence{{Source: "get_payments", Data: json.RawMessage(`{"charges":[119,119]}`)}},
	}
}

// TestAFingerprintIsPolicysForEveryChange: with the original proposal's
// fingerprint remembered, every variant gets policy.Fingerprint's own
// answer: a change to any field the fingerprint covers is never answered
// from the memo.
func TestAFingerprintIsPolicysForEveryChange(t *testing.T) {
	for _, tc := range []struct {
		name           string
		change         func(st *record.State)
		risk, revision string
	}{
		{"as it was", func(*record.State) {}, "high", "rev-1"},
		{"another run", func(st *record.State) { st.RunID = "run_2" }, "high", "rev-1"},
		{"another action", func(st *record.State) { st.Actions[0].Name = "void_payment" }, "high", "rev-1"},
		{"another amount", func(st *record.State) { st.Actions[0].Args = json.RawMessage(`{"payment_id":"PAY-1","amount":1190}`) }, "high", "rev-1"},
		{"the same arguments spaced", func(st *record.State) { st.Actions[0].Args = json.RawMessage(`{"amount": 119, "payment_id": "PAY-1"}`) }, "high", "rev-1"},
		{"a second action", func(st *record.State) { st.Actions = append(st.Actions, st.Actions[0]) }, "high", "rev-1"},
		{"no action", func(st *record.State) { st.Actions = nil }, "high", "rev-1"},
		{"other evidence", func(st *record.State) { st.Evidence[0].Data = json.RawMessage(`{"charges":[119]}`) }, "high", "rev-1"},
		{"evidence from elsewhere", func(st *record.State) { st.Evidence[0].Source = "get_order" }, "high", "rev-1"},
		{"no evidence", func(st *record.State) { st.Evidence = nil }, "high", "rev-1"},
		{"another risk", func(*record.State) {}, "low", "rev-1"},
		{"another revision", func(*record.State) {}, "high", "rev-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemo(8)
			if _, err := m.Of(proposal(), "high", "rev-1"); err != nil {
				t.Fatal(err)
			}
			st := proposal()
			tc.change(st)
			want, err := policy.Fingerprint(policy.FingerprintInput{RunID: st.RunID, Actions: st.Actions, Evidence: st.Evidence,
				Risk: record.Risk(tc.risk), PolicyRevision: tc.revision})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // computed, then remembered
				got, err := m.Of(st, record.Risk(tc.risk), tc.revision)
				if err != nil || got != want {
					t.Fatalf("Of = %s, %v; policy.Fingerprint = %s", got, err, want)
				}
			}
		})
	}
}

// TestTheKeyCoversEveryField: key hashes each field of the fingerprint's
// input by name; a field added to any of these types must be added to key
// (and here) or two proposals that differ in it would share a fingerprint.
func TestTheKeyCoversEveryField(t *testing.T) {
	for _, tc := range []struct {
		typ  reflect.Type
		want []string
	}{
		{reflect.TypeFor[policy.FingerprintInput](), []string{"RunID", "Actions", "Evidence", "Risk", "PolicyRevision"}},
		{reflect.TypeFor[record.Action](), []string{"Name", "Args"}},
		{reflect.TypeFor[record.Evidence](), []string{"Source", "Data"}},
	} {
		var got []string
		for f := range tc.typ.Fields() {
			got = append(got, f.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s has fields %v; key hashes %v", tc.typ, got, tc.want)
		}
	}
}

// TestPartsAreDelimited: moving bytes from one field to the next makes
// another key.
func TestPartsAreDelimited(t *testing.T) {
	a := policy.FingerprintInput{RunID: "run_1", Actions: []record.Action{{Name: "ab", Args: json.RawMessage(`{}`)}}}
	b := policy.FingerprintInput{RunID: "run_1a", Actions: []record.Action{{Name: "b", Args: json.RawMessage(`{}`)}}}
	c := policy.FingerprintInput{RunID: "run_1", Actions: []record.Action{{Name: "ab", Args: json.RawMessage(`{}`)}}, Evidence: []record.Evidence{}}
	d := policy.FingerprintInput{RunID: "run_1", Actions: []record.Action{{Name: "ab", Args: json.RawMessage(`{}`)}}, Risk: "x"}
	keys := map[[32]byte]string{}
	for name, in := range map[string]policy.FingerprintInput{"a": a, "b": b, "d": d} {
		k := key(in)
		if other, ok := keys[k]; ok {
			t.Errorf("%s and %s have one key", name, other)
		}
		keys[k] = name
	}
	if key(a) != key(c) {
		t.Error("no evidence and an empty list of it differ; policy.Fingerprint counts both as none")
	}
}

// TestTheOldestIsDropped: a memo never holds more than its size.
func TestTheOldestIsDropped(t *testing.T) {
	m := NewMemo(2)
	for _, id := range []string{"run_1", "run_2", "run_3", "run_2"} {
		st := proposal()
		st.RunID = id
		if _, err := m.Of(st, "high", "rev-1"); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.byKey) != 2 {
		t.Fatalf("%d remembered, want 2", len(m.byKey))
	}
	st := proposal()
	if _, ok := m.byKey[key(policy.FingerprintInput{RunID: st.RunID, Actions: st.Actions, Evidence: st.Evidence, Risk: "high", PolicyRevision: "rev-1"})]; ok {
		t.Error("run_1, the oldest, is still remembered")
	}
}

// TestBadArgumentsAreNotRemembered: an error is returned each time.
func TestBadArgumentsAreNotRemembered(t *testing.T) {
	m := NewMemo(2)
	st := proposal()
	st.Actions[0].Args = json.RawMessage(`{"amount":1,"amount":2}`)
	for range 2 {
		if _, err := m.Of(st, "high", "rev-1"); err == nil {
			t.Fatal("duplicate keys fingerprinted")
		}
	}
	if len(m.byKey) != 0 {
		t.Fatalf("%d remembered after errors", len(m.byKey))
	}
}

// BenchmarkOf: a proposal with 2 KB of evidence, as signoff bench's.
//
//	go test ./workflow/internal/fingerprint -run '^$' -bench Of
func BenchmarkOf(b *testing.B) {
	st := proposal()
	st.Evidence[0].Data = json.RawMessage(`{"note":"` + strings.Repeat("x", 2000) + `"}`)
	b.Run("computed", func(b *testing.B) {
		for b.Loop() {
			policy.Fingerprint(policy.FingerprintInput{RunID: st.RunID, Actions: st.Actions, Evidence: st.Evidence, Risk: "high", PolicyRevision: "rev-1"})
		}
	})
	b.Run("remembered", func(b *testing.B) {
		m := NewMemo(8)
		for b.Loop() {
			m.Of(st, "high", "rev-1")
		}
	})
}
