package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlite"
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
		var ue usageError
		// cobra reports an unknown command as a plain error; flags and arguments
		// are turned into usageError where they are checked.
		if msg, ok := strings.CutPrefix(err.Error(), "unknown command "); ok {
			msg, suggestions, _ := strings.Cut(msg, "\n")
			parent := "signoff" // the message ends: for "signoff shop"
			if i := strings.LastIndex(msg, ` for "`); i >= 0 {
				parent = strings.Trim(msg[i+len(` for `):], `"`)
			}
			fmt.Fprintf(stderr, "signoff: unknown command %s (see %s --help)\n", term(msg), term(parent))
			if s := strings.TrimSpace(suggestions); s != "" {
				fmt.Fprintln(stderr, termLines(s))
			}
			return exitRefused
		}
		fmt.Fprintln(stderr, "signoff:", termLines(err.Error()))
		if errors.As(err, &ue) {
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
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			c.opts.resolve(c.getenv)
			// The demo tells its story on the built-in config, whatever is here.
			if cmd.Name() != "demo" {
				c.opts.findLocal()
			}
			c.opts.server = cmd.Name() == "serve"
			// Refuse a bad --log-* before anything is opened.
			_, err := newLogger(c.opts, io.Discard)
			return err
		},
		Version: version(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{fmt.Sprintf("%v (see %s --help)", err, cmd.CommandPath())}
	})
	root.PersistentFlags().StringVar(&c.opts.db, "db", "", "the signoff database file (env SIGNOFF_DB, default signoff.db)")
	root.PersistentFlags().StringVar(&c.opts.config, "config", "", "the YAML config (env SIGNOFF_CONFIG; default ./signoff.yaml if there is one, else the built-in demo config)")
	root.PersistentFlags().StringVar(&c.opts.shop, "shop", "", "the practice shop's database (env SIGNOFF_SHOP, default shop.db beside the store)")
	root.PersistentFlags().StringVar(&c.opts.keys, "keys", "", "the integrity key file (env SIGNOFF_KEYS_FILE; SIGNOFF_KEYS holds the keys themselves; default signoff.keys beside a SQLite store)")
	root.PersistentFlags().StringVar(&c.opts.logFormat, "log-format", "", "log lines as text or json (env SIGNOFF_LOG_FORMAT, default text)")
	root.PersistentFlags().StringVar(&c.opts.logLevel, "log-level", "", "log debug, info, warn or error and above (env SIGNOFF_LOG_LEVEL, default warn; info for serve)")
	root.AddCommand(
		c.demoCmd(), c.submitCmd(), c.runCmd(), c.runsCmd(), c.showCmd(), c.traceCmd(),
		c.decideCmd("approve"), c.decideCmd("reject"), c.cancelCmd(), c.resolveCmd(), c.extendCmd(), c.reassignCmd(), c.resumeCmd(),
		c.historyCmd(), c.forkCmd(), c.verifyCmd(), c.anchorCmd(), c.shopCmd(), c.expireCmd(), c.remindCmd(), c.escalateCmd(), c.serveCmd(), c.waitCmd(),
		c.configCmd(), c.policyCmd(), c.benchCmd(), c.auditCmd(), c.pruneCmd(), c.outboxCmd(), c.tokenCmd(), c.slackCmd(), c.mcpCmd(),
		c.delegateCmd(), c.delegationsCmd(), c.reviewCmd(), c.reviewsCmd(),
	)
	root.AddCommand(c.migrateCmd())
	return root
}

// now is the time listings are shown against: the injected clock's, if any.
func (c *cli) now() time.Time {
	if c.clock != nil {
		return c.clock.Now()
	}
	return time.Now()
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

// withReadApp is withApp for a command that only reads: the store is opened
// read-only (no migration, no write lock; it works on a read-only file and
// while another process writes), and the practice shop only if the command
// asks for it (readShop).
func (c *cli) withReadApp(f func(a *app) error) error {
	o := c.opts
	o.readOnly = true
	a, err := openApp(c.ctx, o, c.getenv, c.errOut, c.clock)
	if err != nil {
		return err
	}
	defer a.Close()
	return f(a)
}

// withShopReader opens the practice shop read-only for a command that reads
// only the shop: no store, no config, no write. A shop that was never made
// is nil: it did nothing yet.
func (c *cli) withShopReader(f func(shop *demo.Shop) error) error {
	db, shop, err := openShopReadOnly(c.ctx, c.opts.shop)
	if errors.Is(err, sqlite.ErrNoStore) {
		return f(nil)
	}
	if err != nil {
		return err
	}
	defer db.Close()
	return f(shop)
}

// finish prints a run after a run-level command and sets the exit code from its status.
func (c *cli) finish(a *app, id string, asJSON bool) error {
	v, err := a.engine.Get(c.ctx, id)
	if err != nil {
		return err
	}
	return c.printRun(a, v, asJSON)
}

// printRun prints a run and sets the exit code from its status.
func (c *cli) printRun(a *app, v *workflow.RunView, asJSON bool) error {
	if asJSON {
		if err := writeJSON(c.out, v); err != nil {
			return err
		}
	} else {
		// What an edit changed is told by the checkpoints around it.
		var edits []editRecord
		if slices.ContainsFunc(v.Decisions, func(d workflow.DecisionView) bool { return len(d.Edited) > 0 }) {
			hist, err := a.engine.History(c.ctx, v.ID)
			if err != nil {
				return err
			}
			edits = editsOf(hist)
		}
		renderRun(c.out, v, a.engine.Roles(), redactor(a.engine.Action), a.engine.Action, edits, c.now())
	}
	c.code = exitFor(v.Status)
	if v.Problem != "" {
		// The stored state failed its integrity check: whatever its row says,
		// nothing can be decided on it until a person looks.
		c.code = exitAttention
	}
	return nil
}

// emptyIfNil makes an empty list print as [] in JSON, never null: scripts
// iterate over what they are given.
func emptyIfNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (c *cli) submitCmd() *cobra.Command {
	var asJSON bool
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "submit FILE|-",
		Short: "Submit a proposal (JSON); prints the run id first",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(cmd); err != nil {
				return err
			}
			p, err := c.readProposal(args[0])
			if err != nil {
				return err
			}
			return c.startRun(asJSON, &w, func(a *app) (*record.Run, error) {
				run, err := a.engine.Submit(c.ctx, p)
				if err == nil && !workflow.ParkedUntil(run, c.now()).IsZero() {
					// The target asked for time: this command waits it out
					// (a server's workers would, if one runs).
					return a.engine.Resume(c.ctx, run.ID)
				}
				return run, err
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run as JSON instead")
	w.add(cmd, true)
	return cmd
}

// startRun makes a run and prints it: its id first (scripts read that line), or
// the run as JSON; with w.on, once it is finished or needs a person.
func (c *cli) startRun(asJSON bool, w *waitFlags, start func(a *app) (*record.Run, error)) error {
	return c.withApp(func(a *app) error {
		run, err := start(a)
		if err != nil {
			return err
		}
		if !asJSON {
			fmt.Fprintln(c.out, run.ID)
		}
		if w != nil && w.on {
			return c.waitRun(a, run.ID, asJSON, w.timeout)
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
			return c.startRun(asJSON, nil, func(a *app) (*record.Run, error) {
				return a.engine.Start(c.ctx, demo.AgentWorkflow, args[0], record.Person{ID: "agent:resolver", Name: "Resolver agent"})
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run as JSON instead")
	return cmd
}

func (c *cli) runsCmd() *cobra.Command {
	var asJSON bool
	var status, task, requester, after string
	var limit int
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs (oldest first), a page at a time",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return usageError{fmt.Sprintf("--limit %d: want 0 (every run) or more", limit)}
			}
			var f storage.RunFilter
			if status != "" {
				for _, s := range strings.Split(status, ",") {
					st := record.Status(strings.ToLower(strings.TrimSpace(s)))
					if st == statusPending {
						st = record.StatusWaitingApproval
					}
					if !st.Valid() {
						return usageError{fmt.Sprintf("unknown status %q (one of %s, or %s)", s, statusNames(), statusPending)}
					}
					f.Statuses = append(f.Statuses, st)
				}
			}
			f.TaskID, f.RequesterID = task, requester
			err := c.withReadApp(func(a *app) error {
				views, more, err := listPage(c.ctx, a.engine, f, after, limit, asJSON)
				if err != nil {
					return err
				}
				next := ""
				if more {
					next = "more runs: " + term(shellLine(append(c.pageArgs(cmd), "--after", views[len(views)-1].ID)...))
				}
				if asJSON {
					if next != "" {
						fmt.Fprintln(c.errOut, next)
					}
					return writeJSON(c.out, views)
				}
				for i, v := range views {
					views[i] = a.engine.Redacted(v) // the summary may repeat a redact: field
				}
				renderRuns(c.out, views, c.now())
				if next != "" {
					fmt.Fprintln(c.out, next)
				}
				return nil
			})
			if errors.Is(err, sqlite.ErrNoStore) {
				// Nothing was ever written here: no runs, and no file made to say so.
				fmt.Fprintf(c.errOut, "signoff: no store at %s yet\n", c.opts.db)
				if asJSON {
					return writeJSON(c.out, []*workflow.RunView{})
				}
				renderRuns(c.out, nil, time.Now())
				return nil
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the runs as JSON")
	cmd.Flags().StringVar(&status, "status", "", "only runs in this status (comma-separated, any case; pending is waiting_approval, as /runs pending lists)")
	cmd.Flags().StringVar(&task, "task", "", "only runs of this task (ticket) id")
	cmd.Flags().StringVar(&requester, "requester", "", "only runs asked for by this id")
	cmd.Flags().IntVar(&limit, "limit", defaultRunsPage, "how many runs to list (0: every one)")
	cmd.Flags().StringVar(&after, "after", "", "list the runs after this one (the page before ended with it)")
	return cmd
}

// defaultRunsPage is how many runs `signoff runs` lists unless told: a
// store of a million runs answers a page as fast as an empty one.
const defaultRunsPage = 100

// listPage reads the runs f selects after the run named after ("" from the
// first), at most limit (0: every one), and says whether more follow. The
// table needs what each run's latest state says, which one read of the page
// gives (ListViews, as /runs pending and GET /v1/runs read theirs); whole
// (--json) is each run in full, as `show --json` prints it.
func listPage(ctx context.Context, eng *workflow.Engine, f storage.RunFilter, after string, limit int, whole bool) ([]*workflow.RunView, bool, error) {
	if after != "" {
		v, err := eng.Get(ctx, after)
		if err != nil {
			return nil, false, fmt.Errorf("--after %s: %w", after, err)
		}
		f.AfterCreated, f.AfterID = v.CreatedAt, v.ID
	}
	if limit > 0 {
		f.Limit = limit + 1
	}
	views, err := listViews(ctx, eng, f, whole)
	if err != nil {
		return nil, false, err
	}
	if limit > 0 && len(views) > limit {
		return views[:limit], true, nil
	}
	return views, false, nil
}

// listViews is the page f selects: each run in full when whole, else as
// its latest state says.
func listViews(ctx context.Context, eng *workflow.Engine, f storage.RunFilter, whole bool) ([]*workflow.RunView, error) {
	if !whole {
		return eng.ListViews(ctx, f)
	}
	runs, err := eng.List(ctx, f)
	if err != nil {
		return nil, err
	}
	views := make([]*workflow.RunView, 0, len(runs))
	for _, r := range runs {
		v, err := eng.Get(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		views = append(views, v)
	}
	return views, nil
}

// pageArgs is the runs command as it was called, without --after: the
// next page's command line is it and --after the last run listed.
func (c *cli) pageArgs(cmd *cobra.Command) []string {
	args := []string{"signoff", "runs"}
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if fl.Name != "after" {
			args = append(args, "--"+fl.Name+"="+fl.Value.String())
		}
	})
	return args
}

// statusPending is what a person calls a run waiting for a decision, as
// Slack's /runs pending does: --status takes it for waiting_approval.
const statusPending = "pending"

func statusNames() string {
	var s []string
	for _, st := range record.Statuses {
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
			return c.withReadApp(func(a *app) error { return c.finish(a, args[0], asJSON) })
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
			return c.withReadApp(func(a *app) error {
				hist, err := a.engine.History(c.ctx, args[0])
				if err != nil {
					return err
				}
				shop, err := a.readShop(c.ctx)
				if err != nil {
					return err
				}
				var usage int
				if shop != nil {
					if usage, err = shop.ModelCalls(c.ctx, args[0]); err != nil {
						return err
					}
				}
				renderTrace(c.out, hist, redactor(a.engine.Action), usage)
				return nil
			})
		},
	}
}

func (c *cli) decideCmd(verb string) *cobra.Command {
	var as, name, reason, edit, fingerprint string
	var action int
	var force bool
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
				RunID: args[0], Approver: record.Person{ID: as, Name: name}, Reason: reason,
				Fingerprint: fingerprint, Via: record.ViaCLI, Verdict: record.VerdictApprove,
			}
			if verb == "reject" {
				in.Verdict = record.VerdictReject
				if reason == "" {
					return usageError{"reject needs --reason"}
				}
			}
			if in.Force = force; force && reason == "" {
				return usageError{"approve --force needs --reason, the justification"}
			}
			if edit != "" {
				if !json.Valid([]byte(edit)) {
					return usageError{"--edit is not valid JSON: give the action's whole argument object, as show prints it, with your changes"}
				}
				in.Edit, in.EditIndex = json.RawMessage(edit), action-1
			}
			return c.withApp(func(a *app) error {
				if in.Edit != nil {
					// The terminal shows redacted fields as "[redacted]": one
					// left so in --edit keeps its stored value, as in Slack.
					restored, err := a.restoreRedacted(c.ctx, in.RunID, in.EditIndex, in.Edit)
					if err != nil {
						return err
					}
					in.Edit = restored
				}
				run, err := a.engine.Decide(c.ctx, in)
				if err != nil {
					return err
				}
				if run.Status == record.StatusExecuting {
					// The approval completed the quorum: run the approved
					// actions now, unless a server's worker took the run first.
					if _, err := a.engine.Follow(c.ctx, run.ID); err != nil {
						return err
					}
				}
				return c.finish(a, run.ID, false)
			})
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "who decides: a member id from the config's roles")
	cmd.Flags().StringVar(&name, "name", "", "the decider's display name")
	if verb == "approve" {
		cmd.Flags().StringVar(&reason, "reason", "", "why you approve (optional; recorded with the decision)")
	} else {
		cmd.Flags().StringVar(&reason, "reason", "", "why you reject (required; the requester is told)")
	}
	cmd.Flags().StringVar(&fingerprint, "fingerprint", "", "the fingerprint you reviewed, in full or the 16 characters show prints (refused if the proposal changed since)")
	if verb == "approve" {
		cmd.Flags().StringVar(&edit, "edit", "", "approve with these arguments instead, where policy allows editing: a JSON object that replaces the action's whole argument object (give every argument, not only the changed ones)")
		cmd.Flags().IntVar(&action, "action", 1, "which action --edit replaces (1-based)")
		cmd.Flags().BoolVar(&force, "force", false, "break-glass: approve at once, whatever the quorum, where the rule's break_glass role allows it (--reason required; announced and reviewed)")
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
				if _, err := a.engine.Cancel(c.ctx, args[0], record.Person{ID: as}, reason); err != nil {
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

func (c *cli) resolveCmd() *cobra.Command {
	var as, reason, receipt string
	var happened, notHappened, retry, abandon bool
	cmd := &cobra.Command{
		Use:   "resolve RUN --as USER --reason R (--happened [--receipt JSON] | --did-not-happen --retry | --did-not-happen --abandon)",
		Short: "Say what became of a run that needs attention, after looking at the target",
		Long: `Resolve a run that needs attention, once you have looked at the target:

  --happened [--receipt JSON]    the effect took place: the operation gets your
                                 receipt (a JSON object), and the run carries on
                                 with its next action or is done
  --did-not-happen --retry       it certainly did not happen: send it again now,
                                 under the same idempotency key
  --did-not-happen --abandon     it certainly did not happen: end the run as
                                 failed; nothing more is sent

Who may resolve is the config's resolve.role (default: the highest role). The
resolution is recorded, sealed and audited with who made it and why. A run
whose stored records are damaged can only be abandoned; verify keeps showing
the damage.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			choice, err := resolution(happened, notHappened, retry, abandon, receipt != "")
			if err != nil {
				return err
			}
			if as == "" || reason == "" {
				return usageError{"resolve needs --as USER and --reason R (what you checked at the target)"}
			}
			in := workflow.ResolveInput{RunID: args[0], By: record.Person{ID: as}, Choice: choice, Reason: reason, Via: "cli"}
			if receipt != "" {
				if !json.Valid([]byte(receipt)) {
					return usageError{"--receipt is not valid JSON: give an object, like {\"id\": \"D-123\"}"}
				}
				in.Receipt = json.RawMessage(receipt)
			}
			return c.withApp(func(a *app) error {
				run, err := a.engine.Resolve(c.ctx, in)
				if err != nil {
					return err
				}
				if run.Status == record.StatusExecuting || run.Status == record.StatusRunning {
					// Carry on now, unless a server's worker took the run first.
					if _, err := a.engine.Follow(c.ctx, run.ID); err != nil {
						return err
					}
				}
				return c.finish(a, run.ID, false)
			})
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "who resolves: a member id from the config's roles")
	cmd.Flags().StringVar(&reason, "reason", "", "what you checked at the target (required; recorded)")
	cmd.Flags().BoolVar(&happened, "happened", false, "the effect took place")
	cmd.Flags().StringVar(&receipt, "receipt", "", "with --happened: the target's receipt as you found it, a JSON object")
	cmd.Flags().BoolVar(&notHappened, "did-not-happen", false, "the effect certainly did not take place (with --retry or --abandon)")
	cmd.Flags().BoolVar(&retry, "retry", false, "with --did-not-happen: send it again under the same key")
	cmd.Flags().BoolVar(&abandon, "abandon", false, "with --did-not-happen: end the run as failed")
	return cmd
}

// resolution is the choice resolve's flags make, exactly one of three.
func resolution(happened, notHappened, retry, abandon, receipt bool) (record.Resolution, error) {
	const want = "say what became of it: --happened [--receipt JSON], --did-not-happen --retry, or --did-not-happen --abandon"
	switch {
	case happened && !notHappened && !retry && !abandon:
		return record.ResolveHappened, nil
	case receipt:
		return "", usageError{"--receipt goes only with --happened"}
	case notHappened && !happened && retry && !abandon:
		return record.ResolveRetry, nil
	case notHappened && !happened && abandon && !retry:
		return record.ResolveAbandon, nil
	case happened && notHappened:
		return "", usageError{"--happened and --did-not-happen contradict each other: " + want}
	case notHappened:
		return "", usageError{"--did-not-happen needs exactly one of --retry or --abandon"}
	case retry || abandon:
		return "", usageError{"--retry and --abandon go with --did-not-happen: " + want}
	}
	return "", usageError{"resolve needs a choice: " + want}
}

func (c *cli) extendCmd() *cobra.Command {
	var as string
	cmd := &cobra.Command{
		Use:   "extend RUN DURATION --as USER",
		Short: "Move a waiting run's deadline later by DURATION (like 24h, 90m or 2d)",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if as == "" {
				return usageError{"extend needs --as USER"}
			}
			d, err := bot.ParseExtension(args[1])
			if err != nil {
				return usageError{fmt.Sprintf("extend: %v; say how long, like 24h, 90m or 2d", err)}
			}
			return c.withApp(func(a *app) error {
				if _, err := a.engine.Extend(c.ctx, args[0], record.Person{ID: as}, d); err != nil {
					return err
				}
				return c.finish(a, args[0], false)
			})
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "who extends: a member of the role the rule needs, or above")
	return cmd
}

func (c *cli) reassignCmd() *cobra.Command {
	var as, to string
	cmd := &cobra.Command{
		Use:   "reassign RUN --to USER --as USER",
		Short: "Ask one person to decide a waiting run (others above the rule's role still may)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if as == "" || to == "" {
				return usageError{"reassign needs --to USER and --as USER"}
			}
			return c.withApp(func(a *app) error {
				if _, err := a.engine.Reassign(c.ctx, args[0], record.Person{ID: as}, record.Person{ID: to}); err != nil {
					return err
				}
				return c.finish(a, args[0], false)
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "who is asked to decide: a member of the role the rule needs")
	cmd.Flags().StringVar(&as, "as", "", "who reassigns: the requester, or a member of the role the rule needs")
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
			return c.withReadApp(func(a *app) error {
				hist, err := a.engine.History(c.ctx, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(c.out, emptyIfNil(hist))
				}
				// Read after the checkpoints: every event that names one of
				// them was committed with it.
				evs, err := a.engine.AuditLog(c.ctx, args[0])
				if err != nil {
					return err
				}
				renderHistory(c.out, hist, historyEvents(evs), a.engine.Action)
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
				run, err := a.engine.Fork(c.ctx, args[0], at, record.Person{ID: as})
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
	var anchors []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every chain and seal, and that the audit log extends what was recorded of it",
		Long: `Check every run's checkpoint chain and audit chain, and with the integrity
keys every seal (checkpoints, approval requests, decisions, operations, audit
events, each run's audit head, anchors); that every transition has its audit
event; that each run's audit log ends where its sealed head says; and that
the log extends every anchor stored. It prints the newest anchor (A12:HASH):
keep it somewhere the database's writers cannot reach (serve publishes one
every anchors.every, default ten minutes, to anchors.to or --anchor-to: the
log, a file or a URL; signoff anchor writes one now), and
--anchor A12:HASH proves later that the log still extends it (SEQ:HASH, an
event of the global chain as earlier versions printed it, works too). When
anchors go to a file and no --anchor is given, the newest in the file is
checked. Exit 1 when
anything is damaged; exit 2 when the keys given do not include the one the
store is sealed with, so that no seal could be checked.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			var as []workflow.Anchor
			for _, s := range anchors {
				a, err := workflow.ParseAnchor(s)
				if err != nil {
					return usageError{"--anchor: " + err.Error()}
				}
				as = append(as, a)
			}
			return c.withReadApp(func(a *app) error {
				from := map[workflow.Anchor]string{}
				if fs, ok := a.anchors.(*fileSink); ok && len(as) == 0 {
					if an, ok := fs.latest(); ok {
						as, from[an] = append(as, an), " (the newest in "+term(fs.path)+")"
					}
				}
				rep, err := a.engine.Verify(c.ctx, as...)
				if err != nil {
					return err
				}
				// Damage is a failed check; whether a run needs attention is
				// for show to say of that run.
				switch {
				case len(rep.Damaged) > 0 || rep.AuditProblem != "":
					c.code = exitFailed
				case rep.KeyNotGiven != "":
					c.code = exitRefused // nothing found damaged, but the seals could not be checked
				case !rep.OK():
					c.code = exitFailed
				}
				if asJSON {
					return writeJSON(c.out, rep)
				}
				for _, d := range rep.Damaged {
					fmt.Fprintf(c.out, "damaged: %s\n", term(d.Error()))
				}
				if rep.AuditProblem != "" {
					fmt.Fprintf(c.out, "damaged: audit log: %s\n", term(rep.AuditProblem))
				}
				if len(rep.Damaged) == 0 && rep.AuditProblem == "" {
					fmt.Fprintf(c.out, "ok: %d runs, %d checkpoints, %d audit events verified\n", rep.Runs, rep.Checkpoints, rep.AuditEvents)
				}
				switch {
				case rep.KeyNotGiven != "":
					fmt.Fprintf(c.out, "seals: not checked: the store is sealed with key %s, which you did not give (the keys given: %s, from %s)\n",
						term(rep.KeyNotGiven), strings.Join(a.keys.IDs(), ", "), keySource(c.opts, c.getenv))
				case rep.Unverified:
					fmt.Fprintf(c.out, "seals: not checked, no integrity keys here (%s)\n", keySource(c.opts, c.getenv))
				case rep.Keyed:
					fmt.Fprintf(c.out, "seals: checked; the store is sealed since %s", rep.KeyedSince.UTC().Format(time.RFC3339))
					if rep.Unkeyed > 0 {
						fmt.Fprintf(c.out, " (%d rows from before are unkeyed)", rep.Unkeyed)
					}
					fmt.Fprintln(c.out)
				default:
					fmt.Fprintf(c.out, "seals: none, the store was written without keys (%d rows unkeyed)\n", rep.Unkeyed)
				}
				if rep.Head.Seq > 0 {
					fmt.Fprintf(c.out, "audit anchor: %s\n", rep.Head)
				}
				for _, an := range as {
					if rep.AuditProblem == "" {
						fmt.Fprintf(c.out, "anchor %s%s: the log extends it\n", an, from[an])
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringArrayVar(&anchors, "anchor", nil, "A12:HASH, an audit anchor recorded earlier (from anchor, verify or serve's log; an older SEQ:HASH too); the log must extend it (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func (c *cli) expireCmd() *cobra.Command {
	return c.dueCmd("expire", "End every waiting run whose deadline has passed", (*workflow.Engine).ExpireDue, "%d run(s) expired\n")
}

func (c *cli) remindCmd() *cobra.Command {
	return c.dueCmd("remind", "Send every reminder before a deadline that is due (serve does it every poll)", (*workflow.Engine).RemindDue, "%d reminder(s) recorded\n")
}

func (c *cli) escalateCmd() *cobra.Command {
	return c.dueCmd("escalate", "Apply every escalation of a pending request that is due (serve does it every poll)", (*workflow.Engine).EscalateDue, "%d run(s) escalated\n")
}

// dueCmd is a command that does once what a loop of serve does every poll
// (expire, remind, escalate): due acts on every run it is due for, and
// said words the count.
func (c *cli) dueCmd(use, short string, due func(*workflow.Engine, context.Context) (int, error), said string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withApp(func(a *app) error {
				n, err := due(a.engine, c.ctx)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.out, said, n)
				return nil
			})
		},
	}
}

func (c *cli) shopCmd() *cobra.Command {
	shop := &cobra.Command{
		Use: "shop", Short: "The practice shop: its orders, what it did, and changes made by hand",
		// Without this, a mistyped subcommand would print the help and exit 0.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError{"shop needs a subcommand (see signoff shop --help)"}
		},
	}
	var asJSON bool
	changes := &cobra.Command{
		Use:   "changes",
		Short: "What the shop did, oldest first",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withShopReader(func(shop *demo.Shop) error {
				var ch []demo.Change
				if shop != nil {
					var err error
					if ch, err = shop.Changes(c.ctx); err != nil {
						return err
					}
				}
				if asJSON {
					return writeJSON(c.out, emptyIfNil(ch))
				}
				renderChanges(c.out, ch)
				return nil
			})
		},
	}
	changes.Flags().BoolVar(&asJSON, "json", false, "print the changes as JSON")
	var ordersJSON bool
	orders := &cobra.Command{
		Use:   "orders",
		Short: "The shop's orders and their charges (what there is to refund)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withApp(func(a *app) error {
				shop, err := a.practiceShop()
				if err != nil {
					return err
				}
				list, err := shop.Orders(c.ctx)
				if err != nil {
					return err
				}
				if ordersJSON {
					return writeJSON(c.out, emptyIfNil(list))
				}
				renderOrders(c.out, list)
				return nil
			})
		},
	}
	orders.Flags().BoolVar(&ordersJSON, "json", false, "print the orders as JSON")
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
				shop, err := a.practiceShop()
				if err != nil {
					return err
				}
				ch, err := shop.ManualRefund(c.ctx, args[0], args[1], args[2], by)
				if err != nil {
					c.code = exitRefused
					fmt.Fprintln(c.errOut, "signoff: refund refused:", term(err.Error()))
					return nil
				}
				renderChanges(c.out, []demo.Change{ch})
				return nil
			})
		},
	}
	refund.Flags().StringVar(&by, "by", "", "who made the change")
	shop.AddCommand(changes, orders, refund)
	return shop
}

// restoreRedacted gives an edit the stored value of every field it leaves
// showing "[redacted]" (the action's redact: list), so that an approver who
// copies the arguments as show prints them never executes the placeholder.
func (a *app) restoreRedacted(ctx context.Context, runID string, index int, edit json.RawMessage) (json.RawMessage, error) {
	v, err := a.engine.Get(ctx, runID)
	if err != nil {
		return nil, err
	}
	if index < 0 || index >= len(v.Actions) {
		return edit, nil // Decide refuses it, naming the actions there are
	}
	spec, ok := a.engine.Action(v.Actions[index].Name)
	if !ok {
		return edit, nil
	}
	canon, err := jsonvalue.Canonical(edit)
	if err != nil {
		return nil, usageError{"--edit: " + err.Error()}
	}
	restored, err := bot.RestoreRedacted(v.Actions[index].Args, canon, spec.Redact)
	if err != nil {
		return nil, fmt.Errorf("restore redacted fields of the edit: %w", err)
	}
	return restored, nil
}

// exactArgs wants n arguments, and names the ones missing or unexpected from
// the command's usage line (bad input: exit 2).
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
		usage := fmt.Sprintf("usage: %s; see %s --help", strings.TrimSuffix(cmd.UseLine(), " [flags]"), cmd.CommandPath())
		names := argNames(cmd.Use)
		switch {
		case len(args) < n && len(names) == n:
			return usageError{fmt.Sprintf("%s needs %s (%s)", name, strings.Join(names[len(args):], " "), usage)}
		case len(args) < n:
			return usageError{fmt.Sprintf("%s needs %d argument(s), got %d (%s)", name, n, len(args), usage)}
		case n == 0:
			return usageError{fmt.Sprintf("%s takes no arguments, got %s (%s)", name, shellLine(args...), usage)}
		}
		return usageError{fmt.Sprintf("%s: unexpected argument %s (%s)", name, shellLine(args[n:]...), usage)}
	}
}

// argNames are the positional arguments of a usage line such as
// "approve RUN --as USER": the words after the command and before the flags.
func argNames(use string) []string {
	var names []string
	for _, w := range strings.Fields(use)[1:] {
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[") {
			break
		}
		names = append(names, w)
	}
	return names
}
