package workflow

import (
	"context"
	"time"

	"github.com/signoff-dev/signoff/storage"
)

// workBatch bounds the runs one round of the execute loop claims, so that a
// backlog is worked through in rounds that each end (and are woken again).
const workBatch = 20

// Loops is the engine's share of a server's background work: executing
// approved runs, woken by every commit that writes a run and otherwise
// looking every poll (a lease of a process that died, a retry after its
// backoff); expiring runs past their deadline every poll, which only time
// makes due; reminding before a deadline, when a rule has remind:, every
// poll; escalating, when a rule has escalate:, every poll; and, when feed is not nil, telling Changes of other processes'
// commits (the feed returns only when ctx ends or it fails, and is started
// again poll later).
func (e *Engine) Loops(poll time.Duration, feed storage.ChangeFeed) []*Loop {
	loops := []*Loop{
		{Name: "execute approved runs", Changes: e.changes, Pace: PaceAfter(poll), Logger: e.log,
			Round: func(ctx context.Context) error { _, err := e.Work(ctx, workBatch); return err }},
		{Name: "expire runs past their deadline", Pace: PaceAfter(poll), Logger: e.log,
			Round: func(ctx context.Context) error { _, err := e.ExpireDue(ctx); return err }},
	}
	if e.reminders.horizon > 0 {
		// Only time makes a reminder due, as a deadline.
		loops = append(loops, &Loop{Name: "remind before the deadline", Pace: PaceAfter(poll), Logger: e.log,
			Round: func(ctx context.Context) error { _, err := e.RemindDue(ctx); return err }})
	}
	if e.escalations.some {
		// Only time makes an escalation due.
		loops = append(loops, &Loop{Name: "escalate pending requests", Pace: PaceAfter(poll), Logger: e.log,
			Round: func(ctx context.Context) error { _, err := e.EscalateDue(ctx); return err }})
	}
	if feed != nil {
		// Wakes this server's waiters and workers on other processes' commits.
		loops = append(loops, &Loop{Name: "wake waiters on other processes' commits", Pace: PaceAfter(poll), Logger: e.log,
			Round: func(ctx context.Context) error { return feed.FeedChanges(ctx, e.changes) }})
	}
	return loops
}

// Retention is how a server prunes ended runs (PruneLoop).
type Retention struct {
	// OlderThan: the runs that ended more than this long ago are pruned.
	OlderThan time.Duration
	// Pace is when the next prune is due after the one at start.
	Pace Pace
	// Clock is what the cutoff is taken from at each round (the engine's
	// clock when nil).
	Clock Clock
	// Reclaim, when set, runs after each prune that succeeded: a store that
	// does not reuse freed space on its own gives it back (SQLite).
	Reclaim func(ctx context.Context) error
}

// PruneLoop prunes the runs that ended more than r.OlderThan ago at start and
// then at r.Pace. A failed prune is logged and tried again at the next round:
// what it did commit stays done.
func (e *Engine) PruneLoop(r Retention) *Loop {
	clock := r.Clock
	if clock == nil {
		clock = e.clock
	}
	return &Loop{Name: "prune", Pace: r.Pace, Logger: e.log, Round: func(ctx context.Context) error {
		rep, err := e.Prune(ctx, PruneOptions{Before: clock.Now().Add(-r.OlderThan)})
		if err == nil && r.Reclaim != nil {
			err = r.Reclaim(ctx)
		}
		// A prune that ctx stopped did commit its batches: they are told, as
		// the loop logs no error then.
		if rep != nil && (err == nil || ctx.Err() != nil) {
			e.log.Info("prune done", "runs", rep.Runs, "checkpoints", rep.Checkpoints, "bytes", rep.Bytes(), "skipped", len(rep.Skipped))
		}
		return err
	}}
}
