package workflow

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// Redacted is v as shown to people outside the approvers' tools (an agent
// reading its run, a callback): a copy with each action's redact: fields
// replaced by "[redacted]" in its arguments, in the arguments an approver
// edited, and in receipts whose detail echoes them. It fails closed: the
// arguments of an action this engine does not know, or cannot read, are
// replaced whole by a note saying so.
func (e *Engine) Redacted(v *RunView) *RunView {
	out := *v
	out.Actions = make([]Action, len(v.Actions))
	for i, a := range v.Actions {
		out.Actions[i] = Action{Name: a.Name, Args: e.redactArgs(a.Name, a.Args)}
	}
	out.Decisions = slices.Clone(v.Decisions)
	for i, d := range out.Decisions {
		if len(d.Edited) == 0 {
			continue
		}
		// A decision does not say which action it edited: every action's
		// list applies.
		edited := d.Edited
		for _, a := range v.Actions {
			edited = e.redactArgs(a.Name, edited)
		}
		out.Decisions[i].Edited = edited
	}
	out.Operations = slices.Clone(v.Operations)
	for i, op := range out.Operations {
		out.Operations[i].Receipt = e.redactReceipt(op.Action, op.Receipt)
	}
	return &out
}

// redactArgs is args with the action's redact: fields hidden, or a JSON
// string saying why they are hidden whole.
func (e *Engine) redactArgs(action string, args json.RawMessage) json.RawMessage {
	spec, ok := e.actions[action]
	if !ok {
		return json.RawMessage(strconv.Quote("[hidden: the config has no action " + strconv.Quote(action) + "]"))
	}
	if len(spec.Redact) == 0 {
		return args
	}
	out, err := spec.Redacted(args)
	if err != nil {
		return json.RawMessage(strconv.Quote("[hidden: " + err.Error() + "]"))
	}
	return out
}

// redactReceipt hides the action's redact: fields in a receipt's detail, where
// the target's answer has them at the same place.
func (e *Engine) redactReceipt(action string, receipt json.RawMessage) json.RawMessage {
	var r Receipt
	if len(receipt) == 0 || json.Unmarshal(receipt, &r) != nil || !bytes.HasPrefix(bytes.TrimSpace(r.Detail), []byte("{")) {
		return receipt
	}
	r.Detail = e.redactArgs(action, r.Detail)
	out, err := json.Marshal(r)
	if err != nil {
		return json.RawMessage(strconv.Quote("[hidden: " + err.Error() + "]"))
	}
	return out
}
