package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"
)

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

// Refusal codes: why the engine refused a request. Each refusal changes nothing
// but the audit log (an expired deadline also ends the run as expired).
const (
	CodeInvalidInput     = "invalid_input"
	CodeUnknownRun       = "unknown_run"
	CodeNotWaiting       = "not_waiting"
	CodeAlreadyDecided   = "already_decided"
	CodeAlreadyVoted     = "already_voted"
	CodeStaleFingerprint = "stale_fingerprint"
	CodeNoRole           = "no_role"
	CodeSelfApproval     = "self_approval"
	CodeExpired          = "expired"
	CodeEditNotAllowed   = "edit_not_allowed"
	CodeNotCancellable   = "not_cancellable"
	// CodeNothingToResolve: a resolve of a run that does not need attention.
	CodeNothingToResolve = "nothing_to_resolve"
	CodeIntegrity        = "integrity"
	// CodeIdempotencyKeyReused: a submit reused a key for a different proposal.
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	CodeUnknownRequester     = "unknown_requester"
	// CodeCallbackNotAllowed: a proposal's callback_url is not one the config allows.
	CodeCallbackNotAllowed = "callback_not_allowed"
)

// ErrIdempotencyKeyReused is in the chain of the refusal of a submit whose
// idempotency key already holds a run with a different proposal; the
// RefusedError's RunID names that run.
var ErrIdempotencyKeyReused = errors.New("idempotency key reused for a different proposal")

// RefusedError says the engine refused a request and why. When someone else
// decided first, By and At say who and when.
type RefusedError struct {
	Code  string
	RunID string
	Msg   string
	By    string
	At    time.Time
	Err   error // a sentinel to match with errors.Is, when the code has one
	// A refused decision also says what the engine found, so that a caller
	// can word the refusal itself (a Slack click) without reading the run
	// again: Button why a decision naming a request was refused before the
	// rest was checked ("" when that was not why), RunStatus the run's
	// status, RequestStatus and Fingerprint those of the request decided on
	// (empty when there was none).
	Button        ButtonProblem
	RunStatus     Status
	RequestStatus RequestStatus
	Fingerprint   string
}

// ButtonProblem is why a decision that names its request and fingerprint
// (a Slack button) cannot act on it.
type ButtonProblem string

// The button problems, in the order Decide checks them.
const (
	// ButtonOtherRun: the request named is not one of the run's.
	ButtonOtherRun ButtonProblem = "other_run"
	// ButtonFingerprint: the fingerprint given is not the request's.
	ButtonFingerprint ButtonProblem = "fingerprint"
	// ButtonSuperseded: an edit replaced the request with a newer one.
	ButtonSuperseded ButtonProblem = "superseded"
	// ButtonReplaced: the run waits on another request than the one named.
	ButtonReplaced ButtonProblem = "replaced"
)

func (e *RefusedError) Unwrap() error { return e.Err }

func (e *RefusedError) Error() string {
	if e.RunID != "" {
		return fmt.Sprintf("run %s: %s", e.RunID, e.Msg)
	}
	return e.Msg
}

// UnknownRun is the refusal for a run that does not exist. The API answers
// it too for a run the caller may not see, so it is made in one place.
func UnknownRun(id string) *RefusedError {
	return refused(CodeUnknownRun, id, "no such run")
}

func refused(code, runID, format string, args ...any) *RefusedError {
	return &RefusedError{Code: code, RunID: runID, Msg: fmt.Sprintf(format, args...)}
}

// IsRefused reports whether err is a refusal with one of the codes (any code when none given).
func IsRefused(err error, codes ...string) bool {
	var r *RefusedError
	if !errors.As(err, &r) {
		return false
	}
	if len(codes) == 0 {
		return true
	}
	for _, c := range codes {
		if r.Code == c {
			return true
		}
	}
	return false
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
