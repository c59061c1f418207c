package workflow

import (
	"context"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow/internal/execute"
)

// Executor carries out one kind of action against its target. The engine calls
// it; steps never do. Check verifies read-only preconditions and changes
// nothing; Execute performs the action once under the idempotency key (the
// same key and arguments again return the first receipt and change nothing);
// Lookup asks the target whether key happened. Errors are marked with
// Permanent, Transient or RetryAfter; any other error of Execute means the
// outcome is unknown.
type Executor = execute.Executor

// Call is everything the engine knows about one attempt at an operation, for
// an executor that forwards more than the key and the arguments to its target
// (a webhook body names the run, the fingerprint and who approved).
type Call = execute.Call

// CallExecutor is an Executor that wants the whole Call. The engine uses
// ExecuteCall instead of Execute when an executor has it; the rules of Execute
// apply unchanged.
type CallExecutor = execute.CallExecutor

// Agent is a workflow made of steps. A step reads and decides and never changes
// the world; it appends to the state (messages, evidence, model calls) and, when
// it is the last, sets the proposal. The engine checkpoints after every step.
type Agent interface {
	// Step runs the next step on st (st.Step steps are done). It returns true when
	// the agent has finished: st.Actions then holds the proposal (possibly empty).
	Step(ctx context.Context, st *record.State) (done bool, err error)
}

// Clock tells the time and waits. Tests inject a fake one.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends.
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns the current time.
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx ends.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
