package workflow

import (
	"context"
	"log/slog"
	"time"

	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/seal"
)

// runs is the run transaction: it loads a run and verifies it, stages and
// saves its next checkpoint with the run row and the audit event, keeps the
// lease, and tells the hooks, all inside the one transaction of a
// transition. Everything the engine does to a run goes through it, so one
// owner decides what a transition writes.
type runs struct {
	store storage.Store // sealed and notifying
	in    *seal.Sealer
	clock Clock
	owner string
	ttl   time.Duration
	// tell tells the hooks of a transition, in its transaction (Engine.tell).
	tell func(ctx context.Context, tx storage.Tx, t *Transition) error
	log  *slog.Logger
}

// notify tells the hooks of t, written in tx.
func (rs *runs) notify(ctx context.Context, tx storage.Tx, t *Transition) error {
	if rs.tell == nil {
		return nil
	}
	return rs.tell(ctx, tx, t)
}

// now is the time of a write, at the precision the store keeps.
func (rs *runs) now() time.Time { return rs.clock.Now().UTC().Truncate(time.Millisecond) }
