package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/callback"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// outboxRow is one undelivered outbox row as `signoff outbox --json` prints it.
type outboxRow struct {
	ID          int64             `json:"id"`
	Kind        record.OutboxKind `json:"kind"`
	RunID       string            `json:"run_id"`
	Attempts    int               `json:"attempts"`
	NextAttempt time.Time         `json:"next_attempt"`
	CreatedAt   time.Time         `json:"created_at"`
	LastError   string            `json:"last_error,omitempty"`
	// URL and EventID, for a callback: where it goes and the event's id.
	URL     string `json:"url,omitempty"`
	EventID string `json:"event_id,omitempty"`
	// To, for a Slack outcome message: the channel or user it goes to.
	To string `json:"to,omitempty"`
}

// maxOutboxListed bounds one listing: a longer backlog is said to be longer.
const maxOutboxListed = 1000

func (c *cli) outboxCmd() *cobra.Command {
	var asJSON, failing bool
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "List the messages not delivered yet (Slack posts, callbacks), with their attempts and last error",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rows []outboxRow
			more := false
			err := c.withReadApp(func(a *app) error {
				var err error
				rows, more, err = listOutbox(c.ctx, a.engine.Outbox(), failing)
				return err
			})
			if errors.Is(err, sqlite.ErrNoStore) {
				fmt.Fprintf(c.errOut, "signoff: no store at %s yet\n", c.opts.db)
				err = nil
			}
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(c.out, emptyIfNil(rows))
			}
			renderOutbox(c.out, rows, more, c.now())
			return nil
		},
	}
	cmd.Flags().BoolVar(&failing, "failing", false, "only messages whose last attempt failed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the messages as JSON")
	return cmd
}

// listOutbox reads the undelivered rows, oldest first, and says whether there
// are more than it lists.
func listOutbox(ctx context.Context, outbox *workflow.Outbox, failing bool) ([]outboxRow, bool, error) {
	ms, err := outbox.List(ctx, storage.OutboxFilter{Failing: failing, Limit: maxOutboxListed + 1})
	if err != nil {
		return nil, false, fmt.Errorf("read the outbox: %w", err)
	}
	more := len(ms) > maxOutboxListed
	if more {
		ms = ms[:maxOutboxListed]
	}
	rows := make([]outboxRow, len(ms))
	for i, m := range ms {
		rows[i] = outboxRow{ID: m.ID, Kind: m.Kind, RunID: m.RunID, Attempts: m.Attempts, NextAttempt: m.NextAttempt,
			CreatedAt: m.CreatedAt, LastError: m.LastError}
		rows[i].URL, rows[i].EventID, _ = callback.Target(m)
		rows[i].To = bot.OutcomeTarget(m)
	}
	return rows, more, nil
}

// renderOutbox prints the rows as a table. The last error (a receiver's
// answer) and the URL (an agent's) are untrusted: they go through term.
func renderOutbox(w io.Writer, rows []outboxRow, more bool, now time.Time) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "nothing waiting: every message was delivered")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tRUN\tATTEMPTS\tNEXT ATTEMPT\tAGE\tTO\tLAST ERROR")
	for _, r := range rows {
		next := "now"
		if r.NextAttempt.After(now) {
			next = "in " + since(r.NextAttempt, now)
			if next == "in just now" {
				next = "in less than a minute"
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ID, term(string(r.Kind)), term(orDash(r.RunID)), r.Attempts, next,
			since(now, r.CreatedAt), term(orDash(cutRunes(r.URL+r.To, 60))), term(orDash(cutRunes(r.LastError, 120))))
	}
	tw.Flush()
	if more {
		fmt.Fprintf(w, "(the first %s shown; more are waiting)\n", strconv.Itoa(maxOutboxListed))
	}
}
