package workflow_test

import (
	"reflect"
	"testing"

	"github.com/signoff-dev/signoff/workflow"
)

// FuzzDecodeState: stored state from a damaged file must be refused or decoded,
// never panic, and whatever decodes must survive a round trip unchanged.
func FuzzDecodeState(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"run_id":"r","workflow":"proposal","status":"running","step":0,"requester":{"id":"a"},"model_calls":0}`))
	f.Add([]byte(`{"schema_version":1,"run_id":"r","workflow":"proposal","status":"waiting_approval","step":0,"requester":{"id":"a"},"model_calls":0,"actions":[{"name":"x","args":{"a":1}}],"gate":{"rule":"r","risk":"high","policy_revision":"1","fingerprint":"f","approval":{"role":"lead","count":1,"expires_seconds":60,"self_approval":false,"edit":true}}}`))
	f.Add([]byte(`{"schema_version":1,"status":"running","status":"done"}`))
	f.Add([]byte(`{"schema_version":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := workflow.DecodeState(b)
		if err != nil {
			return
		}
		enc, err := workflow.EncodeState(st)
		if err != nil {
			t.Fatalf("decoded state does not encode: %v", err)
		}
		again, err := workflow.DecodeState(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(normal(t, st), normal(t, again)) {
			t.Fatalf("round trip changed the state")
		}
	})
}

func normal(t *testing.T, st *record.State) string {
	b, err := workflow.EncodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzParseProposal: any input is either a proposal or a refusal, never a panic.
func FuzzParseProposal(f *testing.F) {
	f.Add([]byte(`{"requester":{"id":"a"},"actions":[{"name":"request_refund","args":{"amount":1}}]}`))
	f.Add([]byte(`{"requester":{"id":"a"},"requester":{"id":"b"}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := workflow.ParseProposal(b)
		if err != nil {
			if !record.IsRefused(err, record.CodeInvalidInput) {
				t.Fatalf("a bad proposal must be refused as invalid input, got %v", err)
			}
			return
		}
		if p == nil {
			t.Fatal("nil proposal without an error")
		}
	})
}

// FuzzCanonical: canonical JSON is a fixed point and refuses what it cannot order.
func FuzzCanonical(f *testing.F) {
	f.Add([]byte(`{"b":1,"a":[1.0,2e3,"x"]}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := jsonvalue.Canonical(b)
		if err != nil {
			return
		}
		c2, err := jsonvalue.Canonical(c)
		if err != nil || string(c2) != string(c) {
			t.Fatalf("canonical form is not stable: %q → %q (%v)", c, c2, err)
		}
	})
}

// FuzzResolveState: the changes a damaged file holds against a base must
// be refused or resolved, never panic, and whatever resolves must decode
// strictly or be refused.
func FuzzResolveState(f *testing.F) {
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
		b, err := workflow.ResolveState(cps, 1)
		if err != nil {
			return
		}
		_, _ = workflow.DecodeState(b)
	})
}
