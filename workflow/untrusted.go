package workflow

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/show"
)

// DecodeStrict decodes one JSON value into v, refusing unknown fields, duplicate
// keys and trailing data. It is for input from outside (proposals, edits).
func DecodeStrict(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("empty input")
	}
	return jsonvalue.Readable(jsonv2.Unmarshal(b, v, jsonv2.RejectUnknownMembers(true)))
}

// checkLines refuses single-line fields that are not one line of plain text,
// and ids (the names in ids) that are blank. It names the first field at fault.
func checkLines(fields []lineField) *record.RefusedError {
	for _, f := range fields {
		if f.id && strings.TrimSpace(f.value) == "" && f.value != "" {
			return refused(record.CodeInvalidInput, "", "%s must not be blank", f.name)
		}
		if p := show.LineProblem(f.value); p != "" {
			return refused(record.CodeInvalidInput, "", "%s %s", f.name, p)
		}
	}
	return nil
}

// lineField is one single-line field of an input: its name for the message,
// its value, and whether it is an id (and so may not be blank).
type lineField struct {
	name  string
	value string
	id    bool
}

// rowProblem says how the columns of a run row that decide who sees it or
// may act on it disagree with its sealed state, or returns "". The row is not
// sealed, so each such column must agree with the checkpoint: who asked
// (which token lists and reads the run, who may not approve it), which agent
// runs its steps, its task, where its events go, and, while it waits, the
// deadline decisions are checked against.
func rowProblem(r *record.Run, st *record.State) string {
	switch {
	case st.Requester.ID != r.RequesterID:
		return fmt.Sprintf("the run row names requester %q, its checkpoint %q", r.RequesterID, st.Requester.ID)
	case st.Workflow != r.Workflow:
		return fmt.Sprintf("the run row names workflow %q, its checkpoint %q", r.Workflow, st.Workflow)
	case st.TaskID != r.TaskID:
		return fmt.Sprintf("the run row names task %q, its checkpoint %q", r.TaskID, st.TaskID)
	case st.CallbackURL != r.CallbackURL:
		return callbackMismatch
	case r.Status == record.StatusWaitingApproval && st.Gate != nil && st.Gate.Deadline != nil && r.Deadline.UnixMilli() != st.Gate.Deadline.UnixMilli():
		return "the run row's deadline is not the one its checkpoint holds"
	}
	return ""
}

// callbackMismatch is the problem of a run row whose callback URL is not the
// one its sealed checkpoint holds.
const callbackMismatch = "the run row's callback URL is not the one its checkpoint holds"

// maxCallbackURL bounds a callback URL: longer ones are refused, not cut.
const maxCallbackURL = 2048

// checkCallback refuses, before anything is written, a callback URL that is
// not one line, not an absolute http(s) URL, carries credentials, has a path
// a server could read otherwise than signoff (CanonicalCallbackURL), or is
// not allowed by the config. It returns the URL in its canonical form, the
// one matched, stored and sent. "" (no callback) is fine.
func (e *Engine) checkCallback(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	if p := show.LineProblem(raw); p != "" {
		return "", refused(record.CodeInvalidInput, "", "invalid proposal: callback_url %s", p)
	}
	u, err := url.Parse(raw)
	switch {
	case len(raw) > maxCallbackURL:
		return "", refused(record.CodeInvalidInput, "", "invalid proposal: callback_url is %d characters; at most %d", len(raw), maxCallbackURL)
	case strings.ContainsFunc(raw, unicode.IsSpace):
		return "", refused(record.CodeInvalidInput, "", "invalid proposal: callback_url must not contain spaces")
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "":
		return "", refused(record.CodeInvalidInput, "", "invalid proposal: callback_url must be an absolute http(s) URL such as https://agents.example.com/signoff/events")
	case u.User != nil:
		return "", refused(record.CodeInvalidInput, "", "invalid proposal: callback_url must not carry a user or password: events are signed with the callback secret")
	}
	canon, err := CanonicalCallbackURL(raw)
	if err != nil {
		return "", refused(record.CodeInvalidInput, "", "invalid proposal: callback_url %v", err)
	}
	switch {
	case e.cbAllowed != nil && e.cbAllowed(canon):
		return canon, nil
	case len(e.cbPrefixes) == 0:
		return "", refused(record.CodeCallbackNotAllowed, "", "callback_url is not allowed: this server allows no callbacks (the config's api.callbacks.allow is empty)")
	}
	if canon != raw {
		return "", refused(record.CodeCallbackNotAllowed, "", "callback_url is not allowed: it reads as %s, which does not start with one of %s (the config's api.callbacks.allow)", canon, strings.Join(e.cbPrefixes, ", "))
	}
	return "", refused(record.CodeCallbackNotAllowed, "", "callback_url is not allowed: it must start with one of %s (the config's api.callbacks.allow)", strings.Join(e.cbPrefixes, ", "))
}
