package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// anchorEvery is how often serve logs the audit head.
const anchorEvery = 10 * time.Minute

// logAnchors logs the audit head at start and then every period, so that a
// log pipeline the database's writers cannot reach holds anchors for
// `signoff verify --anchor`: a rewritten or cut audit log no longer extends
// them.
func logAnchors(ctx context.Context, eng *workflow.Engine, log *slog.Logger, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	last := workflow.Anchor{}
	for {
		if a, err := eng.AuditHead(ctx); err != nil && ctx.Err() == nil {
			log.Error("read the audit head", "error", err)
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
