package app

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/record"
)

func (c *cli) delegateCmd() *cobra.Command {
	var from, to, until, reason, revoke, as string
	cmd := &cobra.Command{
		Use:   "delegate --from A --to B --until DATE [--reason R] | --revoke ID [--as USER]",
		Short: "Let B decide, until DATE, what A may, on A's behalf (never a request of A's or B's); or revoke a delegation",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if revoke != "" {
				if from != "" || to != "" || until != "" || reason != "" {
					return usageError{"delegate --revoke ID takes only --as"}
				}
				return c.withApp(func(a *app) error { return c.revokeDelegation(a, revoke, as) })
			}
			if from == "" || to == "" || until == "" || as != "" {
				return usageError{"delegate needs --from A --to B --until DATE (or --revoke ID)"}
			}
			end, err := bot.ParseUntil(until)
			if err != nil {
				return usageError{"delegate: --until: " + err.Error()}
			}
			return c.withApp(func(a *app) error {
				d, err := a.engine.Delegate(c.ctx, record.Delegation{From: from, To: to, Until: end, Reason: reason})
				if err != nil {
					return err
				}
				fmt.Fprintln(c.out, d.ID)
				printDelegation(c.out, d)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "who delegates: a person holding a role")
	cmd.Flags().StringVar(&to, "to", "", "who may decide on their behalf: a Slack user id or a person of the config")
	cmd.Flags().StringVar(&until, "until", "", "when it ends: YYYY-MM-DD (through that day, UTC) or an RFC 3339 time; at most 90 days away")
	cmd.Flags().StringVar(&reason, "reason", "", "why (shown with it)")
	cmd.Flags().StringVar(&revoke, "revoke", "", "revoke the delegation of this id instead")
	cmd.Flags().StringVar(&as, "as", "", "with --revoke: who revokes it (its delegator, its delegate or who made it; default who made it)")
	return cmd
}

func (c *cli) revokeDelegation(a *app, id, as string) error {
	if as == "" {
		all, err := a.engine.Delegations(c.ctx, "", true)
		if err != nil {
			return err
		}
		for _, d := range all {
			if d.ID == id {
				as = d.CreatedBy
			}
		}
		if as == "" {
			as = "cli" // the engine refuses it, naming the id
		}
	}
	d, err := a.engine.RevokeDelegation(c.ctx, id, as)
	if err != nil {
		return err
	}
	printDelegation(c.out, d)
	return nil
}

func (c *cli) delegationsCmd() *cobra.Command {
	var all, asJSON bool
	var who string
	cmd := &cobra.Command{
		Use:   "delegations [--who USER] [--all] [--json]",
		Short: "List the delegations that hold now (--all: ended and revoked ones too), oldest first",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withReadApp(func(a *app) error {
				ds, err := a.engine.Delegations(c.ctx, who, all)
				if err != nil {
					return err
				}
				if asJSON {
					out := []delegationJSON{}
					for _, d := range ds {
						out = append(out, toDelegationJSON(d))
					}
					return writeJSON(c.out, out)
				}
				if len(ds) == 0 {
					fmt.Fprintln(c.out, "no delegation")
				}
				for _, d := range ds {
					printDelegation(c.out, d)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&who, "who", "", "only the delegations from or to this person")
	cmd.Flags().BoolVar(&all, "all", false, "ended and revoked delegations too")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print them as JSON")
	return cmd
}

// printDelegation is one delegation on one line, its text made safe.
func printDelegation(w io.Writer, d *record.Delegation) {
	line := fmt.Sprintf("%s: %s may decide on behalf of %s until %s", term(d.ID), term(d.To), term(d.From), d.Until.UTC().Format(time.RFC3339))
	if !d.RevokedAt.IsZero() {
		line += fmt.Sprintf(", revoked by %s at %s", term(d.RevokedBy), d.RevokedAt.UTC().Format(time.RFC3339))
	}
	if d.Reason != "" {
		line += ": " + term(d.Reason)
	}
	fmt.Fprintln(w, line)
}

// delegationJSON is a delegation as `delegations --json` prints it.
type delegationJSON struct {
	ID        string     `json:"id"`
	From      string     `json:"from"`
	To        string     `json:"to"`
	Until     time.Time  `json:"until"`
	Reason    string     `json:"reason,omitempty"`
	CreatedBy string     `json:"created_by"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	RevokedBy string     `json:"revoked_by,omitempty"`
}

func toDelegationJSON(d *record.Delegation) delegationJSON {
	j := delegationJSON{ID: d.ID, From: d.From, To: d.To, Until: d.Until, Reason: d.Reason, CreatedBy: d.CreatedBy, CreatedAt: d.CreatedAt, RevokedBy: d.RevokedBy}
	if !d.RevokedAt.IsZero() {
		at := d.RevokedAt
		j.RevokedAt = &at
	}
	return j
}
