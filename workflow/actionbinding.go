package workflow

import (
	"time"

	"github.com/signoff-dev/signoff/policy"
)

// ActionSpec is one kind of action the engine may run: what policy knows of
// its arguments (the schema and the redacted fields) and the executor that
// carries it out against its target.
type ActionSpec struct {
	*policy.ActionSpec
	Executor Executor
	// ReconcileWithin is how long the target may take to say what became of
	// an attempt before the outcome is called unprovable (see
	// DefaultReconcileWithin, used when zero).
	ReconcileWithin time.Duration
}

// NewActionSpec compiles the action's schema and redactions (see
// policy.NewActionSpec) and binds them to exec, which may be nil when the spec is
// only used to validate.
func NewActionSpec(name string, schemaJSON []byte, exec Executor, redact []string) (*ActionSpec, error) {
	p, err := policy.NewActionSpec(name, schemaJSON, redact)
	if err != nil {
		return nil, err
	}
	return &ActionSpec{ActionSpec: p, Executor: exec}, nil
}

func (s *ActionSpec) reconcileWithin() time.Duration {
	if s.ReconcileWithin > 0 {
		return s.ReconcileWithin
	}
	return DefaultReconcileWithin
}
