package workflow

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
)

// A target may echo what it was sent anywhere in its answer ({"echo":
// {"token": …}}), an error may quote it, an agent may repeat it in its
// summary. So a redact: field is hidden not only where the arguments hold
// it: its value is hidden wherever a run shows it, and in a receipt so is
// every field a redact: path names, at any depth.

// RedactedView returns a copy of v as it is shown to people: each action's
// redact: fields replaced by "[redacted]" in its arguments and an approver's
// edited arguments, and what those fields hold hidden wherever else the run
// shows it (see RedactView). It fails closed: arguments of an action find
// does not know, or that cannot be read, are replaced whole by "[redacted]".
func RedactedView(v *RunView, find func(name string) (*ActionSpec, bool)) *RunView {
	return RedactView(v, func(action string, args json.RawMessage) json.RawMessage {
		spec, ok := find(action)
		if !ok {
			return nil
		}
		r, err := spec.Redacted(args)
		if err != nil {
			return nil
		}
		return r
	})
}

// RedactView is RedactedView with the arguments of each action as shown
// returns them for people (nil: hidden whole). Every value shown replaced
// by "[redacted]" (every value of arguments hidden whole) is a secret: in
// receipts, every field at the paths shown hid, at any depth, and every
// string or number equal to a secret become "[redacted]"; in the arguments,
// edits and evidence so do equal values; and in the texts a run shows (its
// summary and reason, errors, reasons given), a secret of at least
// minSecretInText bytes is replaced where it occurs.
func RedactView(v *RunView, shown func(action string, args json.RawMessage) json.RawMessage) *RunView {
	out := *v
	hidden := json.RawMessage(`"` + record.Redaction + `"`)
	h := &hider{}
	// whole says whether arguments hidden whole are secrets through and
	// through: an action's are; an edit's are hidden whole as soon as one
	// action of the run is unknown, which says nothing of its values.
	show := func(action string, args json.RawMessage, whole bool) json.RawMessage {
		r := shown(action, args)
		if r == nil {
			r = hidden
		}
		if whole || !bytes.Equal(r, hidden) {
			h.learn(args, r)
		}
		return r
	}
	out.Actions = make([]record.Action, len(v.Actions))
	for i, a := range v.Actions {
		out.Actions[i] = record.Action{Name: a.Name, Args: show(a.Name, a.Args, true)}
	}
	out.Decisions = make([]DecisionView, len(v.Decisions))
	for i, d := range v.Decisions {
		if len(d.Edited) > 0 {
			// A decision does not say which action it edited: every
			// action's redact: list applies.
			for _, a := range v.Actions {
				if d.Edited = show(a.Name, d.Edited, false); bytes.Equal(d.Edited, hidden) {
					break
				}
			}
		}
		out.Decisions[i] = d
	}
	// Now that every secret is known, hide them wherever else they are.
	for i, a := range out.Actions {
		out.Actions[i].Args = h.values(a.Args)
	}
	for i, d := range out.Decisions {
		if len(d.Edited) > 0 {
			out.Decisions[i].Edited = h.values(d.Edited)
		}
		out.Decisions[i].Reason = h.text(d.Reason)
	}
	out.Operations = make([]OperationView, len(v.Operations))
	for i, op := range v.Operations {
		op.Receipt = h.receipt(op.Receipt)
		op.Error = h.text(op.Error)
		out.Operations[i] = op
	}
	out.Evidence = make([]record.Evidence, len(v.Evidence))
	for i, e := range v.Evidence {
		out.Evidence[i] = record.Evidence{Source: h.text(e.Source), Data: h.values(e.Data)}
	}
	out.Checks = make([]record.Check, len(v.Checks))
	for i, c := range v.Checks {
		c.Error = h.text(c.Error)
		out.Checks[i] = c
	}
	out.Resolutions = slices.Clone(v.Resolutions)
	for i := range out.Resolutions {
		out.Resolutions[i].Reason = h.text(out.Resolutions[i].Reason)
	}
	out.Reminders = slices.Clone(v.Reminders)
	out.Escalations = slices.Clone(v.Escalations)
	if v.Forced != nil {
		f := *v.Forced
		f.Reason = h.text(f.Reason)
		out.Forced = &f
	}
	out.Summary, out.Reason = h.text(v.Summary), h.text(v.Reason)
	return &out
}

// Redacted is RedactedView with this engine's actions: a run as an agent or
// a callback receiver is shown it.
func (e *Engine) Redacted(v *RunView) *RunView { return RedactedView(v, e.Action) }

// hideIn is text (a target's error, for the log) with what the redact:
// fields of actions hold hidden, as RedactedView hides it.
func hideIn(specs map[string]*ActionSpec, actions []record.Action, text string) string {
	h := &hider{}
	for _, a := range actions {
		var shown json.RawMessage
		if spec, ok := specs[a.Name]; ok {
			shown, _ = spec.Redacted(a.Args)
		}
		if shown == nil {
			shown = json.RawMessage(`"` + record.Redaction + `"`)
		}
		h.learn(a.Args, shown)
	}
	return h.text(text)
}

// minSecretInText is the shortest secret hidden inside a longer text: a
// shorter one would hide every "1" or "id" of a message. A text that is the
// secret whole is hidden at any length.
const minSecretInText = 4

// hider knows what a run's redact: fields hold and where they are.
type hider struct {
	paths   [][]string          // keys from an object down to a hidden field; arrays are crossed
	strs    []string            // the hidden values' strings, and numbers as written; longest first
	numbers []jsonvalue.Decimal // the hidden numbers
}

// learn records what shown (args as people see them) hid of args.
func (h *hider) learn(args, shown json.RawMessage) {
	o, err := jsonvalue.Decode(args, jsonvalue.Exact)
	if err != nil {
		return
	}
	s, err := jsonvalue.Decode(shown, jsonvalue.Exact)
	if err != nil {
		s = record.Redaction
	}
	h.diff(o, s, nil)
	slices.SortStableFunc(h.strs, func(a, b string) int { return len(b) - len(a) })
	h.strs = slices.Compact(h.strs)
}

func (h *hider) diff(orig, shown any, path []string) {
	if s, ok := shown.(string); ok && s == record.Redaction {
		if o, ok := orig.(string); ok && o == record.Redaction {
			return
		}
		if len(path) > 0 && !slices.ContainsFunc(h.paths, func(p []string) bool { return slices.Equal(p, path) }) {
			h.paths = append(h.paths, slices.Clone(path))
		}
		h.secret(orig)
		return
	}
	switch o := orig.(type) {
	case map[string]any:
		if sm, ok := shown.(map[string]any); ok {
			for k, ov := range o {
				h.diff(ov, sm[k], append(slices.Clip(path), k))
			}
		}
	case []any:
		if sa, ok := shown.([]any); ok {
			for i, ov := range o {
				if i < len(sa) {
					h.diff(ov, sa[i], path)
				}
			}
		}
	}
}

// secret records every string and number under v.
func (h *hider) secret(v any) {
	switch c := v.(type) {
	case string:
		if c != "" && c != record.Redaction {
			h.strs = append(h.strs, c)
		}
	case json.Number:
		if d, ok := jsonvalue.DecimalOf(string(c)); ok {
			h.numbers = append(h.numbers, d)
			h.strs = append(h.strs, string(c))
		}
	case map[string]any:
		for _, el := range c {
			h.secret(el)
		}
	case []any:
		for _, el := range c {
			h.secret(el)
		}
	}
}

func (h *hider) none() bool { return len(h.strs) == 0 && len(h.numbers) == 0 && len(h.paths) == 0 }

// text hides the secrets in s.
func (h *hider) text(s string) string {
	if s == "" || h.none() {
		return s
	}
	for _, sec := range h.strs {
		switch {
		case s == sec:
			return record.Redaction
		case len(sec) >= minSecretInText:
			s = strings.ReplaceAll(s, sec, record.Redaction)
		}
	}
	return s
}

// values hides, in a JSON value, every string and number that is a secret
// or (a string) holds one; the value is returned as it came when nothing is.
func (h *hider) values(raw json.RawMessage) json.RawMessage { return h.scrub(raw, false) }

// receipt is values that also hides every field a hidden path names, at any
// depth. A receipt that is not JSON is hidden as text.
func (h *hider) receipt(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || h.none() {
		return raw
	}
	if !json.Valid(raw) {
		b, _ := json.Marshal(h.text(string(raw)))
		return b
	}
	return h.scrub(raw, true)
}

func (h *hider) scrub(raw json.RawMessage, paths bool) json.RawMessage {
	if len(raw) == 0 || h.none() {
		return raw
	}
	v, err := jsonvalue.Decode(raw, jsonvalue.Exact)
	if err != nil {
		return raw
	}
	v, changed := h.walk(v, paths)
	if !changed {
		return raw
	}
	return jsonvalue.Encode(v)
}

func (h *hider) walk(v any, paths bool) (any, bool) {
	switch c := v.(type) {
	case string:
		if t := h.text(c); t != c {
			return t, true
		}
	case json.Number:
		if d, ok := jsonvalue.DecimalOf(string(c)); ok && slices.Contains(h.numbers, d) {
			return record.Redaction, true
		}
	case map[string]any:
		changed := false
		if paths {
			for _, p := range h.paths {
				if policy.RedactPath(c, p) {
					changed = true
				}
			}
		}
		for k, el := range c {
			if nv, ch := h.walk(el, paths); ch {
				c[k], changed = nv, true
			}
		}
		return c, changed
	case []any:
		changed := false
		for i, el := range c {
			if nv, ch := h.walk(el, paths); ch {
				c[i], changed = nv, true
			}
		}
		return c, changed
	}
	return v, false
}
