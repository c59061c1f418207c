package workflow

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/signoff-dev/signoff/record"
)

// Everything an agent or a requester writes (a summary, a task id, evidence,
// a name, argument strings) is untrusted text. Shown raw, it can drive a
// terminal (ESC sequences that erase a line and print another), reorder what
// a reader sees (bidirectional overrides), hide itself (zero-width
// characters) or add lines that look like signoff's own. Inert is the one
// primitive every renderer builds on; JSON output stays exact and never goes
// through it.

// Inert returns s with every character that could change how the text around
// it reads shown as a visible escape instead: C0 and C1 controls and DEL
// (`\x1b`, `\n`, `\u0085`), format characters such as bidirectional
// overrides and zero-width spaces (`\u202e`, `\u200b`), line and paragraph
// separators, invisible fillers, and bytes that are not UTF-8 (`\xff`).
// Everything else, letters of every script and emoji included, is kept. The
// result is one line: a newline in s is shown as `\n`.
func Inert(s string) string {
	if isInert(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !shownAsIs(r) && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case !shownAsIs(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isInert reports whether Inert would return s unchanged; most text is, and
// then nothing is allocated.
func isInert(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			goto slow
		}
	}
	return true
slow:
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f || !shownAsIs(r) {
			return false
		}
	}
	return true
}

// shownAsIs reports whether r can be printed as it is: not a control, format
// (Cf: bidi controls, zero-width characters, tag characters), line or
// paragraph separator, nor one of the fillers that render as nothing.
func shownAsIs(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return false
	case r < 0x80:
		return true
	case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return false
	}
	switch r {
	case 0x115f, 0x1160, 0x3164, 0xffa0, // Hangul fillers: letters that show nothing
		0x180e, // Mongolian vowel separator, once a space
		0x034f, // combining grapheme joiner
		0x2800: // braille blank
		return false
	}
	return true
}

// lineProblem says why s cannot be a single-line field (an id, a name), or
// returns "": such a field is shown on one line everywhere, so a line break,
// a control character or a bidi control in it could only serve to deceive.
func lineProblem(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r):
			return "must be one line"
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			return fmt.Sprintf("must not contain control characters (found %s)", Inert(string(r)))
		case isBidiControl(r):
			return fmt.Sprintf("must not contain bidirectional controls (found %s)", Inert(string(r)))
		}
	}
	return ""
}

// isBidiControl reports whether r changes the direction of the text after it.
func isBidiControl(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// checkLines refuses single-line fields that are not one line of plain text,
// and ids (the names in ids) that are blank. It names the first field at fault.
func checkLines(fields []lineField) *record.RefusedError {
	for _, f := range fields {
		if f.id && strings.TrimSpace(f.value) == "" && f.value != "" {
			return refused(record.CodeInvalidInput, "", "%s must not be blank", f.name)
		}
		if p := lineProblem(f.value); p != "" {
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
	if p := lineProblem(raw); p != "" {
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
