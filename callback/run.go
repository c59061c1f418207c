package callback

import (
	"context"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// deliverBatch bounds the callback rows one delivery round reads.
const deliverBatch = 50

// Loop is the dispatcher's background work in a server: delivering the due
// callback rows, woken by every commit that writes a run (a transition queues
// its callback in the same transaction) and otherwise looking every poll (a
// retry after its backoff, a row another replica claimed and dropped).
func (d *Dispatcher) Loop(changes *storage.Changes, poll time.Duration) *workflow.Loop {
	return &workflow.Loop{Name: "deliver callbacks", Changes: changes, Pace: workflow.PaceAfter(poll), Logger: d.log(),
		Round: func(ctx context.Context) error { _, err := d.DeliverDue(ctx, deliverBatch); return err }}
}
