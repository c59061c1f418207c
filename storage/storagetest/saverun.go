package storagetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// testSaveRun: SaveRun stores a transition as InsertRun or UpdateRun,
// AppendCheckpoint and InsertRequest would, fails as the first of them would,
// and leaves the audit chain of the run appended to after it unbroken (a
// driver may read the run's audit head with the transition's statements).
func testSaveRun(t *testing.T, s storage.Store) {
	run := &record.Run{ID: "run-save", Workflow: "proposal", Status: record.StatusWaitingApproval, Seq: 1,
		IdempotencyKey: "key-save", CreatedAt: base, UpdatedAt: base}
	req := &record.ApprovalRequest{ID: "req-save", RunID: run.ID, Role: "lead", Count: 1, Status: record.RequestPending, CreatedAt: base}
	var events []*record.AuditEvent
	audit := func(ctx context.Context, tx storage.Tx, action record.Event) error {
		e := &record.AuditEvent{RunID: run.ID, Actor: "tester", Action: action, At: base}
		if err := tx.AppendAudit(ctx, e, nil); err != nil {
			return err
		}
		events = append(events, e)
		return nil
	}
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		cp := &record.Checkpoint{RunID: run.ID, Seq: 1, SchemaVersion: 2, State: []byte(`{"a":1}`), Hash: "h1", CreatedAt: base}
		if err := tx.SaveRun(ctx, &storage.RunWrite{Run: run, Checkpoint: cp, Request: req}); err != nil {
			return err
		}
		return audit(ctx, tx, "submitted")
	})
	if run.Version != 1 || req.Version != 1 {
		t.Fatalf("after the first transition: run version %d, request version %d, want 1 and 1", run.Version, req.Version)
	}
	// The second transition appends two events, as the last receipt does.
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		run.Status, run.Seq, run.UpdatedAt = record.StatusDone, 2, base.Add(time.Second)
		cp := &record.Checkpoint{RunID: run.ID, Seq: 2, SchemaVersion: 2, State: []byte(`{"a":2}`), PrevHash: "h1", Hash: "h2", BaseSeq: 1, CreatedAt: base}
		if err := tx.SaveRun(ctx, &storage.RunWrite{Run: run, Checkpoint: cp}); err != nil {
			return err
		}
		// An event about another run in between leaves both chains whole.
		other := &record.AuditEvent{RunID: "run-other", Action: "refused", At: base}
		if err := tx.AppendAudit(ctx, other, nil); err != nil {
			return err
		}
		events = append(events, other)
		if err := audit(ctx, tx, "executed"); err != nil {
			return err
		}
		return audit(ctx, tx, "finished")
	})
	if run.Version != 2 {
		t.Fatalf("after the second transition: run version %d, want 2", run.Version)
	}
	t.Run("stored", func(t *testing.T) {
		b := load(t, s, func(ctx context.Context, tx storage.Tx) (*storage.RunBundle, error) {
			return tx.LoadRun(ctx, run.ID, storage.RunParts{Checkpoints: true, Requests: true, Audit: true})
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
		// Every event as appended, and the chains of both runs as stored.
		all := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.AuditEvent, error) {
			return tx.AuditEvents(ctx, storage.AuditFilter{})
		})
		if len(all) != len(events) {
			t.Fatalf("audit = %d events, want %d", len(all), len(events))
		}
		for _, e := range events {
			i := slices.IndexFunc(all, func(a *record.AuditEvent) bool { return a.Seq == e.Seq })
			if i < 0 {
				t.Fatalf("the event %s of run %s (seq %d) is not stored", e.Action, e.RunID, e.Seq)
			}
			checkSame(t, "audit event", e, all[i])
		}
		checkChain(t, all)
		if last := events[len(events)-1]; b.AuditHead == nil || b.AuditHead.Hash != last.Hash {
			t.Errorf("audit head = %+v, want the last event's hash %s", b.AuditHead, last.Hash)
		}
	})

	fails := []struct {
		name string
		w    func() *storage.RunWrite
		want error
	}{
		{"a stale version", func() *storage.RunWrite {
			r := *run
			r.Version, r.Seq = 1, 3
			return &storage.RunWrite{Run: &r, Checkpoint: &record.Checkpoint{RunID: run.ID, Seq: 3, SchemaVersion: 2, Hash: "h3"}}
		}, storage.ErrConflict},
		{"an unknown run", func() *storage.RunWrite {
			r := *run
			r.ID = "run-nope"
			return &storage.RunWrite{Run: &r, Checkpoint: &record.Checkpoint{RunID: "run-nope", Seq: 3, SchemaVersion: 2, Hash: "h3"}}
		}, storage.ErrNotFound},
		{"a run id that exists", func() *storage.RunWrite {
			r := *run
			r.Version, r.IdempotencyKey = 0, ""
			return &storage.RunWrite{Run: &r, Checkpoint: &record.Checkpoint{RunID: run.ID, Seq: 3, SchemaVersion: 2, Hash: "h3"}}
		}, storage.ErrDuplicate},
		{"an approval request id that exists", func() *storage.RunWrite {
			r := &record.Run{ID: "run-save-2", Status: record.StatusWaitingApproval, Seq: 1}
			q := *req
			q.RunID, q.Version = r.ID, 0
			return &storage.RunWrite{Run: r, Checkpoint: &record.Checkpoint{RunID: r.ID, Seq: 1, SchemaVersion: 2, Hash: "h1"}, Request: &q}
		}, storage.ErrDuplicate},
		{"a checkpoint that exists", func() *storage.RunWrite {
			r := *run
			return &storage.RunWrite{Run: &r, Checkpoint: &record.Checkpoint{RunID: run.ID, Seq: 2, SchemaVersion: 2, Hash: "h3"}}
		}, storage.ErrDuplicate},
	}
	for _, f := range fails {
		t.Run("refuses "+f.name, func(t *testing.T) {
			err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				return tx.SaveRun(ctx, f.w())
			})
			wantErr(t, "SaveRun", err, f.want)
			b := load(t, s, func(ctx context.Context, tx storage.Tx) (*storage.RunBundle, error) {
				return tx.LoadRun(ctx, run.ID, storage.RunParts{Checkpoints: true})
			})
			checkSame(t, "run after the refused write", stored(run), b.Run)
			if len(b.Checkpoints) != 2 || b.Checkpoints[1].Hash != "h2" {
				t.Errorf("checkpoints after the refused write = %+v, want the two saved", b.Checkpoints)
			}
			view(t, s, func(ctx context.Context, tx storage.Tx) error {
				_, err := tx.Run(ctx, "run-save-2")
				wantErr(t, "the run of a refused write", err, storage.ErrNotFound)
				return nil
			})
		})
	}

	// A caller that goes on after a refused SaveRun and returns nil commits
	// none of it: the driver may refuse the commit, or the refused write
	// left nothing behind.
	t.Run("commits nothing of a refused write", func(t *testing.T) {
		err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			w := fails[0].w()
			if err := tx.SaveRun(ctx, w); !errors.Is(err, storage.ErrConflict) {
				return fmt.Errorf("SaveRun: got %v, want ErrConflict", err)
			}
			return nil
		})
		if err != nil && !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("Update: %v", err)
		}
		b := load(t, s, func(ctx context.Context, tx storage.Tx) (*storage.RunBundle, error) {
			return tx.LoadRun(ctx, run.ID, storage.RunParts{Checkpoints: true})
		})
		checkSame(t, "run", stored(run), b.Run)
		if len(b.Checkpoints) != 2 {
			t.Errorf("checkpoints = %d, want the two saved before", len(b.Checkpoints))
		}
	})
}
