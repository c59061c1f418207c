package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// RefreshEvery is how often a server reads the gauges from the store: a
// scrape never queries it.
const RefreshEvery = 15 * time.Second

// RefreshLoop sets the gauges from store at start and then at pace, with the
// ages taken at clock's time. A failed refresh is logged and tried again at the next
// round; the gauges keep what the last refresh set meanwhile.
func (m *Metrics) RefreshLoop(store storage.Store, clock workflow.Clock, pace workflow.Pace, log *slog.Logger) *workflow.Loop {
	return &workflow.Loop{Name: "refresh metrics", Pace: pace, Logger: log,
		Round: func(ctx context.Context) error { return m.Refresh(ctx, store, clock.Now()) }}
}
