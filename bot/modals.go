package bot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/workflow"
)

// Block and action ids of the modals' inputs.
const (
	blockReason = "reason"
	inputReason = "reason"
	inputArgs   = "args"

	maxReason     = 2000
	maxModalInput = 3000 // Slack's limit for a plain_text_input value
	maxModalError = 300
)

func editBlockID(i int) string { return fmt.Sprintf("action_%d", i) }

// editPolicyNote tells an editor what policy does with the edited arguments.
const editPolicyNote = "Policy checks the edited arguments again, as a new proposal: they may need another approval before anything runs (yours counts if your role is enough), or run at once if policy allows them without one."

// rejectModal asks for the reason of a rejection. private_metadata carries the
// button's Ref, so the submission decides exactly what the button showed.
func rejectModal(v *workflow.RunView, ref Ref) slack.ModalViewRequest {
	input := slack.NewPlainTextInputBlockElement(bkPlain("The requester sees this."), inputReason)
	input.Multiline, input.MaxLength, input.FocusOnLoad = true, maxReason, true
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		Title:           bkPlain("Reject"),
		Submit:          bkPlain("Reject"),
		Close:           bkPlain("Cancel"),
		CallbackID:      CallbackReject,
		PrivateMetadata: ref.String(),
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			bkSection(fmt.Sprintf("Reject %s on run %s (fingerprint %s). Nothing will be done.",
				mdEscape(cutText(actionNames(v.Actions), 300)), mdCode(v.ID, 100), mdCode(policy.ShortFingerprint(ref.Fingerprint), 20))),
			slack.NewInputBlock(blockReason, bkPlain("Why?"), nil, input),
		}},
	}
}

// editModal shows each action's arguments as JSON to edit. Redacted fields
// show as "[redacted]" and keep their stored value unless replaced.
func editModal(v *workflow.RunView, ref Ref, redact func(string, json.RawMessage) json.RawMessage) slack.ModalViewRequest {
	blocks := []slack.Block{
		bkSection(fmt.Sprintf("Edit the arguments of run %s and approve them. The edit is validated, checked and put through policy again; the old buttons stop working. Edit one action at a time.",
			mdCode(v.ID, 100))),
		// An edit can move a run to another rule: the approver must not
		// take their approval of the old arguments as the last word.
		bkSection(editPolicyNote),
	}
	for i, a := range v.Actions {
		if i == maxActionSections {
			blocks = append(blocks, bkSection(fmt.Sprintf("…and %d more actions, which cannot be edited here.", len(v.Actions)-i)))
			break
		}
		label := cutText(fmt.Sprintf("%d. %s", i+1, a.Name), 2000)
		shown := redact(a.Name, a.Args)
		var pretty bytes.Buffer
		if shown == nil || json.Indent(&pretty, shown, "", "  ") != nil {
			blocks = append(blocks, bkSection("*"+mdEscape(label)+"*: arguments hidden; they cannot be edited here."))
			continue
		}
		if pretty.Len() > maxModalInput {
			blocks = append(blocks, bkSection(fmt.Sprintf("*%s*: the arguments are too long to edit in Slack (%d bytes).", mdEscape(label), pretty.Len())))
			continue
		}
		input := slack.NewPlainTextInputBlockElement(nil, inputArgs)
		input.Multiline, input.MaxLength, input.InitialValue = true, maxModalInput, pretty.String()
		var hint *slack.TextBlockObject
		if !bytes.Equal(shown, a.Args) {
			hint = bkPlain("Fields shown as " + record.Redaction + " keep their stored value.")
		}
		blocks = append(blocks, slack.NewInputBlock(editBlockID(i), bkPlain(label), hint, input))
	}
	reason := slack.NewPlainTextInputBlockElement(nil, inputReason)
	reason.Multiline, reason.MaxLength = true, maxReason
	blocks = append(blocks, slack.NewInputBlock(blockReason, bkPlain("Why the change? (optional)"), nil, reason).WithOptional(true))
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		Title:           bkPlain("Edit the arguments"),
		Submit:          bkPlain("Approve with edits"),
		Close:           bkPlain("Cancel"),
		CallbackID:      CallbackEdit,
		PrivateMetadata: ref.String(),
		Blocks:          slack.Blocks{BlockSet: blocks},
	}
}

func actionNames(as []record.Action) string {
	names := make([]string, 0, len(as))
	for _, a := range as {
		names = append(names, a.Name)
	}
	if len(names) == 0 {
		return "the proposal"
	}
	return strings.Join(names, ", ")
}

// RestoreRedacted puts back the stored value of every redacted field the
// editor left showing "[redacted]", so that editing one field never replaces a
// secret with its placeholder. edited must be canonical JSON (no duplicate
// keys); the result is canonical too.
func RestoreRedacted(orig, edited json.RawMessage, paths []string) (json.RawMessage, error) {
	if len(paths) == 0 || !bytes.Contains(edited, []byte(record.Redaction)) {
		return edited, nil
	}
	o, err := decodeNumbers(orig)
	if err != nil {
		return nil, fmt.Errorf("stored arguments: %w", err)
	}
	e, err := decodeNumbers(edited)
	if err != nil {
		return nil, fmt.Errorf("edited arguments: %w", err)
	}
	for _, p := range paths {
		e = restorePath(e, o, true, strings.Split(p, "."))
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("edited arguments: %w", err)
	}
	return jsonvalue.Canonical(b)
}

func decodeNumbers(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// restorePath walks path in edited and orig side by side, as redaction does:
// through object keys, and into every element of an array.
func restorePath(edited, orig any, hasOrig bool, path []string) any {
	if len(path) == 0 {
		if s, ok := edited.(string); ok && s == record.Redaction && hasOrig {
			return orig
		}
		return edited
	}
	switch ev := edited.(type) {
	case map[string]any:
		child, ok := ev[path[0]]
		if !ok {
			return edited
		}
		om, _ := orig.(map[string]any)
		oc, has := om[path[0]]
		ev[path[0]] = restorePath(child, oc, hasOrig && has, path[1:])
	case []any:
		oa, _ := orig.([]any)
		for i := range ev {
			var oi any
			has := hasOrig && i < len(oa)
			if has {
				oi = oa[i]
			}
			ev[i] = restorePath(ev[i], oi, has, path)
		}
	}
	return edited
}
