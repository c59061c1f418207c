package app

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/internal/app/bench"
)

func (c *cli) benchCmd() *cobra.Command {
	var (
		asJSON, scale bool
		d             time.Duration
		scaleRuns     int
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the store and the engine: raw commits, suspend, decide, whole runs and clicks",
		Long: `bench measures, in one run on one store, the raw single-row durable commit
rate beside the engine's suspend, decide and end-to-end rates (submit, wait,
approve, execute, done) at 1, 8 and 64 concurrent runs, with the commits
(Updates that committed), durable flushes and store bytes each one costs, and
Slack Approve clicks at 1 and 64 at once (p50, p99) beside the bare handler.
On PostgreSQL raw commits are measured at 8 clients too: what the server and
this machine give when nothing else is done per commit, beside which the
engine's gain from 1 to 8 clients is read; and where the server runs on this
machine, the CPU time of its processes is counted beside this process's.

Without --db it works on a new SQLite file in a temporary folder. --db with a
new file path uses that file (it must not exist; it is removed after);
--db postgres://… (loopback only) uses a new schema on that server, dropped
after. Every figure runs for --duration. Nothing leaves this machine.

--scale measures the store full instead: it loads --scale-runs whole runs
(1,000,000 unless told) and a tenth as many waiting for approval, each made
by the engine, then times the first page of Slack's /runs pending, of
runs --status waiting_approval and of GET /v1/runs (the engine's call and
the store's query in it), prunes the ended runs (a tenth first, timed
alone) and says what the store takes per ended run before and after.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !scale && cmd.Flags().Changed("scale-runs") {
				return usageError{"--scale-runs is for --scale (see signoff bench --help)"}
			}
			if scale && scaleRuns < 10 {
				return usageError{"--scale-runs must be at least 10 (see signoff bench --help)"}
			}
			if d <= 0 {
				return usageError{"--duration must be positive (see signoff bench --help)"}
			}
			db := ""
			if f := cmd.Flags().Lookup("db"); f != nil && f.Changed {
				db = f.Value.String()
			}
			if scale {
				rep, err := bench.Scale(c.ctx, db, scaleRuns, c.tuneGC())
				if err != nil {
					return fmt.Errorf("bench --scale: %w", err)
				}
				if asJSON {
					return writeJSON(c.out, rep)
				}
				bench.PrintScale(c.out, rep)
				return nil
			}
			rep, err := bench.Run(c.ctx, db, d, c.tuneGC())
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			if asJSON {
				enc := json.NewEncoder(c.out)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			bench.Print(c.out, rep)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the figures as JSON")
	cmd.Flags().BoolVar(&scale, "scale", false, "measure lists and prune with many runs in the store instead")
	cmd.Flags().IntVar(&scaleRuns, "scale-runs", bench.DefaultScaleRuns, "with --scale: how many ended runs to load (a tenth as many wait)")
	cmd.Flags().DurationVar(&d, "duration", 2*time.Second, "how long each figure runs")
	return cmd
}
