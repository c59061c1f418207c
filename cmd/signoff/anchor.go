package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

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
	last := workflow.Anchor{}
	l := &workflow.Loop{Name: "write an audit anchor", Pace: workflow.PaceEvery(period), Logger: log,
		Round: func(ctx context.Context) error {
			a, err := eng.Anchor(ctx)
			if err != nil {
				return err
			}
			if a != last && a.Seq > 0 {
				log.Info("audit anchor", "anchor", a.String(), "id", a.Seq, "hash", a.Hash)
				last = a
			}
			return nil
		}}
	l.Run(ctx)
}

func (c *cli) anchorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "anchor",
		Short: "Write an audit anchor and print it (A12:HASH), to keep where the database's writers cannot reach",
		Long: `Write an audit anchor: a sealed record, chained to the one before, that
commits to every run's audit events so far. It prints the anchor (A12:HASH):
keep it somewhere the database's writers cannot reach, and
verify --anchor A12:HASH proves later that the log still extends it. serve
writes and logs one every ten minutes; when nothing was audited since the
last, that one is printed again.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withApp(func(a *app) error {
				an, err := a.engine.Anchor(c.ctx)
				if err != nil {
					return err
				}
				if an.Seq == 0 {
					fmt.Fprintln(c.out, "nothing audited yet: no anchor")
					return nil
				}
				fmt.Fprintf(c.out, "audit anchor: %s\n", an)
				return nil
			})
		},
	}
}
