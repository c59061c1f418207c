package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// anchorEvery is how often serve writes and logs an audit anchor.
const anchorEvery = 10 * time.Minute

// logAnchors writes an audit anchor (a sealed record committing to every
// run's audit events so far) at start and then every period, and logs it, so
// that a log pipeline the database's writers cannot reach holds anchors for
// `signoff verify --anchor`: a rewritten or cut audit log no longer extends
// them. Replicas that all do so take turns and anchor what moved since.
func logAnchors(ctx context.Context, eng *workflow.Engine, log *slog.Logger, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	last := workflow.Anchor{}
	for {
		if a, err := eng.Anchor(ctx); err != nil && ctx.Err() == nil {
			log.Error("write an audit anchor", "error", err)
		} else if err == nil && a != last && a.Seq > 0 {
			log.Info("audit head", "anchor", a.String(), "seq", a.Seq, "hash", a.Hash)
			last = a
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
