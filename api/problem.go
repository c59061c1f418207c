package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// The API's own problem codes; the engine's refusals keep theirs.
const (
	CodeUnauthorized         = "unauthorized"
	CodeInsufficientScope    = "insufficient_scope"
	CodeRequesterMismatch    = "requester_mismatch"
	CodeRateLimited          = "rate_limited"
	CodeTooLarge             = "too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeInvalidCursor        = "invalid_cursor"
	CodeNotFound             = "not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeInternal             = "internal"
	// CodeRequestTimeout: the body did not arrive within the server's read
	// timeout (a client that stalled), answered 408.
	CodeRequestTimeout = "request_timeout"
)

// problemError is a refusal the API writes as problem+json.
type problemError struct {
	p       Problem
	headers map[string]string
}

func (e *problemError) Error() string { return e.p.Code + ": " + deref(e.p.Detail) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// problem builds a refusal. type is a stable URN per code, so clients may
// switch on either.
func problem(status int, code, detail string) *problemError {
	p := Problem{Type: "urn:signoff:problem:" + code, Title: http.StatusText(status), Status: status, Code: code}
	if detail != "" {
		p.Detail = &detail
	}
	return &problemError{p: p}
}

func (e *problemError) withRun(id string) *problemError {
	if id != "" {
		e.p.RunId = &id
	}
	return e
}

func (e *problemError) withHeader(k, v string) *problemError {
	if e.headers == nil {
		e.headers = map[string]string{}
	}
	e.headers[k] = v
	return e
}

// statusOf is the HTTP status of each engine refusal code.
func statusOf(code string) int {
	switch code {
	case record.CodeUnknownRun:
		return http.StatusNotFound
	case record.CodeInvalidInput:
		return http.StatusBadRequest
	case record.CodeNoRole, record.CodeSelfApproval, record.CodeUnknownRequester, record.CodeSignInAgain:
		return http.StatusForbidden
	case record.CodeCallbackNotAllowed:
		// The proposal is well formed but asks for what the config does not
		// allow: no run's state is involved, so it is no conflict.
		return http.StatusUnprocessableEntity
	}
	// not_cancellable, idempotency_key_reused, not_waiting, already_decided, integrity, …:
	// the request was fine but the run is not in a state to take it.
	return http.StatusConflict
}

// toProblem turns any error a handler, the binder or echo returned into the
// problem to answer. Errors that are not refusals are logged by the caller
// and answered without their text: it may hold internals.
func toProblem(err error) (pe *problemError, internal bool) {
	if errors.As(err, &pe) {
		return pe, false
	}
	var r *record.RefusedError
	if errors.As(err, &r) {
		status := statusOf(r.Code)
		if errors.Is(err, workflow.ErrProposalTooLarge) {
			return problem(http.StatusRequestEntityTooLarge, CodeTooLarge, r.Error()), false
		}
		pe = problem(status, r.Code, r.Error()).withRun(r.RunID)
		if fields := workflow.ProposalProblems(err); len(fields) > 0 {
			pe = problem(http.StatusUnprocessableEntity, r.Code, r.Error())
			list := make([]FieldError, len(fields))
			for i, f := range fields {
				list[i] = FieldError{Field: f.Field, Message: f.Message}
			}
			pe.p.Errors = &list
		}
		return pe, false
	}
	var ie *workflow.IntegrityError
	if errors.As(err, &ie) {
		return problem(http.StatusConflict, record.CodeIntegrity,
			"the run's stored state failed its integrity check; it needs a person").withRun(ie.RunID), false
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return problem(he.Code, CodeNotFound, "no such route"), false
		case http.StatusMethodNotAllowed:
			return problem(he.Code, CodeMethodNotAllowed, "this route does not take that method"), false
		case http.StatusRequestEntityTooLarge:
			return problem(he.Code, CodeTooLarge, fmt.Sprint(he.Message)), false
		case http.StatusUnsupportedMediaType:
			return problem(he.Code, CodeUnsupportedMediaType, fmt.Sprint(he.Message)), false
		}
		if he.Code >= 400 && he.Code < 500 {
			// The generated wrapper's parameter errors ("Invalid format for parameter limit: …").
			return problem(he.Code, record.CodeInvalidInput, fmt.Sprint(he.Message)), false
		}
	}
	return problem(http.StatusInternalServerError, CodeInternal, "internal error; the server log has the cause"), true
}

// writeProblem writes p as problem+json. encoding/json escapes what could
// be read as markup, so agent-written text it echoes stays inert.
func writeProblem(c echo.Context, pe *problemError) error {
	for k, v := range pe.headers {
		c.Response().Header().Set(k, v)
	}
	b, err := json.Marshal(pe.p)
	if err != nil {
		return fmt.Errorf("encode problem: %w", err)
	}
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(b)))
	c.Response().WriteHeader(pe.p.Status)
	_, err = c.Response().Write(b)
	return err
}
