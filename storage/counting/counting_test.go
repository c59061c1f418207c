package counting

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// fake runs fn with no transaction and commits unless fn fails.
type fake struct{ storage.Store }

func (fake) Update(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	return fn(ctx, nil)
}

// TestCountsWhatCommitted: an Update that returns nil counts, one that
// fails does not, and the error comes back as it was.
func TestCountsWhatCommitted(t *testing.T) {
	s := New(fake{})
	boom := errors.New("boom")
	for _, fail := range []bool{false, true, false} {
		err := s.Update(t.Context(), func(context.Context, storage.Tx) error {
			if fail {
				return boom
			}
			return nil
		})
		if fail != errors.Is(err, boom) {
			t.Fatalf("Update (failing %v) = %v", fail, err)
		}
	}
	if got := s.Commits(); got != 2 {
		t.Fatalf("Commits() = %d, want 2", got)
	}
}

// lister is a store whose View lists after a wait on its clock, and says
// whether its transaction heard LastRead.
type lister struct {
	storage.Store
	took      time.Duration
	heardLast bool
}

func (l *lister) View(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	return fn(ctx, &listerTx{l: l})
}

type listerTx struct {
	storage.Tx
	l *lister
}

func (t *listerTx) ListRuns(context.Context, storage.RunFilter) ([]*record.Run, error) {
	spin(t.l.took)
	return nil, nil
}

func (t *listerTx) ListRunHeads(context.Context, storage.RunFilter) ([]*storage.RunHead, error) {
	spin(t.l.took)
	return nil, nil
}

func (t *listerTx) LastRead() { t.l.heardLast = true }

// spin takes at least d of wall time without sleeping.
func spin(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}

// TestTimesTheListsOfViews: the time a View spends in the store's list
// reads is counted, what fn does around them is not, and LastRead reaches
// the store's transaction.
func TestTimesTheListsOfViews(t *testing.T) {
	inner := &lister{took: 2 * time.Millisecond}
	s := New(inner)
	err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		storage.LastRead(tx)
		if _, err := tx.ListRuns(ctx, storage.RunFilter{}); err != nil {
			return err
		}
		if _, err := tx.ListRunHeads(ctx, storage.RunFilter{}); err != nil {
			return err
		}
		spin(20 * time.Millisecond) // the engine's own work on what it read
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Listed(); got < 4*time.Millisecond || got >= 20*time.Millisecond {
		t.Errorf("Listed() = %v, want the two reads' 4ms and more, without the 20ms around them", got)
	}
	if !inner.heardLast {
		t.Error("LastRead did not reach the store's transaction")
	}
}
