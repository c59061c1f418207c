package storagetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// testReviews: a forced run's review is written once per run, read back
// with milliseconds in UTC and its seal, listed by status soonest due
// first, and acknowledged by compare-and-set: a stale version loses.
func testReviews(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-1")
	seedRun(t, s, "run-2")
	seedRequest(t, s, "run-1", "req-1")
	seedRequest(t, s, "run-2", "req-2")
	mk := func(run, req string, due time.Time) *record.Review {
		return &record.Review{RunID: run, RequestID: req, Rule: "large-refund", Role: "security", ForcedBy: "U0IC000001",
			Reason: "outage", Due: due, Status: record.ReviewPending, CreatedAt: odd, Seal: record.Seal{KeyID: "k1", MAC: "mac"}}
	}
	later, sooner := mk("run-1", "req-1", odd.Add(24*time.Hour)), mk("run-2", "req-2", odd.Add(time.Hour))
	for _, r := range []*record.Review{later, sooner} {
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertReview(ctx, r) })
		if r.Version != 1 {
			t.Fatalf("version %d after insert", r.Version)
		}
	}
	err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error { return tx.InsertReview(ctx, mk("run-1", "req-1", odd)) })
	if !errors.Is(err, storage.ErrDuplicate) {
		t.Fatalf("a second review of run-1: %v, want ErrDuplicate", err)
	}
	pending := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Review, error) {
		return tx.Reviews(ctx, record.ReviewPending)
	})
	if len(pending) != 2 || pending[0].RunID != "run-2" || pending[1].RunID != "run-1" {
		t.Fatalf("pending %+v, want run-2 then run-1", pending)
	}
	got := pending[1]
	if !got.Due.Equal(odd.Add(24*time.Hour).Truncate(time.Millisecond)) || got.Due.Location() != time.UTC || got.Seal != later.Seal || got.Reason != "outage" {
		t.Fatalf("read back %+v", got)
	}
	stale := *got
	got.Status, got.AcknowledgedBy, got.AcknowledgedAt, got.Note = record.ReviewAcknowledged, "U0SEC00001", odd.Add(time.Hour), "fine"
	update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.UpdateReview(ctx, got) })
	stale.Note = "lost"
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error { return tx.UpdateReview(ctx, &stale) }); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("a stale acknowledge: %v, want ErrConflict", err)
	}
	back := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Review, error) { return tx.Review(ctx, "run-1") })
	if back.Status != record.ReviewAcknowledged || back.AcknowledgedBy != "U0SEC00001" || back.Note != "fine" || back.Version != 2 {
		t.Fatalf("acknowledged %+v", back)
	}
	if p := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Review, error) {
		return tx.Reviews(ctx, record.ReviewPending)
	}); len(p) != 1 || p[0].RunID != "run-2" {
		t.Fatalf("pending after the acknowledge %+v", p)
	}
	if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error { _, err := tx.Review(ctx, "run-3"); return err }); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("review of a run without one: %v", err)
	}
}
