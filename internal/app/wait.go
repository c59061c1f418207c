package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// defaultWaitTimeout is how long wait and submit --wait wait at most unless
// told otherwise: long enough for a person to look, short enough that an
// agent's step does not hang for ever.
const defaultWaitTimeout = 10 * time.Minute

// pending says whether a run in status s may still move on without anyone
// being asked to act on it first: a wait goes on through these statuses and
// ends at any other (done, failed, rejected, expired, cancelled, or
// needs_attention, where a person must act).
func pending(s record.Status) bool {
	switch s {
	case record.StatusRunning, record.StatusWaitingApproval, record.StatusExecuting, record.StatusScheduled:
		return true
	}
	return false
}

// waitFlags are the flags of a command that waits for a run's outcome.
type waitFlags struct {
	on      bool
	timeout time.Duration
}

func (w *waitFlags) add(cmd *cobra.Command, withSwitch bool) {
	if withSwitch {
		cmd.Flags().BoolVar(&w.on, "wait", false, "then wait until the run is finished or needs a person (see signoff wait --help)")
	}
	cmd.Flags().DurationVar(&w.timeout, "timeout", defaultWaitTimeout, "how long to wait at most, like 90s or 10m (0: no limit); then exit 3 or 6, the run still waiting or running")
}

// check refuses a timeout that is not a time to wait.
func (w *waitFlags) check(cmd *cobra.Command) error {
	if w.timeout < 0 {
		return usageError{fmt.Sprintf("--timeout %s: want 0 (no limit) or a positive duration like 10m", w.timeout)}
	}
	if !w.on && cmd.Flags().Changed("timeout") {
		return usageError{"--timeout goes with --wait"}
	}
	return nil
}

func (c *cli) waitCmd() *cobra.Command {
	var asJSON bool
	w := waitFlags{on: true}
	cmd := &cobra.Command{
		Use:   "wait RUN",
		Short: "Wait until a run is finished or needs a person, then show it and exit with its status's code",
		Long: `Wait until the run is no longer running, waiting for approval or executing:
it is done (exit 0), failed (1), rejected, expired or cancelled (4), or needs
attention (5). Then print it as show does and exit with that code. When the
timeout passes first, print it as it is and exit 3 (still waiting for
approval) or 6 (still running or executing).

It does not poll: it sleeps until a commit may have changed the run, its own
process's or another's (another CLI, a server, another replica).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(cmd); err != nil {
				return err
			}
			return c.withReadApp(func(a *app) error { return c.waitRun(a, args[0], asJSON, w.timeout) })
		},
	}
	w.add(cmd, false)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run as JSON")
	return cmd
}

// waitRun waits until run id is no longer pending, or timeout (0: none)
// passes or the command is interrupted, then prints the run and sets the exit
// code from its status.
func (c *cli) waitRun(a *app, id string, asJSON bool, timeout time.Duration) error {
	ctx := c.ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	stop := a.feedChanges(ctx)
	defer stop()
	v, err := a.engine.Get(ctx, id)
	if err != nil {
		return err
	}
	if pending(v.Status) && v.Problem == "" {
		a.log.Debug("waiting for the run to move on", "run_id", id, "status", string(v.Status), "timeout", timeout.String())
	}
	for pending(v.Status) && v.Problem == "" {
		var changed bool
		if v, changed, err = a.engine.WaitRun(ctx, id, v.Status); err != nil {
			return err
		}
		if !changed {
			break // the wait ended: v is the run as it is now
		}
	}
	stop()
	if err := c.printRun(a, v, asJSON); err != nil {
		return err
	}
	if pending(v.Status) && v.Problem == "" {
		why := fmt.Sprintf("after waiting %s (--timeout)", timeout)
		if c.ctx.Err() != nil {
			why = "when the wait was interrupted"
		}
		fmt.Fprintf(c.errOut, "signoff: run %s is still %s %s\n", id, v.Status, why)
	}
	return nil
}

// feedChanges starts the store's change feed, which wakes this process's
// waiters on other processes' commits, until ctx ends or stop is called;
// stop waits for it to end.
func (a *app) feedChanges(ctx context.Context) (stop func()) {
	feed, ok := a.store.(storage.ChangeFeed)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := feed.FeedChanges(ctx, a.changes); err != nil {
			a.log.Warn("waking waiters on other processes' commits", "error", err.Error())
		}
	}()
	return sync.OnceFunc(func() {
		cancel()
		<-done
	})
}
