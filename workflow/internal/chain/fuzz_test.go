package chain_test

import (
	"reflect"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
)

// FuzzDecode: stored state from a damaged file must be refused or decoded,
// never panic, and whatever decodes must survive a round trip unchanged.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"run_id":"r","workflow":"proposal","status":"running","step":0,"requester":{"id":"a"},"model_calls":0}`))
	f.Add([]byte(`{"schema_version":1,"run_id":"r","workflow":"proposal","status":"waiting_approval","step":0,"requester":{"id":"a"},"model_calls":0,"actions":[{"name":"x","args":{"a":1}}],"gate":{"rule":"r","risk":"high","policy_revision":"1","fingerprint":"f","approval":{"role":"lead","count":1,"expires_seconds":60,"self_approval":false,"edit":true}}}`))
	f.Add([]byte(`{"schema_version":1,"status":"running","status":"done"}`))
	f.Add([]byte(`{"schema_version":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := chain.Decode(b)
		if err != nil {
			return
		}
		enc, err := chain.Encode(st)
		if err != nil {
			t.Fatalf("decoded state does not encode: %v", err)
		}
		again, err := chain.Decode(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(normal(t, st), normal(t, again)) {
			t.Fatalf("round trip changed the state")
		}
	})
}

func normal(t *testing.T, st *record.State) string {
	b, err := chain.Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzResolve: the changes a damaged file holds against a base must be
// refused or resolved, never panic, and whatever resolves must decode
// strictly or be refused.
func FuzzResolve(f *testing.F) {
	base := []byte(`{"schema_version":2,"run_id":"r","workflow":"proposal","status":"running","step":0,"requester":{"id":"a"},"messages":[{"role":"user","content":"hi"}],"model_calls":0}`)
	f.Add([]byte(`{"schema_version":2,"status":"done"}`))
	f.Add([]byte(`{"schema_version":2,"$unset":["messages"]}`))
	f.Add([]byte(`{"schema_version":2,"$append":{"messages":[{"role":"tool"}]}}`))
	f.Add([]byte(`{"schema_version":2,"$append":{"messages":[]},"$unset":["step"]}`))
	f.Fuzz(func(t *testing.T, delta []byte) {
		cps := []*record.Checkpoint{
			{RunID: "r", Seq: 1, SchemaVersion: 2, State: base},
			{RunID: "r", Seq: 2, SchemaVersion: 2, State: delta, BaseSeq: 1},
		}
		b, err := chain.Resolve(cps, 1)
		if err != nil {
			return
		}
		_, _ = chain.Decode(b)
	})
}
