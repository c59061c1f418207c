package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/show"
	"github.com/signoff-dev/signoff/workflow"
)

// KindDetail replies in the thread of a run's approval message with one
// detail the message only sums up: the evidence and checks at submit, a
// decision with its reason (an edit with what it changed), an execution
// attempt, a receipt, the outcome. Unlike a reminder it is sent after the
// request was decided too.
const KindDetail record.OutboxKind = "slack.detail"

// What a detail reply tells (Detail.What); stored in payloads, never changed.
const (
	detailSubmitted = "submitted" // the evidence and the checks of a request
	detailDecision  = "decision"  // one decision, by its index in the run's decisions
	detailAttempt   = "attempt"   // an action is being called (attempt N)
	detailReceipt   = "receipt"   // an action's receipt was recorded
	detailOutcome   = "outcome"   // the run reached an outcome (Detail.Status)
)

// detailWords name each detail in a reply's plain text.
var detailWords = map[string]string{
	detailSubmitted: "the evidence and checks", detailDecision: "a decision", detailAttempt: "an execution attempt",
	detailReceipt: "a receipt", detailOutcome: "the outcome",
}

// Detail is a detail reply's payload: which detail of the run it tells. It
// is rendered at delivery from the run as it is then.
type Detail struct {
	What string `json:"what"`
	// Index is the decision's index in the run's decisions, or the
	// operation's index among its actions.
	Index int `json:"index,omitempty"`
	// Attempt is an attempt's number.
	Attempt int `json:"attempt,omitempty"`
	// Status is the outcome's.
	Status record.Status `json:"status,omitempty"`
}

// Budgets of a detail reply, inside Slack's limits.
const (
	maxDetailEvidence = 20
	maxDetailChecks   = 20
	maxDetailValue    = 300
	maxDetailChanges  = 15
)

// detailMessages are the detail replies a transition of a run put to a
// person causes, each queued under a key of its own (Once) so that it is
// queued once whatever happens to the transition's hooks.
func detailMessages(ctx context.Context, t *workflow.Transition) ([]*record.OutboxMessage, error) {
	if t.State == nil {
		return nil, nil
	}
	ds, req := transitionDetails(t)
	if len(ds) == 0 {
		return nil, nil
	}
	if t.State.Gate == nil || t.State.Gate.RequestID == "" {
		v, err := t.RunView(ctx)
		if err != nil {
			return nil, err
		}
		if len(v.Requests) == 0 {
			return nil, nil // never put to a person: no message to reply to
		}
	}
	var ms []*record.OutboxMessage
	for _, d := range ds {
		p := OutboxPayload{RunID: t.Run.ID, RequestID: req, Detail: &d}
		m, err := message(t.Run, KindDetail, p)
		if err != nil {
			return nil, err
		}
		m.Once = detailKey(t, d)
		ms = append(ms, m)
	}
	return ms, nil
}

// transitionDetails says which details t adds, and the request they are
// about ("" for the run's latest message).
func transitionDetails(t *workflow.Transition) ([]Detail, string) {
	st := t.State
	var ds []Detail
	req := ""
	switch t.Event {
	case record.EventSubmitted, record.EventProposed:
		if t.Request != nil && t.Request.Status == record.RequestPending {
			ds, req = append(ds, Detail{What: detailSubmitted}), t.Request.ID
		}
	case record.EventDecided:
		if n := len(st.Decisions); n > 0 {
			ds, req = append(ds, Detail{What: detailDecision, Index: n - 1}), st.Decisions[n-1].RequestID
		}
	case record.EventEdited:
		// An edit records the editor's decision on the old request, and maybe
		// their approval of the new one: the edit is the reply.
		for i := len(st.Decisions) - 1; i >= 0; i-- {
			if st.Decisions[i].Edited {
				ds, req = append(ds, Detail{What: detailDecision, Index: i}), st.Decisions[i].RequestID
				break
			}
		}
	case record.EventIntent:
		if op, ok := lastOp(st, func(o record.OperationRecord) bool { return o.Status == record.OpPending }); ok {
			ds = append(ds, Detail{What: detailAttempt, Index: op.Index, Attempt: op.Attempts})
		}
	case record.EventExecuted, record.EventReconciled:
		if op, ok := lastOp(st, func(o record.OperationRecord) bool { return o.Status == record.OpCommitted }); ok {
			ds = append(ds, Detail{What: detailReceipt, Index: op.Index})
		}
	}
	if t.Run.Status != t.From && outcomeStatuses[t.Run.Status] {
		ds = append(ds, Detail{What: detailOutcome, Status: t.Run.Status})
	}
	return ds, req
}

// lastOp is the operation of the highest index that ok accepts.
func lastOp(st *record.State, ok func(record.OperationRecord) bool) (record.OperationRecord, bool) {
	best, found := record.OperationRecord{}, false
	for _, o := range st.Operations {
		if ok(o) && (!found || o.Index > best.Index) {
			best, found = o, true
		}
	}
	return best, found
}

// detailKey names a detail once per run: a decision by its index, an
// attempt by its action and number, an outcome by the transition's time.
func detailKey(t *workflow.Transition, d Detail) string {
	k := "slack.detail/" + t.Run.ID + "/" + d.What
	switch d.What {
	case detailSubmitted:
		if t.Request != nil {
			k += "/" + t.Request.ID
		}
	case detailDecision, detailReceipt:
		k += "/" + strconv.Itoa(d.Index)
	case detailAttempt:
		k += "/" + strconv.Itoa(d.Index) + "/" + strconv.Itoa(d.Attempt)
	case detailOutcome:
		k += "/" + string(d.Status) + "/" + strconv.FormatInt(t.Run.UpdatedAt.UnixMilli(), 10)
	}
	return k
}

// sendDetail replies in the thread of the run's approval message with one
// detail. A reply whose message is not posted yet fails, to be retried once
// it is: it is never dropped.
func (d *Dispatcher) sendDetail(ctx context.Context, m *record.OutboxMessage) error {
	var p OutboxPayload
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return fmt.Errorf("read detail row %d of run %s: %w", m.ID, m.RunID, err)
	}
	if p.Detail == nil {
		return fmt.Errorf("read detail row %d of run %s: no detail", m.ID, m.RunID)
	}
	v, err := d.Engine.Get(ctx, m.RunID)
	if err != nil {
		return fmt.Errorf("load run %s: %w", m.RunID, err)
	}
	r, ok := threadParent(v, p.RequestID)
	if !ok {
		return fmt.Errorf("detail of run %s: the approval message is not posted yet", v.ID)
	}
	var changes string
	if p.Detail.What == detailDecision {
		if changes, err = d.editChanges(ctx, v, p.Detail.Index); err != nil {
			return err
		}
	}
	blocks, text := RenderDetail(workflow.RedactView(v, Redactor(d.Engine)), *p.Detail, changes)
	ch, ts, err := d.postOnce(ctx, m, r.Channel, r.MessageTS, blocks, text)
	if err != nil {
		return err
	}
	d.log().Info("slack detail sent", "run_id", v.ID, "what", p.Detail.What, "channel", ch, "ts", ts, "thread_ts", r.MessageTS)
	return nil
}

// deliverInOrder delivers the due detail rows of one run one by one, in
// the order they were queued, and stops at the first that is not delivered:
// a reply never goes before one queued earlier that is still on its way
// (retried after a failure, or not due yet). Each row is recorded on its
// own, so a failure never sends an earlier reply again.
func (d *Dispatcher) deliverInOrder(ctx context.Context, rows []*record.OutboxMessage) (int, error) {
	all, err := d.Engine.Outbox().Keyed(ctx, rows[0].RunID)
	if err != nil {
		return 0, err
	}
	due := map[int64]*record.OutboxMessage{}
	for _, m := range rows {
		due[m.ID] = m
	}
	n := 0
	for _, m := range all {
		if m.Kind != KindDetail || !m.DeliveredAt.IsZero() {
			continue
		}
		row, ok := due[m.ID]
		if !ok {
			return n, nil // an earlier reply waits; the later ones wait for it
		}
		k, err := d.deliver(ctx, []*record.OutboxMessage{row})
		n += k
		if err != nil || k == 0 {
			return n, err
		}
	}
	return n, nil
}

// threadParent is the message a detail replies to: the request's own when it
// names one, else the run's latest posted message.
func threadParent(v *workflow.RunView, requestID string) (workflow.RequestView, bool) {
	if requestID != "" {
		r, ok := requestOf(v, requestID)
		return r, ok && r.MessageTS != ""
	}
	for i := len(v.Requests) - 1; i >= 0; i-- {
		if v.Requests[i].MessageTS != "" {
			return v.Requests[i], true
		}
	}
	return workflow.RequestView{}, false
}

// editChanges says what the edit that is decision i changed, from the
// run's checkpoints: "" for a decision that is no edit, or whose state
// before was pruned.
func (d *Dispatcher) editChanges(ctx context.Context, v *workflow.RunView, i int) (string, error) {
	if i < 0 || i >= len(v.Decisions) || len(v.Decisions[i].Edited) == 0 {
		return "", nil
	}
	hist, err := d.Engine.History(ctx, v.ID)
	if err != nil {
		return "", fmt.Errorf("read the history of run %s: %w", v.ID, err)
	}
	var prev *record.State
	for _, h := range hist {
		if st := h.State; st != nil && prev != nil && len(prev.Decisions) <= i && i < len(st.Decisions) {
			return changesLine(policy.ChangedFields(prev.Actions, st.Actions), st.Actions, d.Engine), nil
		}
		prev = h.State
	}
	return "", nil
}

// changesLine is "field: from → to, …", values a redact: field holds (or of
// an action without a spec) hidden, each inert in a code span.
func changesLine(changes []policy.FieldChange, actions []record.Action, specs ActionSpecs) string {
	if len(changes) == 0 {
		return "no field changed"
	}
	parts := make([]string, 0, len(changes))
	for i, c := range changes {
		if i == maxDetailChanges {
			parts = append(parts, fmt.Sprintf("and %d more", len(changes)-maxDetailChanges))
			break
		}
		name := ""
		if c.Action < len(actions) {
			name = actions[c.Action].Name
		}
		spec, ok := specs.Action(name)
		hidden := !ok || spec.Hides(c.Field)
		label := strings.TrimSuffix(name+"."+c.Field, ".")
		parts = append(parts, mdCode(label, 120)+": "+changeValue(c.From, hidden)+" → "+changeValue(c.To, hidden))
	}
	return strings.Join(parts, ", ")
}

func changeValue(v json.RawMessage, hidden bool) string {
	switch {
	case v == nil:
		return "(none)"
	case hidden:
		return mdCode(record.Redaction, 40)
	}
	return mdCode(show.Value(v), maxDetailValue)
}

// RenderDetail is a detail reply: one section of signoff's words, with what
// others wrote (evidence, reasons, receipts, errors) inert in code spans or
// plain text, cut to fit. changes is what an edit changed (editChanges).
func RenderDetail(v *workflow.RunView, d Detail, changes string) ([]slack.Block, string) {
	var lines []string
	switch d.What {
	case detailSubmitted:
		lines = submittedLines(v)
	case detailDecision:
		lines = decisionDetail(v, d.Index, changes)
	case detailAttempt:
		lines = []string{fmt.Sprintf(":gear: Calling action %d, %s (attempt %d).", d.Index+1, actionName(v, d.Index), d.Attempt)}
	case detailReceipt:
		lines = receiptDetail(v, d.Index)
	case detailOutcome:
		lines = outcomeDetail(v, d.Status)
	default:
		lines = []string{"Run " + mdCode(v.ID, 100) + " changed."}
	}
	text := cutLines(lines, MaxSectionText, func(k int) string { return fmt.Sprintf("…and %d more lines", k) })
	plain := cutText(show.Inert(fmt.Sprintf("Run %s: %s", v.ID, detailWords[d.What])), maxFallback)
	return []slack.Block{bkSection(text)}, plain
}

func actionName(v *workflow.RunView, i int) string {
	if i >= 0 && i < len(v.Actions) {
		return mdCode(v.Actions[i].Name, 100)
	}
	return mdCode("?", 10)
}

// submittedLines are a request's evidence and checks, as submitted.
func submittedLines(v *workflow.RunView) []string {
	lines := []string{"*Evidence* (written by the requester, not checked by signoff):"}
	if len(v.Evidence) == 0 {
		lines = append(lines, "_none_")
	}
	for i, e := range v.Evidence {
		if i == maxDetailEvidence {
			lines = append(lines, fmt.Sprintf("…and %d more; see %s", len(v.Evidence)-i, mdCode("signoff show "+v.ID, 100)))
			break
		}
		lines = append(lines, "• "+mdCode(e.Source, 60)+": "+mdCode(compactJSON(e.Data), maxDetailValue))
	}
	lines = append(lines, "*Checks*:")
	if len(v.Checks) == 0 {
		lines = append(lines, "_none_")
	}
	for i, c := range v.Checks {
		if i == maxDetailChecks {
			lines = append(lines, fmt.Sprintf("…and %d more", len(v.Checks)-i))
			break
		}
		s := fmt.Sprintf("• :white_check_mark: %s on action %d", mdCode(c.Name, 100), c.Action+1)
		if !c.OK {
			s = fmt.Sprintf("• :x: %s on action %d: %s", mdCode(c.Name, 100), c.Action+1, mdCode(c.Error, maxDetailValue))
		}
		lines = append(lines, s)
	}
	return lines
}

// decisionDetail is one decision with its reason, and for an edit what it changed.
func decisionDetail(v *workflow.RunView, i int, changes string) []string {
	if i < 0 || i >= len(v.Decisions) {
		return []string{"A decision on run " + mdCode(v.ID, 100) + "."}
	}
	d := v.Decisions[i]
	who := mdMention(d.By, d.Name)
	var line string
	switch {
	case len(d.Edited) > 0:
		line = fmt.Sprintf(":pencil2: *Edited* by %s %s", who, slackDate(d.At))
	case d.Decision == record.VerdictApprove:
		line = fmt.Sprintf(":white_check_mark: *Approved* by %s (%s) %s", who, mdEscape(d.Role), slackDate(d.At))
	default:
		line = fmt.Sprintf(":x: *Rejected* by %s (%s) %s", who, mdEscape(d.Role), slackDate(d.At))
	}
	lines := []string{line}
	if d.Reason != "" {
		lines = append(lines, "Reason: "+mdCode(d.Reason, 1000))
	}
	if changes != "" {
		lines = append(lines, "Edited: "+changes)
	}
	return lines
}

// receiptDetail is an action's receipt.
func receiptDetail(v *workflow.RunView, i int) []string {
	key := workflow.OperationKey(v.ID, i)
	for _, op := range v.Operations {
		if op.Key == key && op.Status == record.OpCommitted {
			return []string{fmt.Sprintf(":receipt: Action %d, %s: done, receipt %s.", i+1, actionName(v, i), mdCode(receiptID(op.Receipt), 200))}
		}
	}
	return []string{fmt.Sprintf(":receipt: Action %d, %s: receipt recorded.", i+1, actionName(v, i))}
}

// outcomeDetail is how the run ended (or that a person must look at it).
func outcomeDetail(v *workflow.RunView, status record.Status) []string {
	lines := []string{fmt.Sprintf(":checkered_flag: *Outcome*: %s.", mdEscape(string(status)))}
	if v.Reason != "" && status != record.StatusDone {
		lines = append(lines, "Reason: "+mdCode(v.Reason, 1000))
	}
	lines = append(lines, operationLines(v)...)
	return lines
}
