package execute

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
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

// opTx is a transaction whose operation writes answer err.
type opTx struct {
	storage.Tx
	err              error
	inserts, updates int
}

func (t *opTx) InsertOperation(context.Context, *record.Operation) error { t.inserts++; return t.err }
func (t *opTx) UpdateOperation(context.Context, *record.Operation) error { t.updates++; return t.err }

// WriteOperation inserts a held intent's row and moves a row on; a row
// another wrote first is a conflict, as a moved-on version is.
func TestWriteOperation(t *testing.T) {
	for _, tt := range []struct {
		name             string
		version          int64
		err              error
		inserts, updates int
		conflict         bool
	}{
		{"an intent's first row", 0, nil, 1, 0, false},
		{"a row moved on", 3, nil, 0, 1, false},
		{"a row another inserted first", 0, storage.ErrDuplicate, 1, 0, true},
		{"a row another moved on", 3, storage.ErrConflict, 0, 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tx := &opTx{err: tt.err}
			err := WriteOperation(t.Context(), tx, &record.Operation{Key: "run-1/1", Version: tt.version})
			if tx.inserts != tt.inserts || tx.updates != tt.updates {
				t.Fatalf("%d inserts, %d updates; want %d, %d", tx.inserts, tx.updates, tt.inserts, tt.updates)
			}
			if got := errors.Is(err, storage.ErrConflict); got != tt.conflict || (err != nil) != (tt.err != nil) {
				t.Fatalf("error %v: conflict %v, want %v", err, got, tt.conflict)
			}
		})
	}
}
