// Package storagetest is the behaviour suite every storage.Store driver must pass.
// It speaks only the workflow contract, so whatever it proves of one driver holds
// for any other that passes it.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// Run runs the suite. open must return a new, empty store on every call; the
// suite closes it when the (sub)test ends.
func Run(t *testing.T, open func(t *testing.T) storage.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s storage.Store)
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
		{"SaveRunAlongside", testSaveRunAlongside},
		{"SaveRunReserved", testSaveRunReserved},
		{"SaveRunFollowing", testSaveRunFollowing},
		{"SaveRunEvents", testSaveRunEvents},
		{"ListOrder", testListOrder},
		{"ListRuns", testListRuns},
		{"ListRunsByRuleAndText", testListRunsByRuleAndText},
		{"ListRunsPagination", testListRunsPagination},
		{"ListRunHeads", testListRunHeads},
		{"DueOutbox", testDueOutbox},
		{"OutboxOnce", testOutboxOnce},
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
		{"Delegations", testDelegations},
		{"Reviews", testReviews},
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

type txFunc = func(ctx context.Context, tx storage.Tx) error

// --- helpers

func update(t *testing.T, s storage.Store, fn txFunc) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

func view(t *testing.T, s storage.Store, fn txFunc) {
	t.Helper()
	if err := s.View(t.Context(), fn); err != nil {
		t.Fatalf("view: %v", err)
	}
}

// load reads one value in a View.
func load[T any](t *testing.T, s storage.Store, fn func(ctx context.Context, tx storage.Tx) (T, error)) T {
	t.Helper()
	var out T
	view(t, s, func(ctx context.Context, tx storage.Tx) error {
		var err error
		out, err = fn(ctx, tx)
		return err
	})
	return out
}

// seedRun stores a minimal run.
func seedRun(t *testing.T, s storage.Store, id string) *record.Run {
	t.Helper()
	r := &record.Run{ID: id, Workflow: "proposal", Status: record.StatusRunning, CreatedAt: base, UpdatedAt: base}
	update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, r) })
	return r
}

// seedRequest stores a pending approval request of run.
func seedRequest(t *testing.T, s storage.Store, runID, id string) *record.ApprovalRequest {
	t.Helper()
	r := &record.ApprovalRequest{ID: id, RunID: runID, Fingerprint: "fp-" + id, Role: "team_lead", Count: 1,
		Status: record.RequestPending, CreatedAt: base}
	update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertRequest(ctx, r) })
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

func pointers[T any](vs []T) []*T {
	out := make([]*T, len(vs))
	for i := range vs {
		out[i] = &vs[i]
	}
	return out
}
