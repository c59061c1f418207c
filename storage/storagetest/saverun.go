package storagetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// testSaveRun: SaveRun stores a transition as InsertRun or UpdateRun,
// AppendCheckpoint and InsertRequest would, fails as the first of them would,
// and leaves the audit chain of the run appended to after it unbroken (a
// driver may read the run's audit head with the transition's statements).
func testSaveRun(t *testing.T, s workflow.Store) {
	run, req, events := saveTwoTransitions(t, s)
	t.Run("stored", func(t *testing.T) { checkSavedRun(t, s, run, req, events) })

	fails := saveRunRefusals(run, req)
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
			view(t, s, func(ctx context.Context, tx workflow.Tx) error {
				_, err := tx.Run(ctx, "run-save-2")
				wantErr(t, "the run of a refused write", err, workflow.ErrNotFound)
				return nil
			})
		})
	}

	// A caller that goes on after a refused SaveRun and returns nil commits
	// none of it: the driver may refuse the commit, or the refused write
	// left nothing behind.
	t.Run("commits nothing of a refused write", func(t *testing.T) {
		err := s.Update(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
			w := fails[0].w()
			if err := tx.SaveRun(ctx, w); !errors.Is(err, workflow.ErrConflict) {
				return fmt.Errorf("SaveRun: got %v, want ErrConflict", err)
			}
			return nil
		})
		if err != nil && !errors.Is(err, workflow.ErrConflict) {
			t.Fatalf("Update: %v", err)
		}
		b := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.RunBundle, error) {
			return tx.LoadRun(ctx, run.ID, workflow.RunParts{Checkpoints: true})
		})
		checkSame(t, "run", stored(run), b.Run)
		if len(b.Checkpoints) != 2 {
			t.Errorf("checkpoints = %d, want the two saved before", len(b.Checkpoints))
		}
	})
}

// saveTwoTransitions saves a run through two transitions, the first with
// its approval request, each followed by audit events, and returns the run,
// the request and the events as saved.
func saveTwoTransitions(t *testing.T, s workflow.Store) (*workflow.Run, *workflow.ApprovalRequest, []*workflow.AuditEvent) {
	t.Helper()
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
		// An event about another run in between leaves both chains whole.
		other := &workflow.AuditEvent{RunID: "run-other", Action: "refused", At: base}
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
	return run, req, events
}

// checkSavedRun checks that the run, its request, its checkpoints and every
// audit event are stored as saveTwoTransitions saved them.
func checkSavedRun(t *testing.T, s workflow.Store, run *workflow.Run, req *workflow.ApprovalRequest, events []*workflow.AuditEvent) {
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
	// Every event as appended, and the chains of both runs as stored.
	all := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.AuditEvent, error) {
		return tx.AuditEvents(ctx, workflow.AuditFilter{})
	})
	if len(all) != len(events) {
		t.Fatalf("audit = %d events, want %d", len(all), len(events))
	}
	for _, e := range events {
		i := slices.IndexFunc(all, func(a *workflow.AuditEvent) bool { return a.Seq == e.Seq })
		if i < 0 {
			t.Fatalf("the event %s of run %s (seq %d) is not stored", e.Action, e.RunID, e.Seq)
		}
		checkSame(t, "audit event", e, all[i])
	}
	checkChain(t, all)
	if last := events[len(events)-1]; b.AuditHead == nil || b.AuditHead.Hash != last.Hash {
		t.Errorf("audit head = %+v, want the last event's hash %s", b.AuditHead, last.Hash)
	}
}

// saveRunRefusal is a write SaveRun refuses after saveTwoTransitions, and
// the error it refuses it with.
type saveRunRefusal struct {
	name string
	w    func() *workflow.RunWrite
	want error
}

// saveRunRefusals are the writes SaveRun must refuse once run is saved
// (version 2, checkpoints 1 and 2) with its request req.
func saveRunRefusals(run *workflow.Run, req *workflow.ApprovalRequest) []saveRunRefusal {
	return []saveRunRefusal{
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
		{"an approval request id that exists", func() *workflow.RunWrite {
			r := &workflow.Run{ID: "run-save-2", Status: workflow.StatusWaitingApproval, Seq: 1}
			q := *req
			q.RunID, q.Version = r.ID, 0
			return &workflow.RunWrite{Run: r, Checkpoint: &workflow.Checkpoint{RunID: r.ID, Seq: 1, SchemaVersion: 2, Hash: "h1"}, Request: &q}
		}, workflow.ErrDuplicate},
		{"a checkpoint that exists", func() *workflow.RunWrite {
			r := *run
			return &workflow.RunWrite{Run: &r, Checkpoint: &workflow.Checkpoint{RunID: run.ID, Seq: 2, SchemaVersion: 2, Hash: "h3"}}
		}, workflow.ErrDuplicate},
	}
}
