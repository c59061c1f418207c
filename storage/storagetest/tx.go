package storagetest

// Transactions: what a rollback, a panic, a cancelled context or a view does.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

var errBoom = errors.New("boom")

// writeEverything writes one of each record about run id, as a transition would.
func writeEverything(ctx context.Context, tx storage.Tx, id string) error {
	return errors.Join(
		tx.InsertRun(ctx, &record.Run{ID: id, Status: record.StatusRunning, IdempotencyKey: "key-" + id}),
		tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: id, Seq: 1, SchemaVersion: 1}),
		tx.InsertRequest(ctx, &record.ApprovalRequest{ID: "req-" + id, RunID: id, Status: record.RequestPending}),
		tx.InsertDecision(ctx, &record.Decision{RequestID: "req-" + id, RunID: id, ApproverID: "U1", Verdict: record.VerdictApprove}),
		tx.InsertOperation(ctx, &record.Operation{Key: "op-" + id, RunID: id, Status: record.OpPending}),
		tx.EnqueueOutbox(ctx, &record.OutboxMessage{RunID: id, Kind: "slack.post"}),
		tx.AppendAudit(ctx, &record.AuditEvent{RunID: id, Action: "start"}, nil),
	)
}

// checkNothingOf checks that no record about run id exists.
func checkNothingOf(t *testing.T, s storage.Store, id string) {
	t.Helper()
	view(t, s, func(ctx context.Context, tx storage.Tx) error {
		_, err := tx.Run(ctx, id)
		wantErr(t, "Run", err, storage.ErrNotFound)
		_, err = tx.RunByIdempotencyKey(ctx, "", "key-"+id)
		wantErr(t, "RunByIdempotencyKey", err, storage.ErrNotFound)
		_, err = tx.Request(ctx, "req-"+id)
		wantErr(t, "Request", err, storage.ErrNotFound)
		_, err = tx.Operation(ctx, "op-"+id)
		wantErr(t, "Operation", err, storage.ErrNotFound)
		counts := map[string]func() (int, error){
			"checkpoints": func() (int, error) { v, err := tx.Checkpoints(ctx, id); return len(v), err },
			"decisions":   func() (int, error) { v, err := tx.Decisions(ctx, id); return len(v), err },
			"outbox":      func() (int, error) { v, err := tx.DueOutbox(ctx, base.Add(time.Hour), 1000); return len(v), err },
			"audit":       func() (int, error) { v, err := tx.AuditEvents(ctx, storage.AuditFilter{}); return len(v), err },
		}
		for what, count := range counts {
			n, err := count()
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if n != 0 {
				t.Errorf("%s: %d left behind by a rolled-back transaction", what, n)
			}
		}
		return nil
	})
}

func testRollbackOnError(t *testing.T, s storage.Store) {
	t.Run("inserts", func(t *testing.T) {
		err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			if err := writeEverything(ctx, tx, "run-doomed"); err != nil {
				return fmt.Errorf("writing before the failure: %w", err)
			}
			return fmt.Errorf("the transition failed: %w", errBoom)
		})
		wantErr(t, "Update", err, errBoom)
		checkNothingOf(t, s, "run-doomed")
	})
	t.Run("updates", func(t *testing.T) {
		r := seedRun(t, s, "run-kept")
		before := stored(r)
		err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			c := *r
			c.Status, c.Step = record.StatusDone, 9
			if err := tx.UpdateRun(ctx, &c); err != nil {
				return err
			}
			return errBoom
		})
		wantErr(t, "Update", err, errBoom)
		got := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Run, error) { return tx.Run(ctx, "run-kept") })
		checkSame(t, "run after a rolled-back update", before, got)
	})
}

func testRollbackOnPanic(t *testing.T, s storage.Store) {
	recovered := func() (v any) {
		defer func() { v = recover() }()
		_ = s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			if err := writeEverything(ctx, tx, "run-panic"); err != nil {
				t.Errorf("writing before the panic: %v", err)
			}
			panic(errBoom)
		})
		return nil
	}()
	if recovered != errBoom {
		t.Errorf("Update swallowed or changed the panic: recovered %v, want %v", recovered, errBoom)
	}
	checkNothingOf(t, s, "run-panic")
	// The store is still usable: the panicking transaction released what it held.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return writeEverything(ctx, tx, "run-after") }); err != nil {
		t.Fatalf("update after a panic: %v", err)
	}
}

func testCancelledContext(t *testing.T, s storage.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return writeEverything(ctx, tx, "run-cancelled") })
	wantErr(t, "Update with a cancelled context", err, context.Canceled)
	checkNothingOf(t, s, "run-cancelled")

	// Cancelled half way: whatever fn wrote is not committed, even if fn goes on
	// to return nil.
	ctx, cancel = context.WithCancel(t.Context())
	err = s.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		if err := writeEverything(ctx, tx, "run-half"); err != nil {
			return err
		}
		cancel()
		return nil
	})
	wantErr(t, "Update cancelled inside fn", err, context.Canceled)
	checkNothingOf(t, s, "run-half")
}

// testTxUsableAfterDuplicate: a transaction may try an insert, learn that the key
// exists, and go on (submit with an idempotency key returns the first run).
func testTxUsableAfterDuplicate(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-first")
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		err := tx.InsertRun(ctx, &record.Run{ID: "run-first", Status: record.StatusRunning})
		if !errors.Is(err, storage.ErrDuplicate) {
			return fmt.Errorf("second insert: got %v, want ErrDuplicate", err)
		}
		if _, err := tx.Run(ctx, "run-first"); err != nil {
			return fmt.Errorf("read after ErrDuplicate: %w", err)
		}
		return tx.InsertRun(ctx, &record.Run{ID: "run-second", Status: record.StatusRunning, CreatedAt: base.Add(time.Second)})
	})
	got := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Run, error) {
		return tx.ListRuns(ctx, storage.RunFilter{})
	})
	if ids := runIDs(got); !slices.Equal(ids, []string{"run-first", "run-second"}) {
		t.Errorf("runs after the transaction = %v, want [run-first run-second]", ids)
	}
}

// testViewSnapshot: a View reads one snapshot, and an Update commits while the
// View is open instead of waiting for it.
func testViewSnapshot(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-1")
	view(t, s, func(ctx context.Context, tx storage.Tx) error {
		before, err := tx.Run(ctx, "run-1")
		if err != nil {
			return err
		}
		uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err = s.Update(uctx, func(ctx context.Context, tx storage.Tx) error {
			r, err := tx.Run(ctx, "run-1")
			if err != nil {
				return err
			}
			r.Step = 99
			return tx.UpdateRun(ctx, r)
		})
		if err != nil {
			t.Fatalf("update while a view is open: %v", err)
		}
		after, err := tx.Run(ctx, "run-1")
		if err != nil {
			return err
		}
		if after.Version != before.Version || after.Step != before.Step {
			t.Errorf("the view saw a commit made after its first read: version %d→%d, step %d→%d",
				before.Version, after.Version, before.Step, after.Step)
		}
		return nil
	})
	got := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Run, error) { return tx.Run(ctx, "run-1") })
	if got.Version != 2 || got.Step != 99 {
		t.Errorf("after the view: version %d step %d, want 2 and 99", got.Version, got.Step)
	}
}

func testViewIsReadOnly(t *testing.T, s storage.Store) {
	_ = s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		if err := tx.InsertRun(ctx, &record.Run{ID: "run-in-view", Status: record.StatusRunning}); err == nil {
			t.Error("InsertRun inside View succeeded; want an error")
		}
		return nil
	})
	err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error { _, err := tx.Run(ctx, "run-in-view"); return err })
	wantErr(t, "run written in a View", err, storage.ErrNotFound)
}

// --- concurrency
