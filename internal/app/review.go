package app

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// reviewCmd is `signoff review ack RUN --as USER [--note N]`: the
// acknowledgement of a forced approval's follow-up review.
func (c *cli) reviewCmd() *cobra.Command {
	root := &cobra.Command{Use: "review", Short: "Acknowledge the follow-up review of a forced (break-glass) approval"}
	var as, note string
	ack := &cobra.Command{
		Use:   "ack RUN --as USER [--note N]",
		Short: "Acknowledge that a forced approval was looked at, as a member of the review's role or above",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if as == "" {
				return usageError{"--as USER is required"}
			}
			return c.withApp(func(a *app) error {
				r, err := a.engine.AcknowledgeReview(c.ctx, args[0], record.Person{ID: as}, note)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.out, "review of run %s acknowledged by %s\n", term(r.RunID), term(r.AcknowledgedBy))
				return nil
			})
		},
	}
	ack.Flags().StringVar(&as, "as", "", "who acknowledges: a member id from the config's roles")
	ack.Flags().StringVar(&note, "note", "", "what the review found (optional; recorded with the acknowledgement)")
	root.AddCommand(ack)
	return root
}

// reviewsCmd is `signoff reviews`: the follow-up reviews not acknowledged
// yet, soonest due first.
func (c *cli) reviewsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "reviews",
		Short: "List the follow-up reviews of forced approvals not acknowledged yet",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withApp(func(a *app) error {
				rs, err := a.engine.PendingReviews(c.ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(c.out, emptyIfNil(rs))
				}
				renderReviews(c.out, rs, c.now())
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the reviews as JSON")
	return cmd
}

func renderReviews(w io.Writer, rs []*record.Review, now time.Time) {
	if len(rs) == 0 {
		fmt.Fprintln(w, "no review pending")
		return
	}
	for _, r := range rs {
		when := "due in " + r.Due.Sub(now).Round(time.Minute).String()
		if !now.Before(r.Due) {
			when = "overdue by " + now.Sub(r.Due).Round(time.Minute).String()
		}
		fmt.Fprintf(w, "%s  rule %s  forced by %s: %s  review by %s or above, %s (%s)\n", term(r.RunID), term(r.Rule),
			term(r.ForcedBy), term(r.Reason), term(r.Role), when, r.Due.Format(time.RFC3339))
	}
}

// renderForced prints who forced the run's approval, and why.
func renderForced(w io.Writer, v *workflow.RunView) {
	if f := v.Forced; f != nil {
		fmt.Fprintf(w, "  forced by %s (%s) at %s: %s\n", term(f.By), term(f.Role), f.At.Format(time.RFC3339), term(f.Reason))
		if r := v.Review; r != nil && r.Status == record.ReviewAcknowledged && r.AcknowledgedAt != nil {
			fmt.Fprintf(w, "  review acknowledged by %s at %s", term(r.AcknowledgedBy), r.AcknowledgedAt.Format(time.RFC3339))
			if r.Note != "" {
				fmt.Fprintf(w, ": %s", term(r.Note))
			}
			fmt.Fprintln(w)
			return
		}
		fmt.Fprintf(w, "  review by %s or above due %s (signoff review ack %s)\n", term(f.ReviewRole), f.ReviewDue.Format(time.RFC3339), term(v.ID))
	}
}
