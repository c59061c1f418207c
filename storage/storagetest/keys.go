package storagetest

import (
	"context"
	"errors"
	"testing"
	"time"
)

// BeforeRequesterKeys is what a store at migration 9, when an idempotency key
// was unique across all runs, holds for CheckRequesterKeysMigrated: a keyed
// run with a checkpoint and a message location, another requester's keyed
// run, and a run without a key. Both drivers run these statements as they are.
var BeforeRequesterKeys = []string{
	`INSERT INTO runs (id, workflow, task_id, status, step, seq, version, requester_id, idempotency_key, fingerprint, reason,
		deadline, parent_id, parent_seq, lease_owner, lease_until, fence, created_at, updated_at, pruned_at, callback_url)
		VALUES ('run-1', 'proposal', 'T-1', 'waiting_approval', 2, 3, 4, 'agent:a', 'ticket-1', 'fp-1', 'waiting',
		5000, 'run-parent', 1, 'replica-1', 6000, 7, 1000, 2000, 0, 'https://agents.example/cb')`,
	`INSERT INTO runs (id, status, version, requester_id, idempotency_key, created_at) VALUES ('run-2', 'done', 1, 'agent:b', 'ticket-2', 1001)`,
	`INSERT INTO runs (id, status, version, requester_id, created_at) VALUES ('run-3', 'done', 1, 'agent:a', 1002)`,
	`INSERT INTO checkpoints (run_id, seq, schema_version, hash) VALUES ('run-1', 1, 1, 'h1')`,
	`INSERT INTO approval_requests (id, run_id, status, version, created_at) VALUES ('req-1', 'run-1', 'pending', 1, 1000)`,
	`INSERT INTO message_locations (request_id, run_id, channel, message_ts, posted_at) VALUES ('req-1', 'run-1', 'C0APPROVALS', '1732872000.000100', 1000)`,
}

// CheckRequesterKeysMigrated checks s, migrated from BeforeRequesterKeys: every
// run and every record that refers to one is as it was, each key is found by
// its own requester, another requester may now use a taken key for a run of
// its own, the same requester still may not, and a record of a run that does
// not exist is still refused.
func CheckRequesterKeysMigrated(t *testing.T, s storage.Store) {
	t.Helper()
	view(t, s, func(ctx context.Context, tx storage.Tx) error {
		r, err := tx.RunByIdempotencyKey(ctx, "agent:a", "ticket-1")
		if err != nil {
			t.Fatalf("agent:a's key ticket-1: %v", err)
		}
		want := record.Run{ID: "run-1", Workflow: "proposal", TaskID: "T-1", Status: record.StatusWaitingApproval, Step: 2, Seq: 3,
			Version: 4, RequesterID: "agent:a", IdempotencyKey: "ticket-1", Fingerprint: "fp-1", Reason: "waiting",
			Deadline: time.UnixMilli(5000).UTC(), ParentID: "run-parent", ParentSeq: 1, LeaseOwner: "replica-1", LeaseUntil: time.UnixMilli(6000).UTC(),
			Fence: 7, CreatedAt: time.UnixMilli(1000).UTC(), UpdatedAt: time.UnixMilli(2000).UTC(), CallbackURL: "https://agents.example/cb"}
		checkSame(t, "run-1 after the migration", &want, r)
		if r, err := tx.RunByIdempotencyKey(ctx, "agent:b", "ticket-2"); err != nil || r.ID != "run-2" {
			t.Errorf("agent:b's key ticket-2 names %+v (%v), want run-2", r, err)
		}
		if r, err := tx.Run(ctx, "run-3"); err != nil || r.IdempotencyKey != "" {
			t.Errorf("run-3 without a key is %+v (%v)", r, err)
		}
		if cps, err := tx.Checkpoints(ctx, "run-1"); err != nil || len(cps) != 1 || cps[0].Hash != "h1" {
			t.Errorf("run-1's checkpoints are %+v (%v), want the one stored before", cps, err)
		}
		if locs, err := tx.MessageLocations(ctx, "run-1"); err != nil || len(locs) != 1 || locs[0].RequestID != "req-1" {
			t.Errorf("run-1's message locations are %+v (%v), want the one stored before", locs, err)
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		return tx.InsertRun(ctx, &record.Run{ID: "run-4", Status: record.StatusRunning, RequesterID: "agent:b", IdempotencyKey: "ticket-1"})
	})
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.InsertRun(ctx, &record.Run{ID: "run-5", Status: record.StatusRunning, RequesterID: "agent:a", IdempotencyKey: "ticket-1"})
	}); !errors.Is(err, storage.ErrDuplicate) {
		t.Errorf("agent:a's second run under its key ticket-1: %v, want ErrDuplicate", err)
	}
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: "run-missing", Seq: 1, SchemaVersion: 1})
	}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a checkpoint of a run that does not exist: %v, want ErrNotFound (foreign keys hold)", err)
	}
}
