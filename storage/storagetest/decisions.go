package storagetest

// Approval requests and decisions: their round trips, and deciders racing.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

func testRequestRoundTrip(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-1")
	cases := []struct {
		name string
		req  *record.ApprovalRequest
	}{
		{"every field set", &record.ApprovalRequest{
			ID: "req-full", RunID: "run-1", Fingerprint: "fp", Rule: "large-refund", PolicyRevision: "2026-11-29.1",
			Risk: "high", Role: "team_lead", Count: 2, SelfApproval: true, Edit: true, RequesterID: "agent:resolver",
			Deadline: odd.Add(72 * time.Hour), Status: record.RequestApproved, DecidedBy: "U0LEAD0001",
			DecidedAt: odd.Add(time.Hour),
			Version:   9, CreatedAt: odd,
		}},
		{"zero times and false flags", &record.ApprovalRequest{ID: "req-min", RunID: "run-1", Status: record.RequestPending}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.req
			update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertRequest(ctx, in) })
			if in.Version != 1 {
				t.Errorf("after InsertRequest Version = %d, want 1", in.Version)
			}
			got := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.ApprovalRequest, error) {
				return tx.Request(ctx, in.ID)
			})
			checkSame(t, "Request", stored(in), got)
		})
	}
}

func testDecisionRoundTrip(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-1")
	seedRequest(t, s, "run-1", "req-1")
	var ids []int64
	for i, p := range payloads {
		t.Run(p.name, func(t *testing.T) {
			in := &record.Decision{ID: 12345, RequestID: "req-1", RunID: "run-1", ApproverID: fmt.Sprintf("U%d", i),
				ApproverName: "Lee", Role: "team_lead", Verdict: record.VerdictApprove, Reason: "ok",
				EditedArgs: p.b, Via: "slack", PayloadDigest: "d1g35t", At: odd.Add(time.Duration(i) * time.Second)}
			update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertDecision(ctx, in) })
			if in.ID <= 0 || slices.Contains(ids, in.ID) {
				t.Errorf("InsertDecision set ID %d; want a new positive id (earlier: %v)", in.ID, ids)
			}
			ids = append(ids, in.ID)
			ds := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Decision, error) {
				return tx.Decisions(ctx, "run-1")
			})
			if len(ds) != i+1 {
				t.Fatalf("Decisions: got %d, want %d", len(ds), i+1)
			}
			checkSame(t, "Decision", stored(in), ds[i])
		})
	}
	t.Run("on behalf of someone", func(t *testing.T) {
		in := &record.Decision{RequestID: "req-1", RunID: "run-1", ApproverID: "U-deputy", Role: "manager",
			Verdict: record.VerdictApprove, Via: "slack", At: odd, OnBehalfOf: "U-manager"}
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertDecision(ctx, in) })
		ds := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Decision, error) {
			return tx.Decisions(ctx, "run-1")
		})
		checkSame(t, "Decision", stored(in), ds[len(ds)-1])
	})
	t.Run("reject without edit", func(t *testing.T) {
		in := &record.Decision{RequestID: "req-1", RunID: "run-1", ApproverID: "U-rejecter",
			Verdict: record.VerdictReject, Reason: "amount looks wrong", Via: "cli"}
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertDecision(ctx, in) })
		ds := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Decision, error) {
			return tx.Decisions(ctx, "run-1")
		})
		if len(ds) == 0 {
			t.Fatal("Decisions: none")
		}
		checkSame(t, "Decision", stored(in), ds[len(ds)-1])
	})
}

// testConcurrentDecisions: two approvers' clicks race on one request; exactly one
// decision is stored per approver, and the loser is told ErrDuplicate.
func testConcurrentDecisions(t *testing.T, s storage.Store) {
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
				errs[i] = s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
					return tx.InsertDecision(ctx, &record.Decision{RequestID: "req-1", RunID: "run-1", ApproverID: approver,
						Verdict: record.VerdictApprove, Reason: fmt.Sprintf("click %d", i), At: base})
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
			case errors.Is(err, storage.ErrDuplicate):
				dup++
			default:
				t.Errorf("round %d: %v", round, err)
			}
		}
		if won != 1 || dup != 1 {
			t.Errorf("round %d: %d won, %d told duplicate; want 1 and 1", round, won, dup)
		}
	}
	ds := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Decision, error) {
		return tx.Decisions(ctx, "run-1")
	})
	if len(ds) != rounds {
		t.Errorf("stored %d decisions, want %d (one per approver)", len(ds), rounds)
	}
}
