package counting

import (
	"context"
	"errors"
	"testing"

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
