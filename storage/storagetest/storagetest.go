// Package storagetest is the behaviour suite every workflow.Store driver must pass.
// It speaks only the workflow contract, so whatever it proves of one driver holds
// for any other that passes it.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// Run runs the suite. open must return a new, empty store on every call; the
// suite closes it when the (sub)test ends.
func Run(t *testing.T, open func(t *testing.T) workflow.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s workflow.Store)
	}{
		{"RoundTrip/Run", testRunRoundTrip},
		{"RoundTrip/Checkpoint", testCheckpointRoundTrip},
		{"RoundTrip/ApprovalRequest", testRequestRoundTrip},
		{"RoundTrip/Decision", testDecisionRoundTrip},
		{"RoundTrip/Operation", testOperationRoundTrip},
		{"RoundTrip/OutboxMessage", testOutboxRoundTrip},
		{"RoundTrip/AuditEvent", testAuditRoundTrip},
		{"Duplicate", testDuplicate},
		{"EmptyIdempotencyKeysDoNotCollide", testEmptyIdempotencyKeys},
		{"IdempotencyKeysAreTheRequesters", testRequesterKeys},
		{"NotFound", testNotFound},
		{"CompareAndSet", testCompareAndSet},
		{"SaveRun", testSaveRun},
		{"ListOrder", testListOrder},
		{"ListRuns", testListRuns},
		{"ListRunsPagination", testListRunsPagination},
		{"ListRunHeads", testListRunHeads},
		{"DueOutbox", testDueOutbox},
		{"ListOutbox", testListOutbox},
		{"AuditChain", testAuditChain},
		{"LoadRun", testLoadRun},
		{"RollbackOnError", testRollbackOnError},
		{"RollbackOnPanic", testRollbackOnPanic},
		{"CancelledContext", testCancelledContext},
		{"TxUsableAfterDuplicate", testTxUsableAfterDuplicate},
		{"ViewSnapshot", testViewSnapshot},
		{"ViewIsReadOnly", testViewIsReadOnly},
		{"ConcurrentCompareAndSet", testConcurrentCompareAndSet},
		{"ConcurrentDecisions", testConcurrentDecisions},
		{"ClaimRuns", testClaimRuns},
		{"ConcurrentClaims", testConcurrentClaims},
		{"SeenRequests", testSeenRequests},
		{"ConcurrentRequestClaims", testConcurrentRequestClaims},
		{"ForgetRequests", testForgetRequests},
		{"EndedRuns", testEndedRuns},
		{"PruneCheckpoints", testPruneCheckpoints},
		{"OutboxForRun", testOutboxForRun},
		{"CountRuns", testCountRuns},
		{"MessageLocations", testMessageLocations},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close store: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// base is a whole-millisecond UTC instant; odd has sub-millisecond digits and a
// zone other than UTC, to show that stores keep milliseconds and answer in UTC.
var (
	base = time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC)
	odd  = time.Date(2026, 11, 29, 10, 11, 12, 345_678_901, time.FixedZone("UTC-5", -5*60*60))
)

type txFunc = func(ctx context.Context, tx workflow.Tx) error

// --- helpers

func update(t *testing.T, s workflow.Store, fn txFunc) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

func view(t *testing.T, s workflow.Store, fn txFunc) {
	t.Helper()
	if err := s.View(t.Context(), fn); err != nil {
		t.Fatalf("view: %v", err)
	}
}

// load reads one value in a View.
func load[T any](t *testing.T, s workflow.Store, fn func(ctx context.Context, tx workflow.Tx) (T, error)) T {
	t.Helper()
	var out T
	view(t, s, func(ctx context.Context, tx workflow.Tx) error {
		var err error
		out, err = fn(ctx, tx)
		return err
	})
	return out
}

// seedRun stores a minimal run.
func seedRun(t *testing.T, s workflow.Store, id string) *workflow.Run {
	t.Helper()
	r := &workflow.Run{ID: id, Workflow: "proposal", Status: workflow.StatusRunning, CreatedAt: base, UpdatedAt: base}
	update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.InsertRun(ctx, r) })
	return r
}

// seedRequest stores a pending approval request of run.
func seedRequest(t *testing.T, s workflow.Store, runID, id string) *workflow.ApprovalRequest {
	t.Helper()
	r := &workflow.ApprovalRequest{ID: id, RunID: runID, Fingerprint: "fp-" + id, Role: "team_lead", Count: 1,
		Status: workflow.RequestPending, CreatedAt: base}
	update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.InsertRequest(ctx, r) })
	return r
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	bytesType = reflect.TypeFor[[]byte]()
)

// stored is v as a store must give it back: every time at millisecond precision
// in UTC, the zero time still zero.
func stored[T any](v *T) *T {
	c := *v
	cv := reflect.ValueOf(&c).Elem()
	for i := range cv.NumField() {
		f := cv.Field(i)
		if f.Type() != timeType {
			continue
		}
		if tm := f.Interface().(time.Time); !tm.IsZero() {
			f.Set(reflect.ValueOf(time.UnixMilli(tm.UnixMilli()).UTC()))
		}
	}
	return &c
}

// diff lists the fields where got differs from want. Times are equal when they
// are the same instant and got is in UTC (or both are zero); byte slices when they
// hold the same bytes and are both nil or both not.
func diff[T any](want, got *T) []string {
	if want == nil || got == nil {
		if want != got {
			return []string{fmt.Sprintf("got %v, want %v", got, want)}
		}
		return nil
	}
	wv, gv := reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem()
	var out []string
	for i := range wv.NumField() {
		name := wv.Type().Field(i).Name
		w, g := wv.Field(i), gv.Field(i)
		switch w.Type() {
		case timeType:
			wt, gt := w.Interface().(time.Time), g.Interface().(time.Time)
			if wt.IsZero() != gt.IsZero() || !gt.Equal(wt) || (!gt.IsZero() && gt.Location() != time.UTC) {
				out = append(out, fmt.Sprintf("%s: got %s, want %s", name, showTime(gt), showTime(wt)))
			}
		case bytesType:
			wb, gb := w.Bytes(), g.Bytes()
			if (wb == nil) != (gb == nil) || !bytes.Equal(wb, gb) {
				out = append(out, fmt.Sprintf("%s: got %s, want %s", name, showBytes(gb), showBytes(wb)))
			}
		default:
			if !reflect.DeepEqual(w.Interface(), g.Interface()) {
				out = append(out, fmt.Sprintf("%s: got %#v, want %#v", name, g.Interface(), w.Interface()))
			}
		}
	}
	return out
}

func showTime(t time.Time) string {
	if t.IsZero() {
		return "zero time"
	}
	return t.Format(time.RFC3339Nano) + " (" + t.Location().String() + ")"
}

func showBytes(b []byte) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", b)
}

func checkSame[T any](t *testing.T, what string, want, got *T) {
	t.Helper()
	if d := diff(want, got); len(d) > 0 {
		t.Errorf("%s differs from what was stored:\n\t%s", what, strings.Join(d, "\n\t"))
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want %v", what, err, target)
	}
}

// --- round trips

func testRunRoundTrip(t *testing.T, s workflow.Store) {
	cases := []struct {
		name string
		run  *workflow.Run
	}{
		{"every field set", &workflow.Run{
			ID: "run-full", Workflow: "refund-agent", TaskID: "T-65273", Status: workflow.StatusWaitingApproval,
			Step: 3, Seq: 4, Version: 42, RequesterID: "agent:resolver", IdempotencyKey: "idem-1",
			Fingerprint: "9f86d081884c7d65", Reason: "waiting for a team lead",
			Deadline: odd.Add(72 * time.Hour), ParentID: "run-parent", ParentSeq: 2,
			LeaseOwner: "replica-1", LeaseUntil: odd.Add(30 * time.Second), Fence: 7,
			CreatedAt: odd, UpdatedAt: odd.Add(time.Second), PrunedAt: odd.Add(time.Hour), CallbackURL: "https://agents.example/signoff/é?run=1",
		}},
		{"zero times and empty strings", &workflow.Run{ID: "run-min", Status: workflow.StatusRunning}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.run
			update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.InsertRun(ctx, in) })
			if in.Version != 1 {
				t.Errorf("after InsertRun Version = %d, want 1", in.Version)
			}
			got := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.Run, error) { return tx.Run(ctx, in.ID) })
			checkSame(t, "Run", stored(in), got)
			if in.IdempotencyKey != "" {
				got := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.Run, error) {
					return tx.RunByIdempotencyKey(ctx, in.RequesterID, in.IdempotencyKey)
				})
				checkSame(t, "RunByIdempotencyKey", stored(in), got)
				view(t, s, func(ctx context.Context, tx workflow.Tx) error {
					_, err := tx.RunByIdempotencyKey(ctx, "someone-else", in.IdempotencyKey)
					wantErr(t, "RunByIdempotencyKey of another requester", err, workflow.ErrNotFound)
					return nil
				})
			}
		})
	}
}

// payloads are the byte slices every byte column must keep apart.
var payloads = []struct {
	name string
	b    []byte
}{
	{"nil bytes", nil},
	{"empty bytes", []byte{}},
	{"JSON", []byte(`{"b":[1,2.50,"x"],"a":"é\u0000"}`)},
}

func testCheckpointRoundTrip(t *testing.T, s workflow.Store) {
	seedRun(t, s, "run-1")
	for i, p := range payloads {
		t.Run(p.name, func(t *testing.T) {
			// Every checkpoint after the first names the one before as its base.
			in := &workflow.Checkpoint{RunID: "run-1", Seq: int64(i + 1), SchemaVersion: workflow.SchemaVersion,
				State: p.b, BaseSeq: int64(i), PrevHash: fmt.Sprintf("prev-%d", i), CreatedAt: odd.Add(time.Duration(i) * time.Minute)}
			in.Hash = workflow.CheckpointHash(in)
			update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.AppendCheckpoint(ctx, in) })
			cs := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.Checkpoint, error) {
				return tx.Checkpoints(ctx, "run-1")
			})
			if len(cs) != i+1 {
				t.Fatalf("Checkpoints: got %d, want %d", len(cs), i+1)
			}
			got := cs[i]
			checkSame(t, "Checkpoint", stored(in), got)
			if h := workflow.CheckpointHash(got); h != in.Hash {
				t.Errorf("hash of the loaded checkpoint = %s, want %s: the stored fields changed", h, in.Hash)
			}
		})
	}
}

func testRequestRoundTrip(t *testing.T, s workflow.Store) {
	seedRun(t, s, "run-1")
	cases := []struct {
		name string
		req  *workflow.ApprovalRequest
	}{
		{"every field set", &workflow.ApprovalRequest{
			ID: "req-full", RunID: "run-1", Fingerprint: "fp", Rule: "large-refund", PolicyRevision: "2026-11-29.1",
			Risk: "high", Role: "team_lead", Count: 2, SelfApproval: true, Edit: true, RequesterID: "agent:resolver",
			Deadline: odd.Add(72 * time.Hour), Status: workflow.RequestApproved, DecidedBy: "U0LEAD0001",
			DecidedAt: odd.Add(time.Hour),
			Version:   9, CreatedAt: odd,
		}},
		{"zero times and false flags", &workflow.ApprovalRequest{ID: "req-min", RunID: "run-1", Status: workflow.RequestPending}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.req
			update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.InsertRequest(ctx, in) })
			if in.Version != 1 {
				t.Errorf("after InsertRequest Version = %d, want 1", in.Version)
			}
			got := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.ApprovalRequest, error) {
				return tx.Request(ctx, in.ID)
			})
			checkSame(t, "Request", stored(in), got)
		})
	}
}

func testDecisionRoundTrip(t *testing.T, s workflow.Store) {
	seedRun(t, s, "run-1")
	seedRequest(t, s, "run-1", "req-1")
	var ids []int64
	for i, p := range payloads {
		t.Run(p.name, func(t *testing.T) {
			in := &workflow.Decision{ID: 12345, RequestID: "req-1", RunID: "run-1", ApproverID: fmt.Sprintf("U%d", i),
				ApproverName: "Lee", Role: "team_lead", Verdict: workflow.VerdictApprove, Reason: "ok",
				EditedArgs: p.b, Via: "slack", PayloadDigest: "d1g35t", At: odd.Add(time.Duration(i) * time.Second)}
			update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.InsertDecision(ctx, in) })
			if in.ID <= 0 || slices.Contains(ids, in.ID) {
				t.Errorf("InsertDecision set ID %d; want a new positive id (earlier: %v)", in.ID, ids)
			}
			ids = append(ids, in.ID)
			ds := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.Decision, error) {
				return tx.Decisions(ctx, "run-1")
			})
			if len(ds) != i+1 {
				t.Fatalf("Decisions: got %d, want %d", len(ds), i+1)
			}
			checkSame(t, "Decision", stored(in), ds[i])
		})
	}
	t.Run("reject without edit", func(t *testing.T) {
		in := &workflow.Decision{RequestID: "req-1", RunID: "run-1", ApproverID: "U-rejecter",
			Verdict: workflow.VerdictReject, Reason: "amount looks wrong", Via: "cli"}
		update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.InsertDecision(ctx, in) })
		ds := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.Decision, error) {
			return tx.Decisions(ctx, "run-1")
		})
		if len(ds) == 0 {
			t.Fatal("Decisions: none")
		}
		checkSame(t, "Decision", stored(in), ds[len(ds)-1])
	})
}

func testOperationRoundTrip(t *testing.T, s workflow.Store) {
	seedRun(t, s, "run-1")
	for i, p := range payloads {
		t.Run(p.name, func(t *testing.T) {
			in := &workflow.Operation{Key: fmt.Sprintf("run-1/%d", i), RunID: "run-1", Index: i, Action: "request_refund",
				ArgsDigest: "sha256:abc", Status: workflow.OpCommitted, Attempts: 2, Receipt: p.b, Error: "timeout once",
				Version: 5, CreatedAt: odd, UpdatedAt: odd.Add(time.Minute)}
			update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.InsertOperation(ctx, in) })
			if in.Version != 1 {
				t.Errorf("after InsertOperation Version = %d, want 1", in.Version)
			}
			got := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.Operation, error) {
				return tx.Operation(ctx, in.Key)
			})
			checkSame(t, "Operation", stored(in), got)
		})
	}
	t.Run("zero times", func(t *testing.T) {
		in := &workflow.Operation{Key: "run-1/min", RunID: "run-1", Index: 9, Status: workflow.OpPending}
		update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.InsertOperation(ctx, in) })
		got := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.Operation, error) {
			return tx.Operation(ctx, in.Key)
		})
		checkSame(t, "Operation", stored(in), got)
	})
}

func testOutboxRoundTrip(t *testing.T, s workflow.Store) {
	seedRun(t, s, "run-1")
	var ids []int64
	for _, p := range payloads {
		t.Run(p.name, func(t *testing.T) {
			in := &workflow.OutboxMessage{ID: 777, RunID: "run-1", Kind: "slack.post", Payload: p.b, Attempts: 1,
				NextAttempt: odd, LastError: "rate limited", Version: 3, CreatedAt: odd.Add(-time.Minute)}
			update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.EnqueueOutbox(ctx, in) })
			if in.Version != 1 {
				t.Errorf("after EnqueueOutbox Version = %d, want 1", in.Version)
			}
			if in.ID <= 0 || slices.Contains(ids, in.ID) {
				t.Errorf("EnqueueOutbox set ID %d; want a new positive id (earlier: %v)", in.ID, ids)
			}
			ids = append(ids, in.ID)
			got := dueByID(t, s, odd, in.ID)
			checkSame(t, "OutboxMessage", stored(in), got)
		})
	}
	t.Run("zero times", func(t *testing.T) {
		in := &workflow.OutboxMessage{Kind: "callback"}
		update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.EnqueueOutbox(ctx, in) })
		// A zero NextAttempt is before any now: due at once.
		got := dueByID(t, s, base, in.ID)
		checkSame(t, "OutboxMessage", stored(in), got)
	})
}

// dueByID finds message id among those due at now, or fails the test.
func dueByID(t *testing.T, s workflow.Store, now time.Time, id int64) *workflow.OutboxMessage {
	t.Helper()
	ms := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.OutboxMessage, error) {
		return tx.DueOutbox(ctx, now, 1000)
	})
	for _, m := range ms {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("outbox message %d is not due at %s", id, showTime(now))
	return nil
}

func testAuditRoundTrip(t *testing.T, s workflow.Store) {
	for i, p := range payloads {
		t.Run(p.name, func(t *testing.T) {
			in := &workflow.AuditEvent{RunID: "run-1", Actor: "U0LEAD0001", Action: "approve", Detail: p.b,
				At: odd.Add(time.Duration(i) * time.Second), Seq: 99, PrevHash: "bogus", Hash: "bogus"}
			update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.AppendAudit(ctx, in, nil) })
			es := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.AuditEvent, error) {
				return tx.AuditEvents(ctx, workflow.AuditFilter{AfterSeq: in.Seq - 1})
			})
			if len(es) != 1 {
				t.Fatalf("AuditEvents after seq %d: got %d events, want 1", in.Seq-1, len(es))
			}
			checkSame(t, "AuditEvent", stored(in), es[0])
			if h := workflow.AuditHash(es[0]); h != es[0].Hash {
				t.Errorf("hash of the loaded event = %s, stored %s: the stored fields changed", h, es[0].Hash)
			}
		})
	}
}

// --- unique keys

func testDuplicate(t *testing.T, s workflow.Store) {
	seedRun(t, s, "run-seed")
	seedRequest(t, s, "run-seed", "req-seed")
	update(t, s, func(ctx context.Context, tx workflow.Tx) error {
		return errors.Join(
			tx.InsertRun(ctx, &workflow.Run{ID: "run-keyed", Status: workflow.StatusRunning, RequesterID: "agent:a", IdempotencyKey: "key-1", Workflow: "first"}),
			tx.AppendCheckpoint(ctx, &workflow.Checkpoint{RunID: "run-seed", Seq: 1, SchemaVersion: 1, State: []byte(`"first"`)}),
			tx.InsertDecision(ctx, &workflow.Decision{RequestID: "req-seed", RunID: "run-seed", ApproverID: "U1",
				Verdict: workflow.VerdictApprove, Reason: "first"}),
			tx.InsertOperation(ctx, &workflow.Operation{Key: "op-1", RunID: "run-seed", Status: workflow.OpPending, Action: "first"}),
		)
	})
	cases := []struct {
		name string
		dup  txFunc
		// unchanged checks that the first record is intact and the second left no trace.
		unchanged txFunc
	}{
		{"run id",
			func(ctx context.Context, tx workflow.Tx) error {
				return tx.InsertRun(ctx, &workflow.Run{ID: "run-keyed", Status: workflow.StatusDone, RequesterID: "agent:a", IdempotencyKey: "key-2", Workflow: "second"})
			},
			func(ctx context.Context, tx workflow.Tx) error {
				r, err := tx.Run(ctx, "run-keyed")
				if err != nil {
					return err
				}
				if r.Workflow != "first" || r.IdempotencyKey != "key-1" {
					return fmt.Errorf("run-keyed is now %+v", r)
				}
				if _, err := tx.RunByIdempotencyKey(ctx, "agent:a", "key-2"); !errors.Is(err, workflow.ErrNotFound) {
					return fmt.Errorf("key-2 of the refused run: got %v, want ErrNotFound", err)
				}
				return nil
			}},
		{"idempotency key of the same requester",
			func(ctx context.Context, tx workflow.Tx) error {
				return tx.InsertRun(ctx, &workflow.Run{ID: "run-other", Status: workflow.StatusRunning, RequesterID: "agent:a", IdempotencyKey: "key-1"})
			},
			func(ctx context.Context, tx workflow.Tx) error {
				r, err := tx.RunByIdempotencyKey(ctx, "agent:a", "key-1")
				if err != nil {
					return err
				}
				if r.ID != "run-keyed" {
					return fmt.Errorf("key-1 now names %s", r.ID)
				}
				if _, err := tx.Run(ctx, "run-other"); !errors.Is(err, workflow.ErrNotFound) {
					return fmt.Errorf("refused run-other: got %v, want ErrNotFound", err)
				}
				return nil
			}},
		{"checkpoint seq",
			func(ctx context.Context, tx workflow.Tx) error {
				return tx.AppendCheckpoint(ctx, &workflow.Checkpoint{RunID: "run-seed", Seq: 1, SchemaVersion: 1, State: []byte(`"second"`)})
			},
			func(ctx context.Context, tx workflow.Tx) error {
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
			func(ctx context.Context, tx workflow.Tx) error {
				return tx.InsertRequest(ctx, &workflow.ApprovalRequest{ID: "req-seed", RunID: "run-seed", Status: workflow.RequestRejected})
			},
			func(ctx context.Context, tx workflow.Tx) error {
				r, err := tx.Request(ctx, "req-seed")
				if err != nil {
					return err
				}
				if r.Status != workflow.RequestPending {
					return fmt.Errorf("req-seed is now %s", r.Status)
				}
				return nil
			}},
		{"decision per approver",
			func(ctx context.Context, tx workflow.Tx) error {
				return tx.InsertDecision(ctx, &workflow.Decision{RequestID: "req-seed", RunID: "run-seed", ApproverID: "U1",
					Verdict: workflow.VerdictReject, Reason: "second"})
			},
			func(ctx context.Context, tx workflow.Tx) error {
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
			func(ctx context.Context, tx workflow.Tx) error {
				return tx.InsertOperation(ctx, &workflow.Operation{Key: "op-1", RunID: "run-seed", Status: workflow.OpCommitted, Action: "second"})
			},
			func(ctx context.Context, tx workflow.Tx) error {
				op, err := tx.Operation(ctx, "op-1")
				if err != nil {
					return err
				}
				if op.Action != "first" || op.Status != workflow.OpPending {
					return fmt.Errorf("op-1 is now %+v", op)
				}
				return nil
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Update(t.Context(), tc.dup)
			wantErr(t, "second insert", err, workflow.ErrDuplicate)
			view(t, s, tc.unchanged)
		})
	}

	t.Run("same approver on another request", func(t *testing.T) {
		seedRequest(t, s, "run-seed", "req-other")
		update(t, s, func(ctx context.Context, tx workflow.Tx) error {
			return tx.InsertDecision(ctx, &workflow.Decision{RequestID: "req-other", RunID: "run-seed", ApproverID: "U1",
				Verdict: workflow.VerdictApprove})
		})
	})
	t.Run("another approver on the same request", func(t *testing.T) {
		update(t, s, func(ctx context.Context, tx workflow.Tx) error {
			return tx.InsertDecision(ctx, &workflow.Decision{RequestID: "req-seed", RunID: "run-seed", ApproverID: "U2",
				Verdict: workflow.VerdictApprove})
		})
	})
}

// testRequesterKeys: a key is unique per requester only. The same key from
// two requesters is two runs, each found by its own requester, and a third
// finds none.
func testRequesterKeys(t *testing.T, s workflow.Store) {
	for _, r := range []struct{ id, requester string }{{"run-a", "agent:a"}, {"run-b", "agent:b"}} {
		update(t, s, func(ctx context.Context, tx workflow.Tx) error {
			return tx.InsertRun(ctx, &workflow.Run{ID: r.id, Status: workflow.StatusRunning, RequesterID: r.requester, IdempotencyKey: "ticket-1"})
		})
	}
	view(t, s, func(ctx context.Context, tx workflow.Tx) error {
		for requester, want := range map[string]string{"agent:a": "run-a", "agent:b": "run-b"} {
			r, err := tx.RunByIdempotencyKey(ctx, requester, "ticket-1")
			if err != nil || r.ID != want {
				t.Errorf("%s's key ticket-1 names %+v (%v), want %s", requester, r, err, want)
			}
		}
		_, err := tx.RunByIdempotencyKey(ctx, "agent:c", "ticket-1")
		wantErr(t, "RunByIdempotencyKey of a requester without the key", err, workflow.ErrNotFound)
		return nil
	})
}

func testEmptyIdempotencyKeys(t *testing.T, s workflow.Store) {
	for _, id := range []string{"run-a", "run-b", "run-c"} {
		seedRun(t, s, id)
	}
	n := len(load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.Run, error) {
		return tx.ListRuns(ctx, workflow.RunFilter{})
	}))
	if n != 3 {
		t.Errorf("runs without an idempotency key: got %d stored, want 3", n)
	}
	view(t, s, func(ctx context.Context, tx workflow.Tx) error {
		_, err := tx.RunByIdempotencyKey(ctx, "", "")
		wantErr(t, `RunByIdempotencyKey("", "")`, err, workflow.ErrNotFound)
		return nil
	})
}

func testNotFound(t *testing.T, s workflow.Store) {
	seedRun(t, s, "run-1")
	single := []struct {
		name string
		read func(ctx context.Context, tx workflow.Tx) error
	}{
		{"Run", func(ctx context.Context, tx workflow.Tx) error { _, err := tx.Run(ctx, "nope"); return err }},
		{"RunByIdempotencyKey", func(ctx context.Context, tx workflow.Tx) error {
			_, err := tx.RunByIdempotencyKey(ctx, "", "nope")
			return err
		}},
		{"Request", func(ctx context.Context, tx workflow.Tx) error { _, err := tx.Request(ctx, "nope"); return err }},
		{"Operation", func(ctx context.Context, tx workflow.Tx) error { _, err := tx.Operation(ctx, "nope"); return err }},
	}
	for _, tc := range single {
		t.Run(tc.name, func(t *testing.T) {
			err := s.View(t.Context(), tc.read)
			wantErr(t, tc.name, err, workflow.ErrNotFound)
		})
	}
	// Lists of nothing are empty, not errors.
	lists := []struct {
		name string
		list func(ctx context.Context, tx workflow.Tx) (int, error)
	}{
		{"Checkpoints", func(ctx context.Context, tx workflow.Tx) (int, error) {
			v, err := tx.Checkpoints(ctx, "run-1")
			return len(v), err
		}},
		{"RequestsForRun", func(ctx context.Context, tx workflow.Tx) (int, error) {
			v, err := tx.RequestsForRun(ctx, "nope")
			return len(v), err
		}},
		{"Decisions", func(ctx context.Context, tx workflow.Tx) (int, error) {
			v, err := tx.Decisions(ctx, "nope")
			return len(v), err
		}},
		{"Operations", func(ctx context.Context, tx workflow.Tx) (int, error) {
			v, err := tx.Operations(ctx, "nope")
			return len(v), err
		}},
		{"ListRuns", func(ctx context.Context, tx workflow.Tx) (int, error) {
			v, err := tx.ListRuns(ctx, workflow.RunFilter{Statuses: []workflow.Status{workflow.StatusDone}})
			return len(v), err
		}},
		{"DueOutbox", func(ctx context.Context, tx workflow.Tx) (int, error) {
			v, err := tx.DueOutbox(ctx, base, 10)
			return len(v), err
		}},
		{"AuditEvents", func(ctx context.Context, tx workflow.Tx) (int, error) {
			v, err := tx.AuditEvents(ctx, workflow.AuditFilter{RunID: "nope"})
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
	insert  func(ctx context.Context, tx workflow.Tx, v *T) error
	update  func(ctx context.Context, tx workflow.Tx, v *T) error
	load    func(t *testing.T, s workflow.Store, v *T) *T
	version func(v *T) *int64
	// change alters every mutable field it can, differently for each n.
	change func(v *T, n int)
	// rekey points v at a record that does not exist.
	rekey func(v *T)
}

func checkCAS[T any](t *testing.T, s workflow.Store, c casCase[T]) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx workflow.Tx) error { return c.insert(ctx, tx, c.rec) })
	if v := *c.version(c.rec); v != 1 {
		t.Fatalf("after insert Version = %d, want 1", v)
	}
	stale := *c.rec

	fresh := *c.rec
	c.change(&fresh, 1)
	update(t, s, func(ctx context.Context, tx workflow.Tx) error { return c.update(ctx, tx, &fresh) })
	if v := *c.version(&fresh); v != 2 {
		t.Errorf("after a successful update Version = %d, want 2", v)
	}
	checkSame(t, "after update", stored(&fresh), c.load(t, s, &fresh))

	c.change(&stale, 2)
	err := s.Update(t.Context(), func(ctx context.Context, tx workflow.Tx) error { return c.update(ctx, tx, &stale) })
	wantErr(t, "update with a stale version", err, workflow.ErrConflict)
	if v := *c.version(&stale); v != 1 {
		t.Errorf("a failed update moved Version to %d; want it left at 1", v)
	}
	checkSame(t, "after a stale update", stored(&fresh), c.load(t, s, &fresh))

	missing := fresh
	c.rekey(&missing)
	err = s.Update(t.Context(), func(ctx context.Context, tx workflow.Tx) error { return c.update(ctx, tx, &missing) })
	wantErr(t, "update of a missing record", err, workflow.ErrNotFound)
	if v := *c.version(&missing); v != 2 {
		t.Errorf("a failed update moved Version to %d; want it left at 2", v)
	}

	// The loser re-reads and tries again: that must work.
	again := *c.load(t, s, &fresh)
	c.change(&again, 3)
	update(t, s, func(ctx context.Context, tx workflow.Tx) error { return c.update(ctx, tx, &again) })
	if v := *c.version(&again); v != 3 {
		t.Errorf("after the retry Version = %d, want 3", v)
	}
	checkSame(t, "after the retry", stored(&again), c.load(t, s, &again))
}

// testUpdateRunKeepsTheIdentity: UpdateRun writes what a run's life changes
// and nothing of what identifies the run (workflow, task, requester,
// idempotency key, parent, creation time, callback URL): those are written
// once, by InsertRun, so no transition can rewrite who asked for a run.
func testUpdateRunKeepsTheIdentity(t *testing.T, s workflow.Store) {
	in := &workflow.Run{ID: "run-identity", Workflow: "proposal", TaskID: "T-1", Status: workflow.StatusRunning,
		RequesterID: "U1", IdempotencyKey: "identity-key", ParentID: "run-parent", ParentSeq: 1,
		CallbackURL: "https://hooks.example.com/a", CreatedAt: base, UpdatedAt: base}
	update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.InsertRun(ctx, in) })
	want := *in
	changed := *in
	changed.Workflow, changed.TaskID, changed.RequesterID = "other", "T-2", "U2"
	changed.IdempotencyKey, changed.ParentID, changed.ParentSeq = "other-key", "", 0
	changed.CallbackURL, changed.CreatedAt = "https://hooks.example.com/b", odd
	changed.Status, changed.UpdatedAt = workflow.StatusExecuting, odd
	update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.UpdateRun(ctx, &changed) })
	want.Status, want.UpdatedAt, want.Version = workflow.StatusExecuting, odd, changed.Version
	got := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.Run, error) { return tx.Run(ctx, in.ID) })
	checkSame(t, "after an update that changed the identity", stored(&want), got)
}

func testCompareAndSet(t *testing.T, s workflow.Store) {
	seedRun(t, s, "run-parent")
	t.Run("Run", func(t *testing.T) {
		checkCAS(t, s, casCase[workflow.Run]{
			rec: &workflow.Run{ID: "run-cas", Workflow: "proposal", TaskID: "T-1", Status: workflow.StatusRunning,
				RequesterID: "U1", IdempotencyKey: "cas-key", ParentID: "run-parent", ParentSeq: 1, CreatedAt: base, UpdatedAt: base},
			insert: func(ctx context.Context, tx workflow.Tx, v *workflow.Run) error { return tx.InsertRun(ctx, v) },
			update: func(ctx context.Context, tx workflow.Tx, v *workflow.Run) error { return tx.UpdateRun(ctx, v) },
			load: func(t *testing.T, s workflow.Store, v *workflow.Run) *workflow.Run {
				return load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.Run, error) { return tx.Run(ctx, v.ID) })
			},
			version: func(v *workflow.Run) *int64 { return &v.Version },
			// What a run's life changes; what identifies it is written once
			// (testUpdateRunKeepsTheIdentity).
			change: func(v *workflow.Run, n int) {
				v.Status = workflow.Statuses[n]
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
			rekey: func(v *workflow.Run) { v.ID, v.IdempotencyKey = "run-missing", "" },
		})
	})
	t.Run("RunIdentity", func(t *testing.T) { testUpdateRunKeepsTheIdentity(t, s) })
	seedRun(t, s, "run-1")
	t.Run("ApprovalRequest", func(t *testing.T) {
		checkCAS(t, s, casCase[workflow.ApprovalRequest]{
			rec: &workflow.ApprovalRequest{ID: "req-cas", RunID: "run-1", Fingerprint: "fp", Role: "team_lead", Count: 1,
				Status: workflow.RequestPending, Deadline: base.Add(72 * time.Hour), CreatedAt: base},
			insert: func(ctx context.Context, tx workflow.Tx, v *workflow.ApprovalRequest) error {
				return tx.InsertRequest(ctx, v)
			},
			update: func(ctx context.Context, tx workflow.Tx, v *workflow.ApprovalRequest) error {
				return tx.UpdateRequest(ctx, v)
			},
			load: func(t *testing.T, s workflow.Store, v *workflow.ApprovalRequest) *workflow.ApprovalRequest {
				return load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.ApprovalRequest, error) {
					return tx.Request(ctx, v.ID)
				})
			},
			version: func(v *workflow.ApprovalRequest) *int64 { return &v.Version },
			change: func(v *workflow.ApprovalRequest, n int) {
				v.Status = []workflow.RequestStatus{workflow.RequestPending, workflow.RequestApproved,
					workflow.RequestRejected, workflow.RequestSuperseded}[n]
				v.DecidedBy = fmt.Sprintf("U%d", n)
				v.DecidedAt = odd.Add(time.Duration(n) * time.Minute)
				v.Deadline = odd.Add(time.Duration(n) * time.Hour)
				v.Count = n
				v.SelfApproval, v.Edit = n%2 == 1, n%2 == 0
			},
			rekey: func(v *workflow.ApprovalRequest) { v.ID = "req-missing" },
		})
	})
	t.Run("Operation", func(t *testing.T) {
		checkCAS(t, s, casCase[workflow.Operation]{
			rec: &workflow.Operation{Key: "run-1/0", RunID: "run-1", Action: "request_refund", ArgsDigest: "d",
				Status: workflow.OpPending, CreatedAt: base, UpdatedAt: base},
			insert: func(ctx context.Context, tx workflow.Tx, v *workflow.Operation) error {
				return tx.InsertOperation(ctx, v)
			},
			update: func(ctx context.Context, tx workflow.Tx, v *workflow.Operation) error {
				return tx.UpdateOperation(ctx, v)
			},
			load: func(t *testing.T, s workflow.Store, v *workflow.Operation) *workflow.Operation {
				return load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.Operation, error) {
					return tx.Operation(ctx, v.Key)
				})
			},
			version: func(v *workflow.Operation) *int64 { return &v.Version },
			change: func(v *workflow.Operation, n int) {
				v.Status = []workflow.OpStatus{workflow.OpPending, workflow.OpCommitted, workflow.OpFailed, workflow.OpUnknown}[n]
				v.Attempts = n
				v.Receipt = []byte(fmt.Sprintf(`{"id":"re_%d"}`, n))
				v.Error = fmt.Sprintf("error %d", n)
				v.UpdatedAt = odd.Add(time.Duration(n) * time.Second)
			},
			rekey: func(v *workflow.Operation) { v.Key = "run-1/missing" },
		})
	})
	t.Run("OutboxMessage", func(t *testing.T) {
		checkCAS(t, s, casCase[workflow.OutboxMessage]{
			rec: &workflow.OutboxMessage{RunID: "run-1", Kind: "slack.post", Payload: []byte(`{}`), NextAttempt: base, CreatedAt: base},
			insert: func(ctx context.Context, tx workflow.Tx, v *workflow.OutboxMessage) error {
				return tx.EnqueueOutbox(ctx, v)
			},
			update: func(ctx context.Context, tx workflow.Tx, v *workflow.OutboxMessage) error {
				return tx.UpdateOutbox(ctx, v)
			},
			load: func(t *testing.T, s workflow.Store, v *workflow.OutboxMessage) *workflow.OutboxMessage {
				return dueByID(t, s, base.Add(24*time.Hour), v.ID)
			},
			version: func(v *workflow.OutboxMessage) *int64 { return &v.Version },
			change: func(v *workflow.OutboxMessage, n int) {
				v.Attempts = n
				v.NextAttempt = odd.Add(time.Duration(n) * time.Second)
				v.LastError = fmt.Sprintf("429 #%d", n)
				v.Payload = []byte(fmt.Sprintf(`{"n":%d}`, n))
			},
			rekey: func(v *workflow.OutboxMessage) { v.ID += 1_000_000 },
		})
	})
}

// --- listing

func testListOrder(t *testing.T, s workflow.Store) {
	seedRun(t, s, "run-1")
	seedRun(t, s, "run-2")
	update(t, s, func(ctx context.Context, tx workflow.Tx) error {
		var errs []error
		// Inserted out of order, to show the lists sort rather than echo insertion.
		for _, seq := range []int64{3, 1, 2} {
			errs = append(errs, tx.AppendCheckpoint(ctx, &workflow.Checkpoint{RunID: "run-1", Seq: seq, SchemaVersion: 1}))
		}
		for _, r := range []struct {
			id string
			at time.Duration
		}{{"req-c", 2 * time.Minute}, {"req-b", time.Minute}, {"req-a", time.Minute}} {
			errs = append(errs, tx.InsertRequest(ctx, &workflow.ApprovalRequest{ID: r.id, RunID: "run-1",
				Status: workflow.RequestPending, CreatedAt: base.Add(r.at)}))
		}
		errs = append(errs, tx.InsertRequest(ctx, &workflow.ApprovalRequest{ID: "req-other-run", RunID: "run-2",
			Status: workflow.RequestPending, CreatedAt: base}))
		for _, i := range []int{2, 0, 1} {
			errs = append(errs, tx.InsertOperation(ctx, &workflow.Operation{Key: fmt.Sprintf("run-1/%d", i), RunID: "run-1",
				Index: i, Status: workflow.OpPending}))
		}
		errs = append(errs, tx.InsertOperation(ctx, &workflow.Operation{Key: "run-2/0", RunID: "run-2", Status: workflow.OpPending}))
		for i, who := range []string{"U3", "U1", "U2"} {
			errs = append(errs, tx.InsertDecision(ctx, &workflow.Decision{RequestID: "req-a", RunID: "run-1", ApproverID: who,
				Verdict: workflow.VerdictApprove, At: base.Add(time.Duration(i) * time.Second)}))
		}
		errs = append(errs, tx.InsertDecision(ctx, &workflow.Decision{RequestID: "req-other-run", RunID: "run-2",
			ApproverID: "U1", Verdict: workflow.VerdictApprove}))
		return errors.Join(errs...)
	})
	view(t, s, func(ctx context.Context, tx workflow.Tx) error {
		cs, err := tx.Checkpoints(ctx, "run-1")
		if err != nil {
			return err
		}
		checkOrder(t, "Checkpoints by seq", cs, func(c *workflow.Checkpoint) string { return fmt.Sprint(c.Seq) }, "1", "2", "3")
		rs, err := tx.RequestsForRun(ctx, "run-1")
		if err != nil {
			return err
		}
		checkOrder(t, "RequestsForRun oldest first", rs, func(r *workflow.ApprovalRequest) string { return r.ID },
			"req-a", "req-b", "req-c")
		ops, err := tx.Operations(ctx, "run-1")
		if err != nil {
			return err
		}
		checkOrder(t, "Operations by index", ops, func(o *workflow.Operation) string { return o.Key },
			"run-1/0", "run-1/1", "run-1/2")
		ds, err := tx.Decisions(ctx, "run-1")
		if err != nil {
			return err
		}
		checkOrder(t, "Decisions in the order they were made", ds, func(d *workflow.Decision) string { return d.ApproverID },
			"U3", "U1", "U2")
		return nil
	})
}

func checkOrder[T any](t *testing.T, what string, got []T, key func(T) string, want ...string) {
	t.Helper()
	keys := make([]string, len(got))
	for i, v := range got {
		keys[i] = key(v)
	}
	if !slices.Equal(keys, want) {
		t.Errorf("%s: got %v, want %v", what, keys, want)
	}
}

// listFixture is a set of runs with tied creation times, deadlines on some, and
// statuses of every kind, inserted in an order unlike the one listed.
func listFixture(t *testing.T, s workflow.Store) []*workflow.Run {
	t.Helper()
	const noDeadline = -1
	specs := []struct {
		id       string
		status   workflow.Status
		created  time.Duration
		deadline time.Duration
	}{
		{"r10", workflow.StatusExpired, 7 * time.Minute, time.Hour},
		{"r09", workflow.StatusWaitingApproval, 6 * time.Minute, 24 * time.Hour},
		{"r08", workflow.StatusNeedsAttention, 5 * time.Minute, 2 * time.Hour},
		{"r07", workflow.StatusWaitingApproval, 5 * time.Minute, time.Hour},
		{"r06", workflow.StatusDone, 4 * time.Minute, noDeadline},
		{"r05", workflow.StatusWaitingApproval, 3 * time.Minute, noDeadline},
		{"r04", workflow.StatusExecuting, 2 * time.Minute, noDeadline},
		{"r03", workflow.StatusWaitingApproval, time.Minute, 5 * time.Hour},
		{"r02", workflow.StatusWaitingApproval, time.Minute, 10 * time.Hour},
		{"r01", workflow.StatusRunning, 0, noDeadline},
		{"r00", workflow.StatusWaitingApproval, -time.Minute, 3 * time.Hour},
	}
	var runs []*workflow.Run
	update(t, s, func(ctx context.Context, tx workflow.Tx) error {
		for _, sp := range specs {
			r := &workflow.Run{ID: sp.id, Status: sp.status, CreatedAt: odd.Add(sp.created), UpdatedAt: odd}
			// Tasks and requesters cut across statuses and times, so that a
			// filter on one is told apart from a filter on another.
			switch sp.id {
			case "r02", "r05", "r09":
				r.TaskID = "T-1"
			case "r03":
				r.TaskID = "T-2"
			}
			r.RequesterID = "agent:b"
			if slices.Contains([]string{"r00", "r02", "r06", "r10"}, sp.id) {
				r.RequesterID = "agent:a"
			}
			if sp.deadline != noDeadline {
				r.Deadline = odd.Add(sp.deadline)
			}
			if err := tx.InsertRun(ctx, r); err != nil {
				return err
			}
			runs = append(runs, stored(r))
		}
		return nil
	})
	return runs
}

// referenceList is ListRuns written out plainly, to hold drivers against.
func referenceList(all []*workflow.Run, f workflow.RunFilter) []*workflow.Run {
	var out []*workflow.Run
	after := stored(&workflow.Run{CreatedAt: f.AfterCreated}).CreatedAt
	before := stored(&workflow.Run{CreatedAt: f.DeadlineBefore}).CreatedAt
	for _, r := range all {
		if len(f.Statuses) > 0 && !slices.Contains(f.Statuses, r.Status) {
			continue
		}
		if f.TaskID != "" && r.TaskID != f.TaskID || f.RequesterID != "" && r.RequesterID != f.RequesterID {
			continue
		}
		if !before.IsZero() && (r.Deadline.IsZero() || !r.Deadline.Before(before)) {
			continue
		}
		if !after.IsZero() || f.AfterID != "" {
			if c := r.CreatedAt.Compare(after); c < 0 || (c == 0 && r.ID <= f.AfterID) {
				continue
			}
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *workflow.Run) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out
}

func runIDs(rs []*workflow.Run) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

func testListRuns(t *testing.T, s workflow.Store) {
	all := listFixture(t, s)
	waiting := []workflow.Status{workflow.StatusWaitingApproval}
	cases := []struct {
		name string
		f    workflow.RunFilter
		want []string // spelled out, and checked against referenceList too
	}{
		{"everything oldest first, ties by id", workflow.RunFilter{},
			[]string{"r00", "r01", "r02", "r03", "r04", "r05", "r06", "r07", "r08", "r09", "r10"}},
		{"one status", workflow.RunFilter{Statuses: waiting},
			[]string{"r00", "r02", "r03", "r05", "r07", "r09"}},
		{"several statuses", workflow.RunFilter{Statuses: []workflow.Status{workflow.StatusNeedsAttention, workflow.StatusDone}},
			[]string{"r06", "r08"}},
		{"a status nobody has", workflow.RunFilter{Statuses: []workflow.Status{workflow.StatusCancelled}}, nil},
		{"deadline strictly before, zero deadlines never", workflow.RunFilter{DeadlineBefore: odd.Add(5 * time.Hour)},
			[]string{"r00", "r07", "r08", "r10"}},
		{"status and deadline", workflow.RunFilter{Statuses: waiting, DeadlineBefore: odd.Add(5*time.Hour + time.Millisecond)},
			[]string{"r00", "r03", "r07"}},
		{"limit", workflow.RunFilter{Limit: 3}, []string{"r00", "r01", "r02"}},
		{"cursor inside a tie", workflow.RunFilter{AfterCreated: odd.Add(time.Minute), AfterID: "r02"},
			[]string{"r03", "r04", "r05", "r06", "r07", "r08", "r09", "r10"}},
		{"cursor, status and limit", workflow.RunFilter{Statuses: waiting, AfterCreated: odd.Add(time.Minute), AfterID: "r03", Limit: 2},
			[]string{"r05", "r07"}},
		{"cursor past the end", workflow.RunFilter{AfterCreated: odd.Add(7 * time.Minute), AfterID: "r10"}, nil},
		{"one task", workflow.RunFilter{TaskID: "T-1"}, []string{"r02", "r05", "r09"}},
		{"a task nobody has", workflow.RunFilter{TaskID: "T-9"}, nil},
		{"one requester", workflow.RunFilter{RequesterID: "agent:a"}, []string{"r00", "r02", "r06", "r10"}},
		{"task and requester", workflow.RunFilter{TaskID: "T-1", RequesterID: "agent:a"}, []string{"r02"}},
		{"requester, status, cursor and limit", workflow.RunFilter{RequesterID: "agent:b", Statuses: waiting,
			AfterCreated: odd.Add(time.Minute), AfterID: "r03", Limit: 2}, []string{"r05", "r07"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if ref := runIDs(referenceList(all, tc.f)); !slices.Equal(ref, tc.want) {
				t.Fatalf("the test disagrees with itself: reference %v, spelled out %v", ref, tc.want)
			}
			got := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.Run, error) {
				return tx.ListRuns(ctx, tc.f)
			})
			if ids := runIDs(got); !slices.Equal(ids, tc.want) {
				t.Errorf("ListRuns(%+v) = %v, want %v", tc.f, ids, tc.want)
			}
			for _, r := range got {
				i := slices.IndexFunc(all, func(w *workflow.Run) bool { return w.ID == r.ID })
				if i >= 0 {
					checkSame(t, "listed run "+r.ID, all[i], r)
				}
			}
		})
	}
}

// testListRunHeads holds ListRunHeads to ListRuns, each run with its
// checkpoint at the run's seq: not an earlier one, and none when it is
// missing; and with the base that checkpoint names: none when it names
// none or the base is missing.
func testListRunHeads(t *testing.T, s workflow.Store) {
	all := listFixture(t, s)
	heads := map[string]*workflow.Checkpoint{}
	bases := map[string]*workflow.Checkpoint{}
	update(t, s, func(ctx context.Context, tx workflow.Tx) error {
		for _, c := range []struct {
			id              string
			seqs, row, base int64 // base: of the checkpoint at row
		}{{"r02", 2, 2, 1}, {"r03", 1, 1, 7}, {"r05", 1, 2, 0}, {"r09", 3, 3, 2}} {
			written := map[int64]*workflow.Checkpoint{}
			for seq := int64(1); seq <= c.seqs; seq++ {
				cp := &workflow.Checkpoint{RunID: c.id, Seq: seq, SchemaVersion: workflow.SchemaVersion,
					State: []byte(fmt.Sprintf(`{"run":%q,"seq":%d}`, c.id, seq)), PrevHash: fmt.Sprintf("prev-%d", seq),
					CreatedAt: odd.Add(time.Duration(seq) * time.Second)}
				if seq == 1 {
					cp.Seal = workflow.Seal{KeyID: "k1", MAC: "mac-" + c.id}
				}
				if seq == c.row {
					cp.BaseSeq = c.base
				}
				cp.Hash = workflow.CheckpointHash(cp)
				if err := tx.AppendCheckpoint(ctx, cp); err != nil {
					return err
				}
				written[seq] = stored(cp)
				if seq == c.row {
					heads[c.id] = stored(cp)
				}
			}
			if b := written[c.base]; b != nil && heads[c.id] != nil {
				bases[c.id] = b
			}
			i := slices.IndexFunc(all, func(r *workflow.Run) bool { return r.ID == c.id })
			r := all[i]
			r.Seq = c.row
			if err := tx.UpdateRun(ctx, r); err != nil {
				return err
			}
			all[i] = stored(r)
		}
		return nil
	})
	waiting := []workflow.Status{workflow.StatusWaitingApproval}
	for _, tc := range []struct {
		name string
		f    workflow.RunFilter
	}{
		{"everything", workflow.RunFilter{}},
		{"one status", workflow.RunFilter{Statuses: waiting}},
		{"status and limit", workflow.RunFilter{Statuses: waiting, Limit: 3}},
		{"cursor, status and limit", workflow.RunFilter{Statuses: waiting, AfterCreated: odd.Add(time.Minute), AfterID: "r02", Limit: 2}},
		{"deadline", workflow.RunFilter{DeadlineBefore: odd.Add(5*time.Hour + time.Millisecond)}},
	} {
		f := tc.f
		t.Run(tc.name, func(t *testing.T) {
			want := referenceList(all, f)
			got := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.RunHead, error) {
				return tx.ListRunHeads(ctx, f)
			})
			if len(got) != len(want) {
				t.Fatalf("ListRunHeads(%+v): %d runs, want %v", f, len(got), runIDs(want))
			}
			for i, h := range got {
				checkSame(t, "listed run "+want[i].ID, want[i], h.Run)
				switch w := heads[h.Run.ID]; {
				case w == nil && h.Head != nil:
					t.Errorf("run %s: head %d, want none", h.Run.ID, h.Head.Seq)
				case w != nil && h.Head == nil:
					t.Errorf("run %s: no head, want checkpoint %d", h.Run.ID, w.Seq)
				case w != nil:
					checkSame(t, "head of "+h.Run.ID, w, h.Head)
				}
				switch w := bases[h.Run.ID]; {
				case w == nil && h.Base != nil:
					t.Errorf("run %s: base %d, want none", h.Run.ID, h.Base.Seq)
				case w != nil && h.Base == nil:
					t.Errorf("run %s: no base, want checkpoint %d", h.Run.ID, w.Seq)
				case w != nil:
					checkSame(t, "base of "+h.Run.ID, w, h.Base)
				}
			}
		})
	}
}

func testListRunsPagination(t *testing.T, s workflow.Store) {
	all := listFixture(t, s)
	for _, f := range []workflow.RunFilter{
		{Limit: 1},
		{Limit: 3},
		{Statuses: []workflow.Status{workflow.StatusWaitingApproval}, Limit: 2},
		{DeadlineBefore: odd.Add(6 * time.Hour), Limit: 2},
	} {
		t.Run(fmt.Sprintf("%v limit %d", f.Statuses, f.Limit), func(t *testing.T) {
			want := runIDs(referenceList(all, workflow.RunFilter{Statuses: f.Statuses, DeadlineBefore: f.DeadlineBefore}))
			var got []string
			for page := 0; ; page++ {
				if page > len(all) {
					t.Fatalf("pagination does not end; so far %v", got)
				}
				rs := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.Run, error) {
					return tx.ListRuns(ctx, f)
				})
				if len(rs) > f.Limit {
					t.Fatalf("page %d has %d runs, limit %d", page, len(rs), f.Limit)
				}
				if len(rs) == 0 {
					break
				}
				got = append(got, runIDs(rs)...)
				last := rs[len(rs)-1]
				f.AfterCreated, f.AfterID = last.CreatedAt, last.ID
			}
			if !slices.Equal(got, want) {
				t.Errorf("pages joined = %v, want %v", got, want)
			}
		})
	}
}

func testDueOutbox(t *testing.T, s workflow.Store) {
	now := base
	specs := []struct {
		name string
		next time.Time
	}{
		{"an hour late", now.Add(-time.Hour)},
		{"in a second", now.Add(time.Second)},
		{"no next attempt", time.Time{}},
		{"exactly now", now},
		{"delivered", now.Add(-2 * time.Hour)},
		{"ten minutes late", now.Add(-10 * time.Minute)},
	}
	ids := map[string]int64{}
	msgs := map[string]*workflow.OutboxMessage{}
	update(t, s, func(ctx context.Context, tx workflow.Tx) error {
		for _, sp := range specs {
			m := &workflow.OutboxMessage{RunID: "run-1", Kind: workflow.OutboxKind(sp.name), NextAttempt: sp.next, CreatedAt: now}
			if err := tx.EnqueueOutbox(ctx, m); err != nil {
				return err
			}
			ids[sp.name], msgs[sp.name] = m.ID, m
		}
		d := msgs["delivered"]
		d.DeliveredAt = now.Add(-time.Hour)
		return tx.UpdateOutbox(ctx, d)
	})
	due := func(now time.Time, limit int) []string {
		t.Helper()
		ms := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.OutboxMessage, error) {
			return tx.DueOutbox(ctx, now, limit)
		})
		kinds := make([]string, len(ms))
		for i, m := range ms {
			kinds[i] = string(m.Kind)
		}
		return kinds
	}
	cases := []struct {
		name  string
		now   time.Time
		limit int
		want  []string
	}{
		{"due and undelivered, oldest first", now, 10,
			[]string{"an hour late", "no next attempt", "exactly now", "ten minutes late"}},
		{"at most limit", now, 2, []string{"an hour late", "no next attempt"}},
		{"a second later", now.Add(time.Second), 10,
			[]string{"an hour late", "in a second", "no next attempt", "exactly now", "ten minutes late"}},
		{"a millisecond earlier", now.Add(-time.Millisecond), 10,
			[]string{"an hour late", "no next attempt", "ten minutes late"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := due(tc.now, tc.limit); !slices.Equal(got, tc.want) {
				t.Errorf("DueOutbox(%s, %d) = %q, want %q", showTime(tc.now), tc.limit, got, tc.want)
			}
		})
	}
	t.Run("delivered leaves the queue", func(t *testing.T) {
		m := msgs["an hour late"]
		m.DeliveredAt = now
		m.Attempts++
		update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.UpdateOutbox(ctx, m) })
		want := []string{"no next attempt", "exactly now", "ten minutes late"}
		if got := due(now, 10); !slices.Equal(got, want) {
			t.Errorf("DueOutbox = %q, want %q", got, want)
		}
	})
	t.Run("ids in enqueue order", func(t *testing.T) {
		for i := 1; i < len(specs); i++ {
			if a, b := ids[specs[i-1].name], ids[specs[i].name]; a >= b {
				t.Errorf("message %q got id %d, not after %q's %d", specs[i].name, b, specs[i-1].name, a)
			}
		}
	})
}

func testListOutbox(t *testing.T, s workflow.Store) {
	now := base
	specs := []struct {
		name, kind, lastErr string
		next                time.Time
		delivered           bool
	}{
		{"slack due", "slack.post", "", now.Add(-time.Minute), false},
		{"callback failing, later", "callback", "503 Service Unavailable", now.Add(time.Hour), false},
		{"callback due", "callback", "", now, false},
		{"callback delivered", "callback", "", now.Add(-time.Hour), true},
		{"slack failing, due", "slack.update", "timeout", now.Add(-time.Second), false},
		{"callback failing, due", "callback", "connection refused", now.Add(-time.Second), false},
	}
	ids := map[string]int64{}
	update(t, s, func(ctx context.Context, tx workflow.Tx) error {
		for _, sp := range specs {
			run := "run-1"
			if sp.name == "callback due" {
				run = "run-2"
			}
			m := &workflow.OutboxMessage{RunID: run, Kind: workflow.OutboxKind(sp.kind), Payload: []byte(sp.name), NextAttempt: sp.next,
				LastError: sp.lastErr, CreatedAt: now}
			if err := tx.EnqueueOutbox(ctx, m); err != nil {
				return err
			}
			ids[sp.name] = m.ID
			if sp.delivered {
				m.DeliveredAt = now
				if err := tx.UpdateOutbox(ctx, m); err != nil {
					return err
				}
			}
		}
		return nil
	})
	cases := []struct {
		name   string
		filter func() workflow.OutboxFilter
		want   []string
	}{
		{"every undelivered row", func() workflow.OutboxFilter { return workflow.OutboxFilter{} },
			[]string{"slack due", "callback failing, later", "callback due", "slack failing, due", "callback failing, due"}},
		{"one kind", func() workflow.OutboxFilter { return workflow.OutboxFilter{Kinds: []workflow.OutboxKind{"callback"}} },
			[]string{"callback failing, later", "callback due", "callback failing, due"}},
		{"two kinds", func() workflow.OutboxFilter {
			return workflow.OutboxFilter{Kinds: []workflow.OutboxKind{"slack.post", "slack.update"}}
		}, []string{"slack due", "slack failing, due"}},
		{"due by now", func() workflow.OutboxFilter {
			return workflow.OutboxFilter{Kinds: []workflow.OutboxKind{"callback"}, DueBy: now}
		},
			[]string{"callback due", "callback failing, due"}},
		{"failing", func() workflow.OutboxFilter { return workflow.OutboxFilter{Failing: true} },
			[]string{"callback failing, later", "slack failing, due", "callback failing, due"}},
		{"after a cursor, at most limit", func() workflow.OutboxFilter {
			return workflow.OutboxFilter{AfterID: ids["callback failing, later"], Limit: 2}
		}, []string{"callback due", "slack failing, due"}},
		{"the oldest of each run", func() workflow.OutboxFilter { return workflow.OutboxFilter{Heads: true} },
			[]string{"slack due", "callback due"}},
		{"the oldest callback of each run, if due", func() workflow.OutboxFilter {
			return workflow.OutboxFilter{Kinds: []workflow.OutboxKind{"callback"}, Heads: true, DueBy: now}
		}, []string{"callback due"}},
		{"the oldest Slack message of each run, if failing", func() workflow.OutboxFilter {
			return workflow.OutboxFilter{Kinds: []workflow.OutboxKind{"slack.post", "slack.update"}, Heads: true, Failing: true}
		}, []string{}},
		{"one run", func() workflow.OutboxFilter {
			return workflow.OutboxFilter{Kinds: []workflow.OutboxKind{"callback"}, RunID: "run-1", Limit: 1}
		},
			[]string{"callback failing, later"}},
		{"no such kind", func() workflow.OutboxFilter { return workflow.OutboxFilter{Kinds: []workflow.OutboxKind{"email"}} }, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.OutboxMessage, error) {
				return tx.ListOutbox(ctx, tc.filter())
			})
			got := make([]string, len(ms))
			for i, m := range ms {
				got[i] = string(m.Payload)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ListOutbox = %q, want %q", got, tc.want)
			}
		})
	}
}

// --- audit

func testAuditChain(t *testing.T, s workflow.Store) {
	const perTx, txs = 5, 12
	runs := []string{"run-a", "run-b", "run-c", ""} // "" is an event about no run
	var appended []workflow.AuditEvent
	n := 0
	for range txs {
		update(t, s, func(ctx context.Context, tx workflow.Tx) error {
			for range perTx {
				e := &workflow.AuditEvent{RunID: runs[n%len(runs)], Actor: fmt.Sprintf("actor-%d", n%3),
					Action: "step", Detail: []byte(fmt.Sprintf(`{"n":%d}`, n)), At: odd.Add(time.Duration(n) * time.Second)}
				if err := tx.AppendAudit(ctx, e, nil); err != nil {
					return err
				}
				appended = append(appended, *e)
				n++
			}
			return nil
		})
	}
	// A rolled-back append must leave no fork in its run's chain (it may
	// leave a gap in the seqs).
	err := s.Update(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
		if err := tx.AppendAudit(ctx, &workflow.AuditEvent{RunID: "run-a", Action: "rolled back"}, nil); err != nil {
			return err
		}
		return errBoom
	})
	wantErr(t, "rolled-back append", err, errBoom)
	last := &workflow.AuditEvent{RunID: "run-a", Action: "last", At: odd}
	update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.AppendAudit(ctx, last, nil) })
	appended = append(appended, *last)

	t.Run("the appender is told seq, prev and hash", func(t *testing.T) {
		checkChain(t, pointers(appended))
	})
	all := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.AuditEvent, error) {
		return tx.AuditEvents(ctx, workflow.AuditFilter{})
	})
	t.Run("stored chain", func(t *testing.T) {
		if len(all) != len(appended) {
			t.Fatalf("AuditEvents = %d events, want %d", len(all), len(appended))
		}
		checkChain(t, all)
		for i := range all {
			checkSame(t, fmt.Sprintf("event %d", all[i].Seq), stored(&appended[i]), all[i])
		}
	})
	t.Run("the newest first", func(t *testing.T) {
		got := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.AuditEvent, error) {
			return tx.AuditEvents(ctx, workflow.AuditFilter{Newest: true, Limit: 2})
		})
		if n := len(all); len(got) != 2 || got[0].Seq != all[n-1].Seq || got[1].Seq != all[n-2].Seq {
			t.Errorf("AuditEvents(newest, 2) = %v, want the last two of %v", seqsOf(got), seqsOf(all))
		}
	})
	for _, run := range runs[:3] {
		t.Run("events of "+run, func(t *testing.T) {
			var want []int64
			for _, e := range all {
				if e.RunID == run {
					want = append(want, e.Seq)
				}
			}
			got := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.AuditEvent, error) {
				return tx.AuditEvents(ctx, workflow.AuditFilter{RunID: run})
			})
			if seqs := seqsOf(got); !slices.Equal(seqs, want) {
				t.Errorf("AuditEvents(run %s) = %v, want %v", run, seqs, want)
			}
			// Paged with AfterSeq and Limit, the same events.
			var paged []int64
			after := int64(0)
			for page := 0; page <= len(all); page++ {
				es := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.AuditEvent, error) {
					return tx.AuditEvents(ctx, workflow.AuditFilter{RunID: run, AfterSeq: after, Limit: 4})
				})
				if len(es) > 4 {
					t.Fatalf("page of %d events, limit 4", len(es))
				}
				if len(es) == 0 {
					break
				}
				paged = append(paged, seqsOf(es)...)
				after = es[len(es)-1].Seq
			}
			if !slices.Equal(paged, want) {
				t.Errorf("paged AuditEvents(run %s) = %v, want %v", run, paged, want)
			}
		})
	}
	t.Run("each run's head is its last event", func(t *testing.T) {
		want := map[string]*workflow.AuditEvent{}
		for _, e := range all {
			want[e.RunID] = e
		}
		heads := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.AuditRunHead, error) {
			return tx.AuditRunHeads(ctx)
		})
		if len(heads) != len(want) {
			t.Fatalf("AuditRunHeads = %d heads, want %d", len(heads), len(want))
		}
		for _, h := range heads {
			if e := want[h.RunID]; e == nil || h.Seq != e.Seq || h.Hash != e.Hash {
				t.Errorf("head of run %q = %d %s, want its last event %v", h.RunID, h.Seq, h.Hash, e)
			}
			one := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.AuditRunHead, error) {
				return tx.AuditRunHead(ctx, h.RunID)
			})
			checkSame(t, "AuditRunHead", h, one)
		}
		err := s.View(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
			_, err := tx.AuditRunHead(ctx, "nope")
			return err
		})
		wantErr(t, "AuditRunHead of a run without events", err, workflow.ErrNotFound)
	})
	t.Run("anchors", func(t *testing.T) {
		var first []workflow.AnchoredHead
		update(t, s, func(ctx context.Context, tx workflow.Tx) error {
			if _, err := tx.LatestAnchor(ctx); !errors.Is(err, workflow.ErrNotFound) {
				return fmt.Errorf("LatestAnchor before any: %v, want ErrNotFound", err)
			}
			var err error
			if first, err = tx.AnchorHeads(ctx); err != nil {
				return err
			}
			return tx.InsertAnchor(ctx, &workflow.AuditAnchor{ID: 1, At: odd, Heads: first, Hash: "h1"})
		})
		if len(first) != 4 || first[0].RunID != "" || first[1].RunID != "run-a" {
			t.Fatalf("AnchorHeads = %v, want the four runs' heads by run id", first)
		}
		var second []workflow.AnchoredHead
		update(t, s, func(ctx context.Context, tx workflow.Tx) error {
			if err := tx.AppendAudit(ctx, &workflow.AuditEvent{RunID: "run-b", Action: "later"}, nil); err != nil {
				return err
			}
			var err error
			second, err = tx.AnchorHeads(ctx)
			return err
		})
		if len(second) != 1 || second[0].RunID != "run-b" {
			t.Errorf("AnchorHeads after one append = %v, want run-b's head alone", second)
		}
		err := s.Update(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
			return tx.InsertAnchor(ctx, &workflow.AuditAnchor{ID: 1, At: odd, Hash: "again"})
		})
		wantErr(t, "a second anchor 1", err, workflow.ErrDuplicate)
		got := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.AuditAnchor, error) {
			return tx.AuditAnchors(ctx)
		})
		if len(got) != 1 {
			t.Fatalf("AuditAnchors = %d anchors, want 1", len(got))
		}
		checkSame(t, "AuditAnchor", &workflow.AuditAnchor{ID: 1, At: odd.Truncate(time.Millisecond).UTC(), Heads: first, Hash: "h1"}, got[0])
	})
}

func pointers[T any](vs []T) []*T {
	out := make([]*T, len(vs))
	for i := range vs {
		out[i] = &vs[i]
	}
	return out
}

func seqsOf(es []*workflow.AuditEvent) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

// checkChain checks that es is the whole chain from its start: seqs 1, 2, 3…,
// each PrevHash the previous Hash, each Hash what AuditHash says.
func checkChain(t *testing.T, es []*workflow.AuditEvent) {
	t.Helper()
	CheckAuditChains(t, es)
}

// CheckAuditChains checks events appended through the contract, in seq
// order: seqs increase, each event is chained per run (PrevHash the hash of
// the run's event before it, "" for its first) and matches its hash.
func CheckAuditChains(t testing.TB, es []*workflow.AuditEvent) {
	t.Helper()
	prev := map[string]string{}
	var last int64
	for _, e := range es {
		if e.Seq <= last {
			t.Errorf("event %d follows event %d: seqs must increase", e.Seq, last)
		}
		last = e.Seq
		if e.Format != workflow.AuditPerRun {
			t.Errorf("event %d has format %d, want %d (per run)", e.Seq, e.Format, workflow.AuditPerRun)
		}
		if e.PrevHash != prev[e.RunID] {
			t.Errorf("event %d of run %q: PrevHash %q, want the run's previous hash %q", e.Seq, e.RunID, e.PrevHash, prev[e.RunID])
		}
		if h := workflow.AuditHash(e); e.Hash != h {
			t.Errorf("event %d: Hash %q, want AuditHash %q", e.Seq, e.Hash, h)
		}
		prev[e.RunID] = e.Hash
	}
}

// --- transactions

var errBoom = errors.New("boom")

// writeEverything writes one of each record about run id, as a transition would.
func writeEverything(ctx context.Context, tx workflow.Tx, id string) error {
	return errors.Join(
		tx.InsertRun(ctx, &workflow.Run{ID: id, Status: workflow.StatusRunning, IdempotencyKey: "key-" + id}),
		tx.AppendCheckpoint(ctx, &workflow.Checkpoint{RunID: id, Seq: 1, SchemaVersion: 1}),
		tx.InsertRequest(ctx, &workflow.ApprovalRequest{ID: "req-" + id, RunID: id, Status: workflow.RequestPending}),
		tx.InsertDecision(ctx, &workflow.Decision{RequestID: "req-" + id, RunID: id, ApproverID: "U1", Verdict: workflow.VerdictApprove}),
		tx.InsertOperation(ctx, &workflow.Operation{Key: "op-" + id, RunID: id, Status: workflow.OpPending}),
		tx.EnqueueOutbox(ctx, &workflow.OutboxMessage{RunID: id, Kind: "slack.post"}),
		tx.AppendAudit(ctx, &workflow.AuditEvent{RunID: id, Action: "start"}, nil),
	)
}

// checkNothingOf checks that no record about run id exists.
func checkNothingOf(t *testing.T, s workflow.Store, id string) {
	t.Helper()
	view(t, s, func(ctx context.Context, tx workflow.Tx) error {
		_, err := tx.Run(ctx, id)
		wantErr(t, "Run", err, workflow.ErrNotFound)
		_, err = tx.RunByIdempotencyKey(ctx, "", "key-"+id)
		wantErr(t, "RunByIdempotencyKey", err, workflow.ErrNotFound)
		_, err = tx.Request(ctx, "req-"+id)
		wantErr(t, "Request", err, workflow.ErrNotFound)
		_, err = tx.Operation(ctx, "op-"+id)
		wantErr(t, "Operation", err, workflow.ErrNotFound)
		counts := map[string]func() (int, error){
			"checkpoints": func() (int, error) { v, err := tx.Checkpoints(ctx, id); return len(v), err },
			"decisions":   func() (int, error) { v, err := tx.Decisions(ctx, id); return len(v), err },
			"outbox":      func() (int, error) { v, err := tx.DueOutbox(ctx, base.Add(time.Hour), 1000); return len(v), err },
			"audit":       func() (int, error) { v, err := tx.AuditEvents(ctx, workflow.AuditFilter{}); return len(v), err },
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

func testRollbackOnError(t *testing.T, s workflow.Store) {
	t.Run("inserts", func(t *testing.T) {
		err := s.Update(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
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
		err := s.Update(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
			c := *r
			c.Status, c.Step = workflow.StatusDone, 9
			if err := tx.UpdateRun(ctx, &c); err != nil {
				return err
			}
			return errBoom
		})
		wantErr(t, "Update", err, errBoom)
		got := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.Run, error) { return tx.Run(ctx, "run-kept") })
		checkSame(t, "run after a rolled-back update", before, got)
	})
}

func testRollbackOnPanic(t *testing.T, s workflow.Store) {
	recovered := func() (v any) {
		defer func() { v = recover() }()
		_ = s.Update(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
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
	if err := s.Update(ctx, func(ctx context.Context, tx workflow.Tx) error { return writeEverything(ctx, tx, "run-after") }); err != nil {
		t.Fatalf("update after a panic: %v", err)
	}
}

func testCancelledContext(t *testing.T, s workflow.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Update(ctx, func(ctx context.Context, tx workflow.Tx) error { return writeEverything(ctx, tx, "run-cancelled") })
	wantErr(t, "Update with a cancelled context", err, context.Canceled)
	checkNothingOf(t, s, "run-cancelled")

	// Cancelled half way: whatever fn wrote is not committed, even if fn goes on
	// to return nil.
	ctx, cancel = context.WithCancel(t.Context())
	err = s.Update(ctx, func(ctx context.Context, tx workflow.Tx) error {
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
func testTxUsableAfterDuplicate(t *testing.T, s workflow.Store) {
	seedRun(t, s, "run-first")
	update(t, s, func(ctx context.Context, tx workflow.Tx) error {
		err := tx.InsertRun(ctx, &workflow.Run{ID: "run-first", Status: workflow.StatusRunning})
		if !errors.Is(err, workflow.ErrDuplicate) {
			return fmt.Errorf("second insert: got %v, want ErrDuplicate", err)
		}
		if _, err := tx.Run(ctx, "run-first"); err != nil {
			return fmt.Errorf("read after ErrDuplicate: %w", err)
		}
		return tx.InsertRun(ctx, &workflow.Run{ID: "run-second", Status: workflow.StatusRunning, CreatedAt: base.Add(time.Second)})
	})
	got := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.Run, error) {
		return tx.ListRuns(ctx, workflow.RunFilter{})
	})
	if ids := runIDs(got); !slices.Equal(ids, []string{"run-first", "run-second"}) {
		t.Errorf("runs after the transaction = %v, want [run-first run-second]", ids)
	}
}

// testViewSnapshot: a View reads one snapshot, and an Update commits while the
// View is open instead of waiting for it.
func testViewSnapshot(t *testing.T, s workflow.Store) {
	seedRun(t, s, "run-1")
	view(t, s, func(ctx context.Context, tx workflow.Tx) error {
		before, err := tx.Run(ctx, "run-1")
		if err != nil {
			return err
		}
		uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err = s.Update(uctx, func(ctx context.Context, tx workflow.Tx) error {
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
	got := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.Run, error) { return tx.Run(ctx, "run-1") })
	if got.Version != 2 || got.Step != 99 {
		t.Errorf("after the view: version %d step %d, want 2 and 99", got.Version, got.Step)
	}
}

func testViewIsReadOnly(t *testing.T, s workflow.Store) {
	_ = s.View(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
		if err := tx.InsertRun(ctx, &workflow.Run{ID: "run-in-view", Status: workflow.StatusRunning}); err == nil {
			t.Error("InsertRun inside View succeeded; want an error")
		}
		return nil
	})
	err := s.View(t.Context(), func(ctx context.Context, tx workflow.Tx) error { _, err := tx.Run(ctx, "run-in-view"); return err })
	wantErr(t, "run written in a View", err, workflow.ErrNotFound)
}

// --- concurrency

// testConcurrentCompareAndSet: writers read the run, then compare-and-set it in a
// second transaction. Every attempt either wins or is told ErrConflict, and the
// version counts exactly the wins.
func testConcurrentCompareAndSet(t *testing.T, s workflow.Store) {
	const writers, attempts = 8, 50
	seedRun(t, s, "run-hot")
	var wins, conflicts atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			<-start
			for range attempts {
				var r *workflow.Run
				err := s.View(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
					var err error
					r, err = tx.Run(ctx, "run-hot")
					return err
				})
				if err != nil {
					t.Errorf("writer %d: read: %v", w, err)
					return
				}
				err = s.Update(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
					r.Step++
					r.LeaseOwner = fmt.Sprintf("writer-%d", w)
					return tx.UpdateRun(ctx, r)
				})
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, workflow.ErrConflict):
					conflicts.Add(1)
				default:
					t.Errorf("writer %d: update: %v", w, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	won, lost := wins.Load(), conflicts.Load()
	if won+lost != writers*attempts {
		t.Errorf("wins %d + conflicts %d = %d, want %d attempts", won, lost, won+lost, writers*attempts)
	}
	if won == 0 {
		t.Errorf("no update won")
	}
	got := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.Run, error) { return tx.Run(ctx, "run-hot") })
	if got.Version != 1+won {
		t.Errorf("final version %d, want 1 + %d wins", got.Version, won)
	}
	if int64(got.Step) != won {
		t.Errorf("final step %d, want %d: a lost update was applied or a won one lost", got.Step, won)
	}
	t.Logf("%d wins, %d conflicts", won, lost)
}

// testConcurrentDecisions: two approvers' clicks race on one request; exactly one
// decision is stored per approver, and the loser is told ErrDuplicate.
func testConcurrentDecisions(t *testing.T, s workflow.Store) {
	const rounds = 20
	seedRun(t, s, "run-1")
	seedRequest(t, s, "run-1", "req-1")
	for round := range rounds {
		approver := fmt.Sprintf("U%02d", round)
		start := make(chan struct{})
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				<-start
				errs[i] = s.Update(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
					return tx.InsertDecision(ctx, &workflow.Decision{RequestID: "req-1", RunID: "run-1", ApproverID: approver,
						Verdict: workflow.VerdictApprove, Reason: fmt.Sprintf("click %d", i), At: base})
				})
			})
		}
		close(start)
		wg.Wait()
		won, dup := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case errors.Is(err, workflow.ErrDuplicate):
				dup++
			default:
				t.Errorf("round %d: %v", round, err)
			}
		}
		if won != 1 || dup != 1 {
			t.Errorf("round %d: %d won, %d told duplicate; want 1 and 1", round, won, dup)
		}
	}
	ds := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.Decision, error) {
		return tx.Decisions(ctx, "run-1")
	})
	if len(ds) != rounds {
		t.Errorf("stored %d decisions, want %d (one per approver)", len(ds), rounds)
	}
}

// testLoadRun: LoadRun gives what Run and each list method give, the parts
// asked for and no others, in a View and in an Update; ErrNotFound for a run
// that does not exist.
func testLoadRun(t *testing.T, s workflow.Store) {
	for _, id := range []string{"run-1", "run-2"} {
		update(t, s, func(ctx context.Context, tx workflow.Tx) error { return writeEverything(ctx, tx, id) })
	}
	all := workflow.RunParts{Checkpoints: true, Requests: true, Decisions: true, Operations: true, Audit: true}
	for _, parts := range []workflow.RunParts{{}, all, {Operations: true, Audit: true}} {
		for _, write := range []bool{false, true} {
			var got, want *workflow.RunBundle
			fn := func(ctx context.Context, tx workflow.Tx) error {
				var err error
				if got, err = tx.LoadRun(ctx, "run-1", parts); err != nil {
					return err
				}
				want = &workflow.RunBundle{}
				if want.Run, err = tx.Run(ctx, "run-1"); err != nil {
					return err
				}
				if parts.Checkpoints {
					want.Checkpoints, err = tx.Checkpoints(ctx, "run-1")
				}
				if err == nil && parts.Requests {
					want.Requests, err = tx.RequestsForRun(ctx, "run-1")
				}
				if err == nil && parts.Decisions {
					want.Decisions, err = tx.Decisions(ctx, "run-1")
				}
				if err == nil && parts.Operations {
					want.Operations, err = tx.Operations(ctx, "run-1")
				}
				if err == nil && parts.Audit {
					want.Audit, err = tx.AuditEvents(ctx, workflow.AuditFilter{RunID: "run-1"})
					if err == nil {
						want.AuditHead, err = tx.AuditRunHead(ctx, "run-1")
					}
				}
				return err
			}
			if write {
				update(t, s, fn)
			} else if err := s.View(t.Context(), fn); err != nil {
				t.Fatal(err)
			}
			checkSame(t, fmt.Sprintf("LoadRun(%+v), write %v", parts, write), want, got)
		}
	}
	err := s.View(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
		_, err := tx.LoadRun(ctx, "nope", all)
		return err
	})
	wantErr(t, "LoadRun of a missing run", err, workflow.ErrNotFound)
}
