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
	last := workflow.Anchor{}
	l := &workflow.Loop{Name: "read the audit head", Pace: workflow.PaceEvery(period), Logger: log,
		Round: func(ctx context.Context) error {
			a, err := eng.AuditHead(ctx)
			if err != nil {
				return err
			}
			if a != last && a.Seq > 0 {
				log.Info("audit head", "anchor", a.String(), "seq", a.Seq, "hash", a.Hash)
				last = a
			}
			return nil
		}}
	l.Run(ctx)
}
