package record

import (
	"errors"
	"fmt"
	"time"
)

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
	// CodeNoBreakGlass: a forced approval of a run whose rule has no break_glass.
	CodeNoBreakGlass = "no_break_glass"
	// CodeNoReview: an acknowledge of a run that has no follow-up review.
	CodeNoReview       = "no_review"
	CodeNotCancellable = "not_cancellable"
	// CodeNothingToResolve: a resolve of a run that does not need attention.
	CodeNothingToResolve = "nothing_to_resolve"
	CodeIntegrity        = "integrity"
	// CodeIdempotencyKeyReused: a submit reused a key for a different proposal.
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	CodeUnknownRequester     = "unknown_requester"
	// CodeCallbackNotAllowed: a proposal's callback_url is not one the config allows.
	CodeCallbackNotAllowed = "callback_not_allowed"
	// CodeConfirmOnWeb: an approval of a step-up rule given elsewhere than
	// the web console. It is recorded (EventApprovalUnconfirmed) but does not
	// count until confirmed on the run's page.
	CodeConfirmOnWeb = "confirm_on_web"
	// CodeSignInAgain: a web approval of a step-up rule by someone whose
	// sign-in is older than the rule allows, or unknown.
	CodeSignInAgain = "sign_in_again"
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

// UnknownRun is the refusal for a run that does not exist. The API answers
// it too for a run the caller may not see, so it is made in one place.
func UnknownRun(id string) *RefusedError {
	return &RefusedError{Code: CodeUnknownRun, RunID: id, Msg: "no such run"}
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
