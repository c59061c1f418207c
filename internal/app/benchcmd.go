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
		asJSON bool
		d      time.Duration
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
engine's gain from 1 to 8 clients is read.

Without --db it works on a new SQLite file in a temporary folder. --db with a
new file path uses that file (it must not exist; it is removed after);
--db postgres://… (loopback only) uses a new schema on that server, dropped
after. Every figure runs for --duration. Nothing leaves this machine.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if d <= 0 {
				return usageError{"--duration must be positive (see signoff bench --help)"}
			}
			db := ""
			if f := cmd.Flags().Lookup("db"); f != nil && f.Changed {
				db = f.Value.String()
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
	cmd.Flags().DurationVar(&d, "duration", 2*time.Second, "how long each figure runs")
	return cmd
}
