package bot

import (
	"context"
	"time"

	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// repostEvery is how often a server looks for waiting runs without a
// message, after looking at start: a run gets its post queued when it starts
// waiting, so this only catches what no process queued (runs that waited
// before the config had a slack section), and need not be quick.
const repostEvery = time.Minute

// deliverBatch bounds the outbox rows one delivery round reads.
const deliverBatch = 50

// Loops is the dispatcher's share of a server's background work: delivering
// the Slack outbox, woken by every commit that writes a run (a transition
// queues its message in the same transaction) and otherwise looking every
// poll (a retry after its backoff); posting waiting runs without a message,
// at start and every repostEvery; and forgetting the Slack requests past
// their replay window, every poll.
func (d *Dispatcher) Loops(changes *storage.Changes, poll time.Duration) []*workflow.Loop {
	log := d.log()
	loops := []*workflow.Loop{
		{Name: "deliver slack messages", Changes: changes, Pace: workflow.PaceAfter(poll), Logger: log,
			Round: func(ctx context.Context) error { _, err := d.DeliverDue(ctx, deliverBatch); return err }},
		{Name: "post waiting runs without a message", Pace: workflow.PaceAfter(repostEvery), Logger: log,
			Round: func(ctx context.Context) error { _, err := d.QueueUnposted(ctx); return err }},
		{Name: "forget slack requests past their window", Pace: workflow.PaceAfter(poll), Logger: log,
			Round: func(ctx context.Context) error {
				_, err := ForgetSeen(ctx, d.Engine.Replays(), d.wallNow())
				return err
			}},
	}
	if d.AuditChannel != "" {
		loops = append(loops, &workflow.Loop{Name: "remind the reviews of forced approvals", Pace: workflow.PaceAfter(poll), Logger: log,
			Round: func(ctx context.Context) error { _, err := d.QueueReviewReminders(ctx); return err }})
	}
	return loops
}

// wallNow is the dispatcher's clock as it is, not truncated to the store's
// precision: what ForgetSeen compares windows with.
func (d *Dispatcher) wallNow() time.Time {
	if d.Clock != nil {
		return d.Clock.Now()
	}
	return time.Now()
}
