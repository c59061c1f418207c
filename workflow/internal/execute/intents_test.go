package execute

import (
	"strconv"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
)

// WithIntents shows an intent the state alone holds as the operation it
// stands for, in the order of the actions; a row of the same key wins, and
// a record that is no held intent adds nothing.
func TestWithIntents(t *testing.T) {
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	held := func(i int) record.OperationRecord {
		return record.OperationRecord{Key: OperationKey("run-1", i), Index: i, Action: "refund", Status: record.OpPending,
			Attempts: 1, Intended: &at, ArgsDigest: "digest"}
	}
	row := func(i int, s record.OpStatus) *record.Operation {
		return &record.Operation{Key: OperationKey("run-1", i), RunID: "run-1", Index: i, Action: "refund", Status: s, Attempts: 1, Version: 2}
	}
	committed := record.OperationRecord{Key: OperationKey("run-1", 0), Index: 0, Action: "refund", Status: record.OpCommitted, Attempts: 1}
	for _, tt := range []struct {
		name string
		rows []*record.Operation
		st   *record.State
		want []string // key:status:version
	}{
		{"no state", []*record.Operation{row(0, record.OpCommitted)}, nil, []string{"run-1/1:committed:2"}},
		{"no intent", []*record.Operation{row(0, record.OpCommitted)}, &record.State{Operations: []record.OperationRecord{committed}}, []string{"run-1/1:committed:2"}},
		{"an intent alone", nil, &record.State{Operations: []record.OperationRecord{held(0)}}, []string{"run-1/1:pending:0"}},
		{"the row wins", []*record.Operation{row(0, record.OpPending)}, &record.State{Operations: []record.OperationRecord{held(0)}}, []string{"run-1/1:pending:2"}},
		{"in the order of the actions", []*record.Operation{row(1, record.OpCommitted)},
			&record.State{Operations: []record.OperationRecord{held(0), {Key: OperationKey("run-1", 1), Index: 1, Status: record.OpCommitted}}},
			[]string{"run-1/1:pending:0", "run-1/2:committed:2"}},
		{"a pending record without its time is an older build's", nil,
			&record.State{Operations: []record.OperationRecord{{Key: OperationKey("run-1", 0), Index: 0, Status: record.OpPending, Attempts: 1}}}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := WithIntents(tt.rows, "run-1", tt.st)
			var keys []string
			for _, op := range got {
				keys = append(keys, op.Key+":"+string(op.Status)+":"+strconv.FormatInt(op.Version, 10))
			}
			if len(keys) != len(tt.want) {
				t.Fatalf("got %v, want %v", keys, tt.want)
			}
			for i := range keys {
				if keys[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", keys, tt.want)
				}
			}
		})
	}
	op := WithIntents(nil, "run-1", &record.State{Operations: []record.OperationRecord{held(0)}})[0]
	if op.RunID != "run-1" || op.Action != "refund" || op.ArgsDigest != "digest" || op.Attempts != 1 || !op.UpdatedAt.Equal(at) || !op.CreatedAt.Equal(at) {
		t.Fatalf("the intent's operation %+v", op)
	}
}
