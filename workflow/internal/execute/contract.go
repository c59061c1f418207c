package execute

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/policy"
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

// OperationKey is the idempotency key of a run's action: stable across crashes and
// resumes, so a retry can never become a second effect.
func OperationKey(runID string, index int) string {
	return fmt.Sprintf("%s/%d", runID, index+1)
}

// CallFor is the Call of a plain Execute(key, a): the run id is the key's
// prefix (see OperationKey), and nothing else is known.
func CallFor(key string, a record.Action) Call {
	run, _, _ := strings.Cut(key, "/")
	return Call{Key: key, RunID: run, Action: a}
}

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

// DefaultReconcileWithin is how long a target may take to say what became of
// an attempt (its lookup answering "still in progress", or failing) when the
// action sets no budget of its own (ActionSpec.ReconcileWithin).
const DefaultReconcileWithin = 10 * time.Minute

// Class is how the engine treats an error from an executor: the one place where
// retry policy is decided.
type Class int

// The classes of error.
const (
	// ClassUnknown: the outcome cannot be known from the error (a timeout, a
	// dropped connection). For a read it is retried; for a write the target is
	// asked whether the idempotency key happened before anything else is done.
	ClassUnknown Class = iota
	// ClassTransient: the target certainly did nothing and a retry may succeed.
	ClassTransient
	// ClassPermanent: the target refused and nothing happened; retrying cannot help.
	ClassPermanent
)

func (c Class) String() string {
	switch c {
	case ClassTransient:
		return "transient"
	case ClassPermanent:
		return "permanent"
	}
	return "unknown"
}

type permanentError struct{ err error }

func (e permanentError) Error() string   { return e.err.Error() }
func (e permanentError) Unwrap() error   { return e.err }
func (e permanentError) Permanent() bool { return true }

type transientError struct{ err error }

func (e transientError) Error() string   { return e.err.Error() }
func (e transientError) Unwrap() error   { return e.err }
func (e transientError) Transient() bool { return true }

// Permanent marks err as a refusal that a retry cannot change.
func Permanent(err error) error { return permanentError{err} }

// Transient marks err as a failure where the target certainly did nothing.
func Transient(err error) error { return transientError{err} }

// RetryAfter marks a transient err with the wait the target asked for (an
// HTTP 429 or 503 with Retry-After). The engine waits at least that long, and
// at most MaxRetryAfter, before the next attempt.
func RetryAfter(err error, d time.Duration) error { return retryAfterError{transientError{err}, d} }

// MaxRetryAfter bounds the wait a target may ask for: a worker waiting longer
// would hold the run past its lease for nothing.
const MaxRetryAfter = 5 * time.Minute

type retryAfterError struct {
	transientError
	d time.Duration
}

func (e retryAfterError) Unwrap() error             { return e.transientError }
func (e retryAfterError) RetryAfter() time.Duration { return e.d }

// retryAfterOf returns the wait err asks for, or 0.
func retryAfterOf(err error) time.Duration {
	var r interface{ RetryAfter() time.Duration }
	if errors.As(err, &r) {
		return min(max(r.RetryAfter(), 0), MaxRetryAfter)
	}
	return 0
}

// Classify decides the class of err. Any error in the chain with a
// `Permanent() bool` or `Transient() bool` method returning true decides it, so
// executors need not import this package to classify their errors.
func Classify(err error) Class {
	var p interface{ Permanent() bool }
	if errors.As(err, &p) && p.Permanent() {
		return ClassPermanent
	}
	var t interface{ Transient() bool }
	if errors.As(err, &t) && t.Transient() {
		return ClassTransient
	}
	return ClassUnknown
}
