package workflow

import (
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow/internal/execute"
)

// ActionSpec is one kind of action the engine may run: what policy knows of
// its arguments (the schema and the redacted fields) and the executor that
// carries it out against its target (and ReconcileWithin, how long the
// target may take to say what became of an attempt; DefaultReconcileWithin
// when zero).
type ActionSpec = execute.ActionSpec

// NewActionSpec compiles the action's schema and redactions (see
// policy.NewActionSpec) and binds them to exec, which may be nil when the spec is
// only used to validate.
func NewActionSpec(name string, schemaJSON []byte, exec Executor, redact []string) (*ActionSpec, error) {
	return execute.NewActionSpec(name, schemaJSON, exec, redact)
}

// DefaultReconcileWithin is how long a target may take to say what became of
// an attempt (its lookup answering "still in progress", or failing) when the
// action sets no budget of its own (ActionSpec.ReconcileWithin).
const DefaultReconcileWithin = execute.DefaultReconcileWithin

// OperationKey is the idempotency key of a run's action: stable across crashes and
// resumes, so a retry can never become a second effect.
func OperationKey(runID string, index int) string { return execute.OperationKey(runID, index) }

// CallFor is the Call of a plain Execute(key, a): the run id is the key's
// prefix (see OperationKey), and nothing else is known.
func CallFor(key string, a record.Action) Call { return execute.CallFor(key, a) }

// ParkedUntil says until when an executing run waits for its target (a
// Retry-After, a backoff, an action still in progress), or zero when it
// does not.
func ParkedUntil(r *record.Run, now time.Time) time.Time { return execute.ParkedUntil(r, now) }
