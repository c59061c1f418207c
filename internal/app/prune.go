package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/callback"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

func (c *cli) pruneCmd() *cobra.Command {
	var (
		olderThan string
		dryRun    bool
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "prune --older-than AGE [--dry-run]",
		Short: "Remove the states, evidence and delivered messages of runs that ended more than AGE ago",
		Long: `Remove the bulky records of runs that ended (done, failed, rejected, expired,
cancelled) more than AGE ago (like 90d or 2160h): every checkpoint's state,
with the evidence and agent messages, and the run's delivered Slack messages
and callbacks;
and forget expired replay-cache rows. Each run keeps its row, a sealed summary
checkpoint (the actions, the gate, the decisions and operations as it ended),
its requests, decisions, operations and audit events, and every checkpoint's
seq, hash and seal, so verify still checks the whole chain and show says what
was pruned. Runs that wait, execute or need attention are never touched.

Runs are pruned a hundred to a transaction, so a server on the same store
waits for one batch at most; a prune that is stopped can be run again. On
SQLite the freed pages are then given back to the file system (the first
prune of a store made before this version converts it with a one-time VACUUM).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if olderThan == "" {
				return usageError{"prune needs --older-than AGE, like 90d"}
			}
			age, err := config.ParseDuration(olderThan)
			if err != nil {
				return usageError{"--older-than: " + err.Error()}
			}
			with := c.withApp
			if dryRun {
				with = c.withReadApp
			}
			return with(func(a *app) error {
				res, err := prune(c.ctx, a.engine, a.store, a.log, c.now().Add(-age), dryRun)
				if res != nil {
					if asJSON {
						if jerr := writeJSON(c.out, res); jerr != nil {
							return jerr
						}
					} else {
						renderPrune(c.out, res)
					}
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&olderThan, "older-than", "", "prune runs that ended more than this long ago (90d, 2160h)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be removed and change nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// pruneResult is a prune and what giving the space back did.
type pruneResult struct {
	*workflow.PruneReport
	Space *sqlite.ReclaimReport `json:"space,omitempty"`
}

// prune prunes what ended before cutoff and, on SQLite, gives the space back.
func prune(ctx context.Context, e *workflow.Engine, store storage.Store, log *slog.Logger, cutoff time.Time, dryRun bool) (*pruneResult, error) {
	rep, err := e.Prune(ctx, workflow.PruneOptions{Before: cutoff, DryRun: dryRun})
	if rep == nil {
		return nil, err
	}
	res := &pruneResult{PruneReport: rep}
	if err != nil {
		return res, err
	}
	if !dryRun {
		if res.Space, err = reclaimSpace(ctx, store, log); err != nil {
			return res, err
		}
	}
	return res, nil
}

// reclaimSpace gives the space a prune freed back to the file system on
// SQLite (nil on PostgreSQL, whose autovacuum makes it reusable on its own).
func reclaimSpace(ctx context.Context, store storage.Store, log *slog.Logger) (*sqlite.ReclaimReport, error) {
	st, ok := store.(*sqlite.Store)
	if !ok {
		return nil, nil
	}
	rep, err := st.Reclaim(ctx)
	if err != nil {
		return rep, err
	}
	log.Info("space given back", "pages", rep.Pages, "bytes_before", rep.Before,
		"bytes_after", rep.After, "vacuumed", rep.Vacuumed)
	return rep, nil
}

// pruneLoop is serve's retention: it prunes the runs that ended more than
// age ago at start and then at pace, with the cutoff taken from now, and on
// SQLite gives the space back after each prune.
func pruneLoop(a *app, age time.Duration, clock workflow.Clock, pace workflow.Pace) *workflow.Loop {
	return a.engine.PruneLoop(workflow.Retention{OlderThan: age, Pace: pace, Clock: clock,
		Reclaim: func(ctx context.Context) error { _, err := reclaimSpace(ctx, a.store, a.log); return err }})
}

func renderPrune(w io.Writer, r *pruneResult) {
	verb := "pruned"
	if r.DryRun {
		verb = "would prune"
	}
	fmt.Fprintf(w, "%s %d run(s) that ended before %s: %d checkpoint state(s) (%s), %s (%s) removed, %d summaries (%s) written\n",
		verb, r.Runs, r.Before.Format(time.RFC3339), r.Checkpoints, byteSize(r.StateBytes), outboxText(r.Outbox, r.OutboxKinds), byteSize(r.OutboxBytes),
		r.Runs, byteSize(r.SummaryBytes))
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped (damaged, see signoff verify): %s\n", term(s.Error()))
	}
	if r.DryRun {
		fmt.Fprintln(w, "dry run: nothing was changed")
		return
	}
	if r.ReplayForgotten > 0 {
		fmt.Fprintf(w, "%d expired replay-cache row(s) forgotten\n", r.ReplayForgotten)
	}
	if s := r.Space; s != nil {
		var how []string
		if s.Vacuumed {
			how = append(how, "the store was converted to incremental vacuum with a one-time VACUUM")
		}
		fmt.Fprintf(w, "file: %s before, %s after", byteSize(s.Before), byteSize(s.After))
		if len(how) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(how, ", "))
		}
		fmt.Fprintln(w)
	}
}

// outboxText names the delivered outbox messages a prune removed by what
// they were: of total, kinds counts each kind (a record written before kinds
// were kept has none, and says only how many).
func outboxText(total int, kinds map[record.OutboxKind]int) string {
	if total > 0 && len(kinds) == 0 {
		return fmt.Sprintf("%d delivered outbox message(s) (Slack messages and callbacks)", total)
	}
	var slack, callbacks, other int
	for k, n := range kinds {
		switch {
		case slices.Contains(bot.Kinds, k):
			slack += n
		case k == callback.Kind:
			callbacks += n
		default:
			other += n
		}
	}
	if other > 0 {
		return fmt.Sprintf("%d delivered Slack message(s), %d delivered callback(s) and %d other delivered outbox message(s)", slack, callbacks, other)
	}
	return fmt.Sprintf("%d delivered Slack message(s) and %d delivered callback(s)", slack, callbacks)
}

// byteSize is n bytes for people: 512 B, 1.5 KB, 30.5 MB.
func byteSize(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f KB", float64(n)/1000)
	case n < 1000*1000*1000:
		return fmt.Sprintf("%.1f MB", float64(n)/1000/1000)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1000/1000/1000)
}
