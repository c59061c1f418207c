package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow/internal/execute"
)

// Class is how the engine treats an error from an executor: the one place where
// retry policy is decided.
type Class = execute.Class

// The classes of error.
const (
	// ClassUnknown: the outcome cannot be known from the error (a timeout, a
	// dropped connection). For a read it is retried; for a write the target is
	// asked whether the idempotency key happened before anything else is done.
	ClassUnknown = execute.ClassUnknown
	// ClassTransient: the target certainly did nothing and a retry may succeed.
	ClassTransient = execute.ClassTransient
	// ClassPermanent: the target refused and nothing happened; retrying cannot help.
	ClassPermanent = execute.ClassPermanent
)

// Permanent marks err as a refusal that a retry cannot change.
func Permanent(err error) error { return execute.Permanent(err) }

// Transient marks err as a failure where the target certainly did nothing.
func Transient(err error) error { return execute.Transient(err) }

// RetryAfter marks a transient err with the wait the target asked for (an
// HTTP 429 or 503 with Retry-After). The engine waits at least that long, and
// at most MaxRetryAfter, before the next attempt.
func RetryAfter(err error, d time.Duration) error { return execute.RetryAfter(err, d) }

// MaxRetryAfter bounds the wait a target may ask for: a worker waiting longer
// would hold the run past its lease for nothing.
const MaxRetryAfter = execute.MaxRetryAfter

// Classify decides the class of err. Any error in the chain with a
// `Permanent() bool` or `Transient() bool` method returning true decides it, so
// executors need not import this package to classify their errors.
func Classify(err error) Class { return execute.Classify(err) }

// UnknownRun is the refusal for a run that does not exist (made in one
// place, record.UnknownRun, for the engine's machinery and the API alike).
func UnknownRun(id string) *record.RefusedError { return record.UnknownRun(id) }

func refused(code, runID, format string, args ...any) *record.RefusedError {
	return &record.RefusedError{Code: code, RunID: runID, Msg: fmt.Sprintf(format, args...)}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// IntegrityError says that a run's stored data failed a check (its chain,
// a seal, its audit log). The engine's checks live in packages of their own
// and share the type through record; this name keeps it where callers of
// the engine look for it (errors.As with a *workflow.IntegrityError).
type IntegrityError = record.IntegrityError
