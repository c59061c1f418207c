package workflow

import (
	"context"
	"time"

	"github.com/signoff-dev/signoff/record"
)

// Executor carries out one kind of action against its target. The engine calls
// it; steps never do.
type Executor interface {
	// Check verifies read-only preconditions (the order exists, the charge is
	// captured). It must not change anything. Return Permanent(err) when the
	// action can never succeed; other errors are retried within a budget.
	Check(ctx context.Context, a record.Action) error
	// Execute performs the action once under the idempotency key. Calling it
	// again with the same key and arguments must return the first receipt and
	// change nothing. Return Permanent(err) when the target refused and nothing
	// happened, Transient(err) when the target certainly did nothing and a retry
	// may succeed; any other error means the outcome is unknown.
	Execute(ctx context.Context, key string, a record.Action) (record.Receipt, error)
	// Lookup asks the target whether key happened: (receipt, true) when it did,
	// (zero, false, nil) when it certainly did not, an error when it cannot tell.
	Lookup(ctx context.Context, key string) (record.Receipt, bool, error)
}

// Call is everything the engine knows about one attempt at an operation, for
// an executor that forwards more than the key and the arguments to its target
// (a webhook body names the run, the fingerprint and who approved).
type Call struct {
	Key         string        // the idempotency key, e.g. RUN/1
	RunID       string        // the run the operation belongs to
	Action      record.Action // the stored, approved action
	Fingerprint string        // what the approvers approved
	ApprovedBy  []string      // who approved, each once, in the order they first did
	Attempt     int           // 1 for the first call with this key
}

// CallExecutor is an Executor that wants the whole Call. The engine uses
// ExecuteCall instead of Execute when an executor has it; the rules of Execute
// apply unchanged.
type CallExecutor interface {
	Executor
	ExecuteCall(ctx context.Context, c Call) (record.Receipt, error)
}

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
