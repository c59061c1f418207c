package chain_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
)

// TestResolveIsStrict: a checkpoint written against a base resolves
// only from a whole state of its run, earlier than itself, and only to a
// state that decodes strictly.
func TestResolveIsStrict(t *testing.T) {
	base := []byte(`{"schema_version":2,"run_id":"run-1","workflow":"proposal","status":"waiting_approval","step":0,"requester":{"id":"agent:resolver"},"summary":"refund","model_calls":0}`)
	withList := bytes.Replace(base, []byte(`"summary":"refund",`), []byte(`"summary":"refund","messages":[{"role":"user","content":"a"}],`), 1)
	cp := func(seq, baseSeq int64, state string) *record.Checkpoint {
		return &record.Checkpoint{RunID: "run-1", Seq: seq, SchemaVersion: 2, BaseSeq: baseSeq, State: []byte(state)}
	}
	tests := []struct {
		name    string
		cps     []*record.Checkpoint
		want    string // a whole state's summary and status, or the error
		problem string
	}{
		{"changes", []*record.Checkpoint{cp(1, 0, string(base)), cp(2, 1, `{"schema_version":2,"status":"done","reason":"ok"}`)}, "refund done ok", ""},
		{"unset", []*record.Checkpoint{cp(1, 0, string(base)), cp(2, 1, `{"schema_version":2,"$unset":["summary"]}`)}, " waiting_approval ", ""},
		{"unset twice", []*record.Checkpoint{cp(1, 0, string(base)), cp(2, 1, `{"schema_version":2,"$unset":["summary","summary"]}`)}, "", "twice"},
		{"unset missing", []*record.Checkpoint{cp(1, 0, string(base)), cp(2, 1, `{"schema_version":2,"$unset":["gate"]}`)}, "", "does not have"},
		{"set and unset", []*record.Checkpoint{cp(1, 0, string(base)), cp(2, 1, `{"schema_version":2,"summary":"x","$unset":["summary"]}`)}, "", "both set and unset"},
		{"unset not a list", []*record.Checkpoint{cp(1, 0, string(base)), cp(2, 1, `{"schema_version":2,"$unset":"summary"}`)}, "", "not a list"},
		{"duplicate key", []*record.Checkpoint{cp(1, 0, string(base)), cp(2, 1, `{"schema_version":2,"status":"done","status":"failed"}`)}, "", "duplicate"},
		{"trailing data", []*record.Checkpoint{cp(1, 0, string(base)), cp(2, 1, `{"schema_version":2}{}`)}, "", "trailing"},
		{"unknown field", []*record.Checkpoint{cp(1, 0, string(base)), cp(2, 1, `{"schema_version":2,"approved_by_magic":true}`)}, "", "unknown"},
		{"base of a later seq", []*record.Checkpoint{cp(1, 0, string(base)), cp(2, 2, `{"schema_version":2}`)}, "", "not an earlier checkpoint"},
		{"base with a base", []*record.Checkpoint{cp(1, 0, string(base)), cp(2, 1, `{"schema_version":2}`), cp(3, 2, `{"schema_version":2}`)}, "", "written against a base itself"},
		{"base pruned", []*record.Checkpoint{{RunID: "run-1", Seq: 1, SchemaVersion: 2, PrunedAt: time.Unix(1, 0)}, cp(2, 1, `{"schema_version":2}`)}, "", "lost its state"},
		{"base of another run", []*record.Checkpoint{{RunID: "run-2", Seq: 1, SchemaVersion: 2, State: base}, cp(2, 1, `{"schema_version":2}`)}, "", "missing"},
		{"appended", []*record.Checkpoint{cp(1, 0, string(withList)), cp(2, 1, `{"schema_version":2,"$append":{"messages":[{"role":"tool","content":"b"}]}}`)}, "refund waiting_approval 2", ""},
		{"appended to a list it sets", []*record.Checkpoint{cp(1, 0, string(withList)), cp(2, 1, `{"schema_version":2,"messages":[],"$append":{"messages":[{"role":"tool"}]}}`)}, "", "both set and appended"},
		{"appended to a list it unsets", []*record.Checkpoint{cp(1, 0, string(withList)), cp(2, 1, `{"schema_version":2,"$unset":["messages"],"$append":{"messages":[{"role":"tool"}]}}`)}, "", "both set and unset"},
		{"appended to what is not a list", []*record.Checkpoint{cp(1, 0, string(withList)), cp(2, 1, `{"schema_version":2,"$append":{"summary":[1]}}`)}, "", "as a list"},
		{"appended to a missing list", []*record.Checkpoint{cp(1, 0, string(base)), cp(2, 1, `{"schema_version":2,"$append":{"messages":[{"role":"tool"}]}}`)}, "", "as a list"},
		{"appended nothing", []*record.Checkpoint{cp(1, 0, string(withList)), cp(2, 1, `{"schema_version":2,"$append":{"messages":[]}}`)}, "", "not a list of elements"},
		{"appended no list", []*record.Checkpoint{cp(1, 0, string(withList)), cp(2, 1, `{"schema_version":2,"$append":{}}`)}, "", "not an object of lists"},
		{"appended an unknown field", []*record.Checkpoint{cp(1, 0, string(withList)), cp(2, 1, `{"schema_version":2,"$append":{"messages":[{"role":"tool","magic":1}]}}`)}, "", "unknown"},
		{"version 1 with a base", []*record.Checkpoint{cp(1, 0, string(base)), {RunID: "run-1", Seq: 2, SchemaVersion: 1, BaseSeq: 1, State: []byte(`{}`)}}, "", "schema version 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := chain.Resolve(tc.cps, len(tc.cps)-1)
			var st *record.State
			if err == nil {
				st, err = chain.Decode(b)
			}
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("got %v, want an error saying %q", err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := st.Summary + " " + string(st.Status) + " " + st.Reason
			if len(st.Messages) > 0 {
				got = st.Summary + " " + string(st.Status) + " " + fmt.Sprint(len(st.Messages))
			}
			if got != tc.want {
				t.Fatalf("resolved to %q, want %q", got, tc.want)
			}
		})
	}
}
