package storagetest

import (
	"context"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// testSaveRunAlongside: the records a transition carries beside its run
// (RunWrite's Decided, Decision and Operation) are stored as UpdateRequest,
// InsertDecision and InsertOperation or UpdateOperation store them, with
// their versions and the decision's id set; one that its own method would
// refuse refuses the whole write with the same sentinel, and none of it is
// stored.
func testSaveRunAlongside(t *testing.T, s storage.Store) {
	run := &record.Run{ID: "run-along", Workflow: "proposal", Status: record.StatusWaitingApproval, Seq: 1, CreatedAt: base, UpdatedAt: base}
	req := &record.ApprovalRequest{ID: "req-along", RunID: run.ID, Role: "lead", Count: 1, Status: record.RequestPending, CreatedAt: base}
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		return tx.SaveRun(ctx, &storage.RunWrite{Run: run, Checkpoint: alongCheckpoint(run), Request: req})
	})
	// A decision: the request decided, the decision, and the intent.
	d := &record.Decision{RequestID: req.ID, RunID: run.ID, ApproverID: "U1", Role: "lead", Verdict: record.VerdictApprove, Via: "slack", At: base}
	op := &record.Operation{Key: run.ID + "/1", RunID: run.ID, Action: "refund", ArgsDigest: "d1", Status: record.OpPending, Attempts: 1, CreatedAt: base, UpdatedAt: base}
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		req.Status, req.DecidedBy, req.DecidedAt = record.RequestApproved, "U1", base
		run.Status, run.Seq = record.StatusExecuting, 2
		return tx.SaveRun(ctx, &storage.RunWrite{Run: run, Checkpoint: alongCheckpoint(run), Decided: req, Decision: d, Operation: op})
	})
	if req.Version != 2 || d.ID == 0 || op.Version != 1 {
		t.Fatalf("after the write: request version %d, decision id %d, operation version %d; want 2, an id, 1", req.Version, d.ID, op.Version)
	}
	// The receipt: the operation moves on with the run.
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		op.Status, op.Receipt, op.UpdatedAt = record.OpCommitted, []byte(`{"id":"RF-1"}`), base.Add(time.Second)
		run.Status, run.Seq = record.StatusDone, 3
		return tx.SaveRun(ctx, &storage.RunWrite{Run: run, Checkpoint: alongCheckpoint(run), Operation: op})
	})
	if op.Version != 2 {
		t.Fatalf("after the receipt: operation version %d, want 2", op.Version)
	}
	checkAlongside(t, s, run, req, d, op)

	for _, f := range alongsideRefusals(run, req, d, op) {
		t.Run("refuses "+f.name, func(t *testing.T) {
			err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				return tx.SaveRun(ctx, f.w())
			})
			wantErr(t, "SaveRun", err, f.want)
			checkAlongside(t, s, run, req, d, op)
		})
	}
}

// alongCheckpoint is the checkpoint of run's seq.
func alongCheckpoint(run *record.Run) *record.Checkpoint {
	return &record.Checkpoint{RunID: run.ID, Seq: run.Seq, SchemaVersion: 2, State: []byte(`{}`), Hash: "h", CreatedAt: base}
}

// checkAlongside checks that the run, its request, its one decision and its
// one operation are stored as saved, and its checkpoints end at its seq.
func checkAlongside(t *testing.T, s storage.Store, run *record.Run, req *record.ApprovalRequest, d *record.Decision, op *record.Operation) {
	t.Helper()
	b := load(t, s, func(ctx context.Context, tx storage.Tx) (*storage.RunBundle, error) {
		return tx.LoadRun(ctx, run.ID, storage.RunParts{Checkpoints: true, Requests: true, Decisions: true, Operations: true})
	})
	checkSame(t, "run", stored(run), b.Run)
	if len(b.Checkpoints) != int(run.Seq) {
		t.Errorf("checkpoints = %d, want %d", len(b.Checkpoints), run.Seq)
	}
	if len(b.Requests) != 1 || len(b.Decisions) != 1 || len(b.Operations) != 1 {
		t.Fatalf("requests %d, decisions %d, operations %d; want one each", len(b.Requests), len(b.Decisions), len(b.Operations))
	}
	checkSame(t, "request", stored(req), b.Requests[0])
	checkSame(t, "decision", stored(d), b.Decisions[0])
	checkSame(t, "operation", stored(op), b.Operations[0])
}

// alongsideRefusals are writes of the run's next transition that carry a
// record its own method would refuse.
func alongsideRefusals(run *record.Run, req *record.ApprovalRequest, d *record.Decision, op *record.Operation) []saveRunRefusal {
	next := func() (*record.Run, *record.Checkpoint) {
		r := *run
		r.Seq++
		return &r, alongCheckpoint(&r)
	}
	return []saveRunRefusal{
		{"a decided request of a stale version", func() *storage.RunWrite {
			r, c := next()
			q := *req
			q.Version--
			return &storage.RunWrite{Run: r, Checkpoint: c, Decided: &q}
		}, storage.ErrConflict},
		{"a decided request that does not exist", func() *storage.RunWrite {
			r, c := next()
			q := *req
			q.ID = "req-nope"
			return &storage.RunWrite{Run: r, Checkpoint: c, Decided: &q}
		}, storage.ErrNotFound},
		{"a second decision of the approver", func() *storage.RunWrite {
			r, c := next()
			again := *d
			again.ID = 0
			return &storage.RunWrite{Run: r, Checkpoint: c, Decision: &again}
		}, storage.ErrDuplicate},
		{"an intent whose key exists", func() *storage.RunWrite {
			r, c := next()
			o := *op
			o.Version = 0
			return &storage.RunWrite{Run: r, Checkpoint: c, Operation: &o}
		}, storage.ErrDuplicate},
		{"an operation of a stale version", func() *storage.RunWrite {
			r, c := next()
			o := *op
			o.Version--
			return &storage.RunWrite{Run: r, Checkpoint: c, Operation: &o}
		}, storage.ErrConflict},
	}
}
