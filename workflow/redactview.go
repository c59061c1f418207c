package workflow

import (
	"bytes"
	"encoding/json"
)

// RedactedView returns a copy of v as it is shown to people: each action's
// redact: fields replaced by "[redacted]" in its arguments, in an approver's
// edited arguments and in a receipt that echoes them at the same place. It
// fails closed: arguments of an action find does not know, or that cannot
// be read, are replaced whole by "[redacted]".
func RedactedView(v *RunView, find func(name string) (*ActionSpec, bool)) *RunView {
	out := *v
	hidden := json.RawMessage(`"` + Redaction + `"`)
	shown := func(action string, args json.RawMessage) json.RawMessage {
		spec, ok := find(action)
		if !ok {
			return hidden
		}
		r, err := spec.Redacted(args)
		if err != nil {
			return hidden
		}
		return r
	}
	out.Actions = make([]Action, len(v.Actions))
	for i, a := range v.Actions {
		out.Actions[i] = Action{Name: a.Name, Args: shown(a.Name, a.Args)}
	}
	out.Decisions = make([]DecisionView, len(v.Decisions))
	for i, d := range v.Decisions {
		if len(d.Edited) > 0 {
			// A decision does not say which action it edited: every
			// action's redact: list applies.
			for _, a := range v.Actions {
				if d.Edited = shown(a.Name, d.Edited); bytes.Equal(d.Edited, hidden) {
					break
				}
			}
		}
		out.Decisions[i] = d
	}
	out.Operations = make([]OperationView, len(v.Operations))
	for i, op := range v.Operations {
		op.Receipt = redactedReceipt(op.Receipt, func(detail json.RawMessage) json.RawMessage { return shown(op.Action, detail) })
		out.Operations[i] = op
	}
	return &out
}

// redactedReceipt hides, in a receipt whose detail is an object, what the
// action's redact: list names; other receipts are returned as they are.
func redactedReceipt(receipt json.RawMessage, shown func(json.RawMessage) json.RawMessage) json.RawMessage {
	var r Receipt
	if len(receipt) == 0 || json.Unmarshal(receipt, &r) != nil || !bytes.HasPrefix(bytes.TrimSpace(r.Detail), []byte("{")) {
		return receipt
	}
	r.Detail = shown(r.Detail)
	b, err := json.Marshal(r)
	if err != nil {
		return json.RawMessage(`"` + Redaction + `"`)
	}
	return b
}

// Redacted is RedactedView with this engine's actions: a run as an agent or
// a callback receiver is shown it.
func (e *Engine) Redacted(v *RunView) *RunView { return RedactedView(v, e.Action) }
