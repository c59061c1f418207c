package storagetest

import (
	"context"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// testSaveRun: SaveRun stores a transition as InsertRun or UpdateRun,
// AppendCheckpoint and InsertRequest would, fails as the first of them would,
// and leaves the audit chain of the run appended to after it unbroken (a
// driver may read the run's audit head with the transition's statements).
func testSaveRun(t *testing.T, s workflow.Store) {
	run := &workflow.Run{ID: "run-save", Workflow: "proposal", Status: workflow.StatusWaitingApproval, Seq: 1,
		IdempotencyKey: "key-save", CreatedAt: base, UpdatedAt: base}
	req := &workflow.ApprovalRequest{ID: "req-save", RunID: run.ID, Role: "lead", Count: 1, Status: workflow.RequestPending, CreatedAt: base}
	var events []*workflow.AuditEvent
	audit := func(ctx context.Context, tx workflow.Tx, action workflow.Event) error {
		e := &workflow.AuditEvent{RunID: run.ID, Actor: "tester", Action: action, At: base}
		if err := tx.AppendAudit(ctx, e, nil); err != nil {
			return err
		}
		events = append(events, e)
		return nil
	}
	update(t, s, func(ctx context.Context, tx workflow.Tx) error {
		cp := &workflow.Checkpoint{RunID: run.ID, Seq: 1, SchemaVersion: 2, State: []byte(`{"a":1}`), Hash: "h1", CreatedAt: base}
		if err := tx.SaveRun(ctx, &workflow.RunWrite{Run: run, Checkpoint: cp, Request: req}); err != nil {
			return err
		}
		return audit(ctx, tx, "submitted")
	})
	if run.Version != 1 || req.Version != 1 {
		t.Fatalf("after the first transition: run version %d, request version %d, want 1 and 1", run.Version, req.Version)
	}
	// The second transition appends two events, as the last receipt does.
	update(t, s, func(ctx context.Context, tx workflow.Tx) error {
		run.Status, run.Seq, run.UpdatedAt = workflow.StatusDone, 2, base.Add(time.Second)
		cp := &workflow.Checkpoint{RunID: run.ID, Seq: 2, SchemaVersion: 2, State: []byte(`{"a":2}`), PrevHash: "h1", Hash: "h2", BaseSeq: 1, CreatedAt: base}
		if err := tx.SaveRun(ctx, &workflow.RunWrite{Run: run, Checkpoint: cp}); err != nil {
			return err
		}
		if err := audit(ctx, tx, "executed"); err != nil {
			return err
		}
		return audit(ctx, tx, "finished")
	})
	if run.Version != 2 {
		t.Fatalf("after the second transition: run version %d, want 2", run.Version)
	}
	t.Run("stored", func(t *testing.T) {
		b := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.RunBundle, error) {
			return tx.LoadRun(ctx, run.ID, workflow.RunParts{Checkpoints: true, Requests: true, Audit: true})
		})
		checkSame(t, "run", stored(run), b.Run)
		if len(b.Checkpoints) != 2 || b.Checkpoints[1].Hash != "h2" || b.Checkpoints[1].BaseSeq != 1 {
			t.Errorf("checkpoints = %+v, want seq 1 and 2", b.Checkpoints)
		}
		if len(b.Requests) != 1 {
			t.Fatalf("requests = %+v, want the one saved", b.Requests)
		}
		checkSame(t, "request", stored(req), b.Requests[0])
		if len(b.Audit) != 3 {
			t.Fatalf("audit = %d events, want 3", len(b.Audit))
		}
		checkChain(t, b.Audit)
		checkChain(t, events)
		if b.AuditHead == nil || b.AuditHead.Hash != events[2].Hash {
			t.Errorf("audit head = %+v, want the last event's hash %s", b.AuditHead, events[2].Hash)
		}
	})

	fails := []struct {
		name string
		w    func() *workflow.RunWrite
		want error
	}{
		{"a stale version", func() *workflow.RunWrite {
			r := *run
			r.Version, r.Seq = 1, 3
			return &workflow.RunWrite{Run: &r, Checkpoint: &workflow.Checkpoint{RunID: run.ID, Seq: 3, SchemaVersion: 2, Hash: "h3"}}
		}, workflow.ErrConflict},
		{"an unknown run", func() *workflow.RunWrite {
			r := *run
			r.ID = "run-nope"
			return &workflow.RunWrite{Run: &r, Checkpoint: &workflow.Checkpoint{RunID: "run-nope", Seq: 3, SchemaVersion: 2, Hash: "h3"}}
		}, workflow.ErrNotFound},
		{"a run id that exists", func() *workflow.RunWrite {
			r := *run
			r.Version, r.IdempotencyKey = 0, ""
			return &workflow.RunWrite{Run: &r, Checkpoint: &workflow.Checkpoint{RunID: run.ID, Seq: 3, SchemaVersion: 2, Hash: "h3"}}
		}, workflow.ErrDuplicate},
		{"a checkpoint that exists", func() *workflow.RunWrite {
			r := *run
			return &workflow.RunWrite{Run: &r, Checkpoint: &workflow.Checkpoint{RunID: run.ID, Seq: 2, SchemaVersion: 2, Hash: "h3"}}
		}, workflow.ErrDuplicate},
	}
	for _, f := range fails {
		t.Run("refuses "+f.name, func(t *testing.T) {
			err := s.Update(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
				return tx.SaveRun(ctx, f.w())
			})
			wantErr(t, "SaveRun", err, f.want)
			b := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.RunBundle, error) {
				return tx.LoadRun(ctx, run.ID, workflow.RunParts{Checkpoints: true})
			})
			checkSame(t, "run after the refused write", stored(run), b.Run)
			if len(b.Checkpoints) != 2 || b.Checkpoints[1].Hash != "h2" {
				t.Errorf("checkpoints after the refused write = %+v, want the two saved", b.Checkpoints)
			}
		})
	}
}
