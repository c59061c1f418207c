package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/workflow"
)

// cli is one invocation of the program: its streams, environment and global options.
type cli struct {
	ctx    context.Context
	getenv func(string) string
	stdin  io.Reader
	out    io.Writer
	errOut io.Writer
	opts   options
	clock  workflow.Clock
	code   int
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{ctx: ctx, getenv: getenv, stdin: stdin, out: stdout, errOut: stderr}
	return c.execute(args)
}

// execute runs the command line on c and returns the exit code.
func (c *cli) execute(args []string) int {
	ctx, stdin, stdout, stderr := c.ctx, c.stdin, c.out, c.errOut
	root := c.root()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "signoff:", err)
		var ue usageError
		// cobra reports an unknown command as a plain error; flags and arguments
		// are turned into usageError where they are checked.
		if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
			return exitRefused
		}
		return exitForErr(err)
	}
	return c.code
}

// usageError is bad input on the command line: exit 2, nothing changed.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:           "signoff",
		Short:         "Run risky actions only after a person approves them",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			c.opts.resolve(c.getenv)
			// The demo tells its story on the built-in config, whatever is here.
			if cmd.Name() != "demo" {
				c.opts.findLocal()
			}
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	root.PersistentFlags().StringVar(&c.opts.db, "db", "", "the signoff database file (env SIGNOFF_DB, default signoff.db)")
	root.PersistentFlags().StringVar(&c.opts.config, "config", "", "the YAML config (env SIGNOFF_CONFIG; default ./signoff.yaml if there is one, else the built-in demo config)")
	root.PersistentFlags().StringVar(&c.opts.shop, "shop", "", "the practice shop's database (env SIGNOFF_SHOP, default shop.db beside the store)")
	root.AddCommand(
		c.demoCmd(), c.submitCmd(), c.runCmd(), c.runsCmd(), c.showCmd(), c.traceCmd(),
		c.decideCmd("approve"), c.decideCmd("reject"), c.cancelCmd(), c.resumeCmd(),
		c.historyCmd(), c.forkCmd(), c.verifyCmd(), c.shopCmd(), c.expireCmd(), c.serveCmd(),
		c.configCmd(), c.policyCmd(),
	)
	root.AddCommand(c.migrateCmd())
	return root
}

// withApp opens the app for one command and closes it after.
func (c *cli) withApp(f func(a *app) error) error {
	a, err := openApp(c.ctx, c.opts, c.getenv, c.errOut, c.clock)
	if err != nil {
		return err
	}
	defer a.Close()
	return f(a)
}

// finish prints a run after a run-level command and sets the exit code from its status.
func (c *cli) finish(a *app, id string, asJSON bool) error {
	v, err := a.engine.Get(c.ctx, id)
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(c.out, v); err != nil {
			return err
		}
	} else {
		renderRun(c.out, v, a.engine.Roles(), time.Now())
	}
	c.code = exitFor(v.Status)
	if v.Problem != "" {
		// The stored state failed its integrity check: whatever its row says,
		// nothing can be decided on it until a person looks.
		c.code = exitAttention
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (c *cli) submitCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "submit FILE|-",
		Short: "Submit a proposal (JSON); prints the run id first",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var body []byte
			var err error
			if args[0] == "-" {
				body, err = io.ReadAll(io.LimitReader(c.stdin, 1<<20+1))
			} else {
				body, err = os.ReadFile(args[0])
			}
			if err != nil {
				return usageError{fmt.Sprintf("read proposal: %v", err)}
			}
			if len(body) > 1<<20 {
				return usageError{"read proposal: larger than 1 MiB"}
			}
			p, err := workflow.ParseProposal(body)
			if err != nil {
				return err
			}
			return c.startRun(asJSON, func(a *app) (*workflow.Run, error) { return a.engine.Submit(c.ctx, p) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run as JSON instead")
	return cmd
}

// startRun makes a run and prints it: its id first (scripts read that line), or
// the run as JSON.
func (c *cli) startRun(asJSON bool, start func(a *app) (*workflow.Run, error)) error {
	return c.withApp(func(a *app) error {
		run, err := start(a)
		if err != nil {
			return err
		}
		if !asJSON {
			fmt.Fprintln(c.out, run.ID)
		}
		return c.finish(a, run.ID, asJSON)
	})
}

func (c *cli) runCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "run TICKET",
		Short: "Start the recorded agent on a demo ticket",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(demo.Tickets(), args[0]) {
				return usageError{fmt.Sprintf("unknown ticket %q (the recorded agent knows %s)", args[0], strings.Join(demo.Tickets(), ", "))}
			}
			return c.startRun(asJSON, func(a *app) (*workflow.Run, error) {
				return a.engine.Start(c.ctx, demo.AgentWorkflow, args[0], workflow.Person{ID: "agent:resolver", Name: "Resolver agent"})
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run as JSON instead")
	return cmd
}

func (c *cli) runsCmd() *cobra.Command {
	var asJSON bool
	var status string
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs (oldest first)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			var f workflow.RunFilter
			if status != "" {
				for _, s := range strings.Split(status, ",") {
					st := workflow.Status(strings.TrimSpace(s))
					if !st.Valid() {
						return usageError{fmt.Sprintf("unknown status %q (one of %s)", s, statusNames())}
					}
					f.Statuses = append(f.Statuses, st)
				}
			}
			return c.withApp(func(a *app) error {
				runs, err := a.engine.List(c.ctx, f)
				if err != nil {
					return err
				}
				if asJSON {
					views := make([]*workflow.RunView, 0, len(runs))
					for _, r := range runs {
						v, err := a.engine.Get(c.ctx, r.ID)
						if err != nil {
							return err
						}
						views = append(views, v)
					}
					return writeJSON(c.out, views)
				}
				renderRuns(c.out, runs, time.Now())
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the runs as JSON")
	cmd.Flags().StringVar(&status, "status", "", "only runs in this status (comma-separated)")
	return cmd
}

func statusNames() string {
	var s []string
	for _, st := range workflow.Statuses {
		s = append(s, string(st))
	}
	return strings.Join(s, ", ")
}

func (c *cli) showCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run: what it proposes, who may approve, what happened",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withApp(func(a *app) error { return c.finish(a, args[0], asJSON) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run as JSON")
	return cmd
}

func (c *cli) traceCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "trace RUN",
		Short: "Show a run's steps: each model call and tool call, in order",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withApp(func(a *app) error {
				hist, err := a.engine.History(c.ctx, args[0])
				if err != nil {
					return err
				}
				usage, err := a.shop.ModelCalls(c.ctx, args[0])
				if err != nil {
					return err
				}
				renderTrace(c.out, hist, usage)
				return nil
			})
		},
	}
}

func (c *cli) decideCmd(verb string) *cobra.Command {
	var as, name, reason, edit, fingerprint string
	var action int
	short := "Approve a waiting run as a member of the config's roles"
	if verb == "reject" {
		short = "Reject a waiting run, with a reason"
	}
	cmd := &cobra.Command{
		Use:   verb + " RUN --as USER",
		Short: short,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if as == "" {
				return usageError{"--as USER is required"}
			}
			in := workflow.DecideInput{
				RunID: args[0], Approver: workflow.Person{ID: as, Name: name}, Reason: reason,
				Fingerprint: fingerprint, Via: "cli", Verdict: workflow.VerdictApprove,
			}
			if verb == "reject" {
				in.Verdict = workflow.VerdictReject
				if reason == "" {
					return usageError{"reject needs --reason"}
				}
			}
			if edit != "" {
				in.Edit, in.EditIndex = json.RawMessage(edit), action-1
			}
			return c.withApp(func(a *app) error {
				run, err := a.engine.Decide(c.ctx, in)
				if err != nil {
					return err
				}
				if run.Status == workflow.StatusExecuting {
					// The approval completed the quorum: run the approved actions now.
					if _, err := a.engine.Resume(c.ctx, run.ID); err != nil {
						return err
					}
				}
				return c.finish(a, run.ID, false)
			})
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "who decides: a member id from the config's roles")
	cmd.Flags().StringVar(&name, "name", "", "the decider's display name")
	cmd.Flags().StringVar(&reason, "reason", "", "why (required to reject)")
	cmd.Flags().StringVar(&fingerprint, "fingerprint", "", "the fingerprint you reviewed (refused if the proposal changed since)")
	if verb == "approve" {
		cmd.Flags().StringVar(&edit, "edit", "", "approve with these arguments instead (JSON object), where policy allows editing")
		cmd.Flags().IntVar(&action, "action", 1, "which action --edit replaces (1-based)")
	}
	return cmd
}

func (c *cli) cancelCmd() *cobra.Command {
	var as, reason string
	cmd := &cobra.Command{
		Use:   "cancel RUN --as USER --reason R",
		Short: "Cancel a run that has not started executing",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if as == "" || reason == "" {
				return usageError{"cancel needs --as USER and --reason R"}
			}
			return c.withApp(func(a *app) error {
				if _, err := a.engine.Cancel(c.ctx, args[0], workflow.Person{ID: as}, reason); err != nil {
					return err
				}
				return c.finish(a, args[0], false)
			})
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "who cancels")
	cmd.Flags().StringVar(&reason, "reason", "", "why")
	return cmd
}

func (c *cli) resumeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "resume RUN",
		Short: "Continue whatever the run was doing",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withApp(func(a *app) error {
				if _, err := a.engine.Resume(c.ctx, args[0]); err != nil {
					return err
				}
				return c.finish(a, args[0], false)
			})
		},
	}
}

func (c *cli) historyCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "history RUN",
		Short: "List a run's checkpoints",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withApp(func(a *app) error {
				hist, err := a.engine.History(c.ctx, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(c.out, hist)
				}
				renderHistory(c.out, hist)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checkpoints as JSON")
	return cmd
}

func (c *cli) forkCmd() *cobra.Command {
	var at int64
	var as string
	cmd := &cobra.Command{
		Use:   "fork RUN --at SEQ",
		Short: "Start a new run from a checkpoint of another; it needs its own approval",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if at < 1 {
				return usageError{"--at SEQ is required (see `signoff history RUN`)"}
			}
			return c.withApp(func(a *app) error {
				run, err := a.engine.Fork(c.ctx, args[0], at, workflow.Person{ID: as})
				if err != nil {
					return err
				}
				fmt.Fprintln(c.out, run.ID)
				return c.finish(a, run.ID, false)
			})
		},
	}
	cmd.Flags().Int64Var(&at, "at", 0, "the checkpoint seq to fork from")
	cmd.Flags().StringVar(&as, "as", "operator", "who forks (recorded in the audit log)")
	return cmd
}

func (c *cli) verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check every checkpoint chain and the audit chain",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withApp(func(a *app) error {
				rep, err := a.engine.Verify(c.ctx)
				if err != nil {
					return err
				}
				for _, d := range rep.Damaged {
					fmt.Fprintf(c.out, "damaged: %s\n", d.Error())
				}
				if rep.AuditProblem != "" {
					fmt.Fprintf(c.out, "damaged: audit log: %s\n", rep.AuditProblem)
				}
				if rep.OK() {
					fmt.Fprintf(c.out, "ok: %d runs, %d checkpoints, %d audit events verified\n", rep.Runs, rep.Checkpoints, rep.AuditEvents)
					return nil
				}
				c.code = exitAttention
				return nil
			})
		},
	}
}

func (c *cli) expireCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "expire",
		Short: "End every waiting run whose deadline has passed",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withApp(func(a *app) error {
				n, err := a.engine.ExpireDue(c.ctx)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.out, "%d run(s) expired\n", n)
				return nil
			})
		},
	}
}

func (c *cli) shopCmd() *cobra.Command {
	shop := &cobra.Command{Use: "shop", Short: "The practice shop: what it did, and changes made by hand"}
	var asJSON bool
	changes := &cobra.Command{
		Use:   "changes",
		Short: "What the shop did, oldest first",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withApp(func(a *app) error {
				ch, err := a.shop.Changes(c.ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(c.out, ch)
				}
				renderChanges(c.out, ch)
				return nil
			})
		},
	}
	changes.Flags().BoolVar(&asJSON, "json", false, "print the changes as JSON")
	var by string
	refund := &cobra.Command{
		Use:   "refund ORDER PAYMENT AMOUNT --by NAME",
		Short: "Refund by hand, outside signoff (the world moves while a run waits)",
		Args:  exactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if by == "" {
				return usageError{"--by NAME is required"}
			}
			return c.withApp(func(a *app) error {
				ch, err := a.shop.ManualRefund(c.ctx, args[0], args[1], args[2], by)
				if err != nil {
					c.code = exitRefused
					fmt.Fprintln(c.errOut, "signoff: refund refused:", err)
					return nil
				}
				renderChanges(c.out, []demo.Change{ch})
				return nil
			})
		},
	}
	refund.Flags().StringVar(&by, "by", "", "who made the change")
	shop.AddCommand(changes, refund)
	return shop
}

// exactArgs is cobra.ExactArgs with the error marked as bad input (exit 2).
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError{err.Error()}
		}
		return nil
	}
}
