package storagetest

// The shared sentinels: a duplicate, a missing record, and compare-and-set on every record that has a version.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func testDuplicate(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-seed")
	seedRequest(t, s, "run-seed", "req-seed")
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		return errors.Join(
			tx.InsertRun(ctx, &record.Run{ID: "run-keyed", Status: record.StatusRunning, RequesterID: "agent:a", IdempotencyKey: "key-1", Workflow: "first"}),
			tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: "run-seed", Seq: 1, SchemaVersion: 1, State: []byte(`"first"`)}),
			tx.InsertDecision(ctx, &record.Decision{RequestID: "req-seed", RunID: "run-seed", ApproverID: "U1",
				Verdict: record.VerdictApprove, Reason: "first"}),
			tx.InsertOperation(ctx, &record.Operation{Key: "op-1", RunID: "run-seed", Status: record.OpPending, Action: "first"}),
		)
	})
	cases := []struct {
		name string
		dup  txFunc
		// unchanged checks that the first record is intact and the second left no trace.
		unchanged txFunc
	}{
		{"run id",
			func(ctx context.Context, tx storage.Tx) error {
				return tx.InsertRun(ctx, &record.Run{ID: "run-keyed", Status: record.StatusDone, RequesterID: "agent:a", IdempotencyKey: "key-2", Workflow: "second"})
			},
			func(ctx context.Context, tx storage.Tx) error {
				r, err := tx.Run(ctx, "run-keyed")
				if err != nil {
					return err
				}
				if r.Workflow != "first" || r.IdempotencyKey != "key-1" {
					return fmt.Errorf("run-keyed is now %+v", r)
				}
				if _, err := tx.RunByIdempotencyKey(ctx, "agent:a", "key-2"); !errors.Is(err, storage.ErrNotFound) {
					return fmt.Errorf("key-2 of the refused run: got %v, want ErrNotFound", err)
				}
				return nil
			}},
		{"idempotency key of the same requester",
			func(ctx context.Context, tx storage.Tx) error {
				return tx.InsertRun(ctx, &record.Run{ID: "run-other", Status: record.StatusRunning, RequesterID: "agent:a", IdempotencyKey: "key-1"})
			},
			func(ctx context.Context, tx storage.Tx) error {
				r, err := tx.RunByIdempotencyKey(ctx, "agent:a", "key-1")
				if err != nil {
					return err
				}
				if r.ID != "run-keyed" {
					return fmt.Errorf("key-1 now names %s", r.ID)
				}
				if _, err := tx.Run(ctx, "run-other"); !errors.Is(err, storage.ErrNotFound) {
					return fmt.Errorf("refused run-other: got %v, want ErrNotFound", err)
				}
				return nil
			}},
		{"checkpoint seq",
			func(ctx context.Context, tx storage.Tx) error {
				return tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: "run-seed", Seq: 1, SchemaVersion: 1, State: []byte(`"second"`)})
			},
			func(ctx context.Context, tx storage.Tx) error {
				cs, err := tx.Checkpoints(ctx, "run-seed")
				if err != nil {
					return err
				}
				if len(cs) != 1 || string(cs[0].State) != `"first"` {
					return fmt.Errorf("checkpoints are now %d, want the first one only", len(cs))
				}
				return nil
			}},
		{"approval request id",
			func(ctx context.Context, tx storage.Tx) error {
				return tx.InsertRequest(ctx, &record.ApprovalRequest{ID: "req-seed", RunID: "run-seed", Status: record.RequestRejected})
			},
			func(ctx context.Context, tx storage.Tx) error {
				r, err := tx.Request(ctx, "req-seed")
				if err != nil {
					return err
				}
				if r.Status != record.RequestPending {
					return fmt.Errorf("req-seed is now %s", r.Status)
				}
				return nil
			}},
		{"decision per approver",
			func(ctx context.Context, tx storage.Tx) error {
				return tx.InsertDecision(ctx, &record.Decision{RequestID: "req-seed", RunID: "run-seed", ApproverID: "U1",
					Verdict: record.VerdictReject, Reason: "second"})
			},
			func(ctx context.Context, tx storage.Tx) error {
				ds, err := tx.Decisions(ctx, "run-seed")
				if err != nil {
					return err
				}
				if len(ds) != 1 || ds[0].Reason != "first" {
					return fmt.Errorf("decisions are now %d, want the first one only", len(ds))
				}
				return nil
			}},
		{"operation key",
			func(ctx context.Context, tx storage.Tx) error {
				return tx.InsertOperation(ctx, &record.Operation{Key: "op-1", RunID: "run-seed", Status: record.OpCommitted, Action: "second"})
			},
			func(ctx context.Context, tx storage.Tx) error {
				op, err := tx.Operation(ctx, "op-1")
				if err != nil {
					return err
				}
				if op.Action != "first" || op.Status != record.OpPending {
					return fmt.Errorf("op-1 is now %+v", op)
				}
				return nil
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Update(t.Context(), tc.dup)
			wantErr(t, "second insert", err, storage.ErrDuplicate)
			view(t, s, tc.unchanged)
		})
	}

	t.Run("same approver on another request", func(t *testing.T) {
		seedRequest(t, s, "run-seed", "req-other")
		update(t, s, func(ctx context.Context, tx storage.Tx) error {
			return tx.InsertDecision(ctx, &record.Decision{RequestID: "req-other", RunID: "run-seed", ApproverID: "U1",
				Verdict: record.VerdictApprove})
		})
	})
	t.Run("another approver on the same request", func(t *testing.T) {
		update(t, s, func(ctx context.Context, tx storage.Tx) error {
			return tx.InsertDecision(ctx, &record.Decision{RequestID: "req-seed", RunID: "run-seed", ApproverID: "U2",
				Verdict: record.VerdictApprove})
		})
	})
}

func testNotFound(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-1")
	single := []struct {
		name string
		read func(ctx context.Context, tx storage.Tx) error
	}{
		{"Run", func(ctx context.Context, tx storage.Tx) error { _, err := tx.Run(ctx, "nope"); return err }},
		{"RunByIdempotencyKey", func(ctx context.Context, tx storage.Tx) error {
			_, err := tx.RunByIdempotencyKey(ctx, "", "nope")
			return err
		}},
		{"Request", func(ctx context.Context, tx storage.Tx) error { _, err := tx.Request(ctx, "nope"); return err }},
		{"Operation", func(ctx context.Context, tx storage.Tx) error { _, err := tx.Operation(ctx, "nope"); return err }},
	}
	for _, tc := range single {
		t.Run(tc.name, func(t *testing.T) {
			err := s.View(t.Context(), tc.read)
			wantErr(t, tc.name, err, storage.ErrNotFound)
		})
	}
	// Lists of nothing are empty, not errors.
	lists := []struct {
		name string
		list func(ctx context.Context, tx storage.Tx) (int, error)
	}{
		{"Checkpoints", func(ctx context.Context, tx storage.Tx) (int, error) {
			v, err := tx.Checkpoints(ctx, "run-1")
			return len(v), err
		}},
		{"RequestsForRun", func(ctx context.Context, tx storage.Tx) (int, error) {
			v, err := tx.RequestsForRun(ctx, "nope")
			return len(v), err
		}},
		{"Decisions", func(ctx context.Context, tx storage.Tx) (int, error) {
			v, err := tx.Decisions(ctx, "nope")
			return len(v), err
		}},
		{"Operations", func(ctx context.Context, tx storage.Tx) (int, error) {
			v, err := tx.Operations(ctx, "nope")
			return len(v), err
		}},
		{"ListRuns", func(ctx context.Context, tx storage.Tx) (int, error) {
			v, err := tx.ListRuns(ctx, storage.RunFilter{Statuses: []record.Status{record.StatusDone}})
			return len(v), err
		}},
		{"DueOutbox", func(ctx context.Context, tx storage.Tx) (int, error) {
			v, err := tx.DueOutbox(ctx, base, 10)
			return len(v), err
		}},
		{"AuditEvents", func(ctx context.Context, tx storage.Tx) (int, error) {
			v, err := tx.AuditEvents(ctx, storage.AuditFilter{RunID: "nope"})
			return len(v), err
		}},
	}
	for _, tc := range lists {
		t.Run(tc.name, func(t *testing.T) {
			n := load(t, s, tc.list)
			if n != 0 {
				t.Errorf("%s of nothing: got %d records, want 0", tc.name, n)
			}
		})
	}
}

// --- compare-and-set

// casCase drives one record type through checkCAS.
type casCase[T any] struct {
	rec     *T
	insert  func(ctx context.Context, tx storage.Tx, v *T) error
	update  func(ctx context.Context, tx storage.Tx, v *T) error
	load    func(t *testing.T, s storage.Store, v *T) *T
	version func(v *T) *int64
	// change alters every mutable field it can, differently for each n.
	change func(v *T, n int)
	// rekey points v at a record that does not exist.
	rekey func(v *T)
}

func checkCAS[T any](t *testing.T, s storage.Store, c casCase[T]) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx storage.Tx) error { return c.insert(ctx, tx, c.rec) })
	if v := *c.version(c.rec); v != 1 {
		t.Fatalf("after insert Version = %d, want 1", v)
	}
	stale := *c.rec

	fresh := *c.rec
	c.change(&fresh, 1)
	update(t, s, func(ctx context.Context, tx storage.Tx) error { return c.update(ctx, tx, &fresh) })
	if v := *c.version(&fresh); v != 2 {
		t.Errorf("after a successful update Version = %d, want 2", v)
	}
	checkSame(t, "after update", stored(&fresh), c.load(t, s, &fresh))

	c.change(&stale, 2)
	err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error { return c.update(ctx, tx, &stale) })
	wantErr(t, "update with a stale version", err, storage.ErrConflict)
	if v := *c.version(&stale); v != 1 {
		t.Errorf("a failed update moved Version to %d; want it left at 1", v)
	}
	checkSame(t, "after a stale update", stored(&fresh), c.load(t, s, &fresh))

	missing := fresh
	c.rekey(&missing)
	err = s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error { return c.update(ctx, tx, &missing) })
	wantErr(t, "update of a missing record", err, storage.ErrNotFound)
	if v := *c.version(&missing); v != 2 {
		t.Errorf("a failed update moved Version to %d; want it left at 2", v)
	}

	// The loser re-reads and tries again: that must work.
	again := *c.load(t, s, &fresh)
	c.change(&again, 3)
	update(t, s, func(ctx context.Context, tx storage.Tx) error { return c.update(ctx, tx, &again) })
	if v := *c.version(&again); v != 3 {
		t.Errorf("after the retry Version = %d, want 3", v)
	}
	checkSame(t, "after the retry", stored(&again), c.load(t, s, &again))
}

func testCompareAndSet(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-parent")
	t.Run("Run", func(t *testing.T) {
		checkCAS(t, s, casCase[record.Run]{
			rec: &record.Run{ID: "run-cas", Workflow: "proposal", TaskID: "T-1", Status: record.StatusRunning,
				RequesterID: "U1", IdempotencyKey: "cas-key", ParentID: "run-parent", ParentSeq: 1, CreatedAt: base, UpdatedAt: base},
			insert: func(ctx context.Context, tx storage.Tx, v *record.Run) error { return tx.InsertRun(ctx, v) },
			update: func(ctx context.Context, tx storage.Tx, v *record.Run) error { return tx.UpdateRun(ctx, v) },
			load: func(t *testing.T, s storage.Store, v *record.Run) *record.Run {
				return load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Run, error) { return tx.Run(ctx, v.ID) })
			},
			version: func(v *record.Run) *int64 { return &v.Version },
			// What a run's life changes; what identifies it is written once
			// (testUpdateRunKeepsTheIdentity).
			change: func(v *record.Run, n int) {
				v.Status = record.Statuses[n]
				v.Step, v.Seq = n, int64(n*10)
				v.Fingerprint = fmt.Sprintf("fp-%d", n)
				v.Reason = fmt.Sprintf("reason %d", n)
				v.Deadline = odd.Add(time.Duration(n) * time.Hour)
				v.PrunedAt = odd.Add(time.Duration(n) * 24 * time.Hour)
				v.LeaseOwner = fmt.Sprintf("replica-%d", n)
				v.LeaseUntil = odd.Add(time.Duration(n) * time.Minute)
				v.Fence = int64(100 + n)
				v.UpdatedAt = odd.Add(time.Duration(n) * time.Second)
			},
			rekey: func(v *record.Run) { v.ID, v.IdempotencyKey = "run-missing", "" },
		})
	})
	t.Run("RunIdentity", func(t *testing.T) { testUpdateRunKeepsTheIdentity(t, s) })
	seedRun(t, s, "run-1")
	t.Run("ApprovalRequest", func(t *testing.T) {
		checkCAS(t, s, casCase[record.ApprovalRequest]{
			rec: &record.ApprovalRequest{ID: "req-cas", RunID: "run-1", Fingerprint: "fp", Role: "team_lead", Count: 1,
				Status: record.RequestPending, Deadline: base.Add(72 * time.Hour), CreatedAt: base},
			insert: func(ctx context.Context, tx storage.Tx, v *record.ApprovalRequest) error {
				return tx.InsertRequest(ctx, v)
			},
			update: func(ctx context.Context, tx storage.Tx, v *record.ApprovalRequest) error {
				return tx.UpdateRequest(ctx, v)
			},
			load: func(t *testing.T, s storage.Store, v *record.ApprovalRequest) *record.ApprovalRequest {
				return load(t, s, func(ctx context.Context, tx storage.Tx) (*record.ApprovalRequest, error) {
					return tx.Request(ctx, v.ID)
				})
			},
			version: func(v *record.ApprovalRequest) *int64 { return &v.Version },
			change: func(v *record.ApprovalRequest, n int) {
				v.Status = []record.RequestStatus{record.RequestPending, record.RequestApproved,
					record.RequestRejected, record.RequestSuperseded}[n]
				v.DecidedBy = fmt.Sprintf("U%d", n)
				v.DecidedAt = odd.Add(time.Duration(n) * time.Minute)
				v.Deadline = odd.Add(time.Duration(n) * time.Hour)
				v.Count = n
				v.SelfApproval, v.Edit = n%2 == 1, n%2 == 0
			},
			rekey: func(v *record.ApprovalRequest) { v.ID = "req-missing" },
		})
	})
	t.Run("Operation", func(t *testing.T) {
		checkCAS(t, s, casCase[record.Operation]{
			rec: &record.Operation{Key: "run-1/0", RunID: "run-1", Action: "request_refund", ArgsDigest: "d",
				Status: record.OpPending, CreatedAt: base, UpdatedAt: base},
			insert: func(ctx context.Context, tx storage.Tx, v *record.Operation) error {
				return tx.InsertOperation(ctx, v)
			},
			update: func(ctx context.Context, tx storage.Tx, v *record.Operation) error {
				return tx.UpdateOperation(ctx, v)
			},
			load: func(t *testing.T, s storage.Store, v *record.Operation) *record.Operation {
				return load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Operation, error) {
					return tx.Operation(ctx, v.Key)
				})
			},
			version: func(v *record.Operation) *int64 { return &v.Version },
			change: func(v *record.Operation, n int) {
				v.Status = []record.OpStatus{record.OpPending, record.OpCommitted, record.OpFailed, record.OpUnknown}[n]
				v.Attempts = n
				v.Receipt = []byte(fmt.Sprintf(`{"id":"re_%d"}`, n))
				v.Error = fmt.Sprintf("error %d", n)
				v.UpdatedAt = odd.Add(time.Duration(n) * time.Second)
			},
			rekey: func(v *record.Operation) { v.Key = "run-1/missing" },
		})
	})
	t.Run("OutboxMessage", func(t *testing.T) {
		checkCAS(t, s, casCase[record.OutboxMessage]{
			rec: &record.OutboxMessage{RunID: "run-1", Kind: "slack.post", Payload: []byte(`{}`), NextAttempt: base, CreatedAt: base},
			insert: func(ctx context.Context, tx storage.Tx, v *record.OutboxMessage) error {
				return tx.EnqueueOutbox(ctx, v)
			},
			update: func(ctx context.Context, tx storage.Tx, v *record.OutboxMessage) error {
				return tx.UpdateOutbox(ctx, v)
			},
			load: func(t *testing.T, s storage.Store, v *record.OutboxMessage) *record.OutboxMessage {
				return dueByID(t, s, base.Add(24*time.Hour), v.ID)
			},
			version: func(v *record.OutboxMessage) *int64 { return &v.Version },
			change: func(v *record.OutboxMessage, n int) {
				v.Attempts = n
				v.NextAttempt = odd.Add(time.Duration(n) * time.Second)
				v.LastError = fmt.Sprintf("429 #%d", n)
				v.Payload = []byte(fmt.Sprintf(`{"n":%d}`, n))
			},
			rekey: func(v *record.OutboxMessage) { v.ID += 1_000_000 },
		})
	})
}

// --- listing
