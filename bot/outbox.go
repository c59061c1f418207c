package bot

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// Outbox kinds: what the dispatcher does with a row.
const (
	KindPost   record.OutboxKind = "slack.post"   // post the approval message of a request
	KindUpdate record.OutboxKind = "slack.update" // rewrite every posted message of a run from its current state
	KindDigest record.OutboxKind = "slack.digest" // post a channel's daily digest of the waiting runs (Digest)
	// KindOutcomeDM tells the requester, in a direct message, how their run
	// ended; KindOutcomeNotify tells one of the rule's notify: recipients.
	KindOutcomeDM     record.OutboxKind = "slack.outcome_dm"
	KindOutcomeNotify record.OutboxKind = "slack.outcome_notify"
	// KindReminder replies in the thread of a pending request's message,
	// before its deadline, mentioning who may still decide (Reminder).
	KindReminder record.OutboxKind = "slack.reminder"
	// KindEscalation replies in the thread of a pending request's message
	// when who may decide it was widened (Escalation).
	KindEscalation record.OutboxKind = "slack.escalation"
	// KindBreakGlass announces a forced approval in the audit channel,
	// mentioning who would have been asked (To is the channel).
	KindBreakGlass record.OutboxKind = "slack.break_glass"
	// KindReviewReminder reminds the review's role, in the audit channel,
	// that a forced approval waits for its review (queued once per point).
	KindReviewReminder record.OutboxKind = "slack.review_reminder"
)

// Kinds are the outbox kinds the Slack dispatcher delivers.
var Kinds = []record.OutboxKind{KindPost, KindUpdate, KindDigest, KindOutcomeDM, KindOutcomeNotify, KindReminder, KindEscalation, KindDetail, KindBreakGlass, KindReviewReminder, KindConfirm}

// OutboxPayload is the body of a Slack outbox row: what to render, not the
// rendering, so that a late delivery shows the run as it is then.
type OutboxPayload struct {
	RunID     string `json:"run_id"`
	RequestID string `json:"request_id,omitempty"`
	// To and Outcome are an outcome message's: the Slack channel or user it
	// goes to, and the status it announces (the run may have moved on by the
	// time it is delivered).
	To      string        `json:"to,omitempty"`
	Outcome record.Status `json:"outcome,omitempty"`
	// Reminder is a reminder's: which of the run's reminders it sends (an
	// index into its Reminders).
	Reminder *int `json:"reminder,omitempty"`
	// Escalation is an escalation's: the first of the run's escalations
	// (an index into its Escalations) that the transition applied.
	Escalation *int `json:"escalation,omitempty"`
	// Detail is a detail reply's (KindDetail): which detail it tells.
	Detail *Detail `json:"detail,omitempty"`
}

// Outbox is the engine hook that queues Slack messages in the transaction of the
// transition that causes them: a decision never waits for Slack, and a Slack
// outage loses nothing.
type Outbox struct {
	// SlackUserOf is the Slack user who stands for a requester ("" for none,
	// e.g. an agent, which hears by its callback); nil: nobody is sent a
	// direct message.
	SlackUserOf func(requesterID string) string
	// Details replies in the approval message's thread with what the
	// message only sums up (KindDetail): the evidence and checks, each
	// decision, each execution attempt and receipt, the outcome.
	Details bool
	// AuditChannel is where a forced approval is announced ("": nowhere).
	AuditChannel string
}

var _ workflow.Hook = Outbox{}

// events after which a posted message no longer shows the run as it is.
var updateEvents = map[record.Event]bool{
	record.EventDecided: true, record.EventEdited: true, record.EventCancelled: true,
	record.EventExpired: true, record.EventFinished: true, record.EventNeedsAttention: true,
	record.EventReassigned: true, record.EventExtended: true, record.EventExecuted: true,
	record.EventReconciled: true, record.EventResolved: true, record.EventPolicyBypassed: true,
	record.EventScheduled: true, record.EventReleased: true,
}

// events that create a request a person must see.
var postEvents = map[record.Event]bool{record.EventSubmitted: true, record.EventProposed: true, record.EventEdited: true}

// OnTransition queues a post when a transition creates a pending request, and a
// rewrite after every change of a run that was ever put to a person, whatever
// its gate says now (an edit can lower the risk so that no request is current).
// When the transition ends the run (or hands it to a person), it also queues
// the outcome for the requester and the rule's notify: recipients; a
// reminder queues its reply in the request's thread.
func (o Outbox) OnTransition(ctx context.Context, t *workflow.Transition) ([]*record.OutboxMessage, error) {
	ms, err := approvalMessages(ctx, t)
	if err != nil {
		return nil, err
	}
	outcome, err := o.outcomeMessages(t)
	if err != nil {
		return nil, err
	}
	ms = append(ms, outcome...)
	if o.Details {
		ds, err := detailMessages(ctx, t)
		if err != nil {
			return nil, err
		}
		ms = append(ms, ds...)
	}
	bg, err := o.breakGlassMessages(t)
	if err != nil {
		return nil, err
	}
	ms = append(ms, bg...)
	cm, err := confirmMessages(t)
	if err != nil {
		return nil, err
	}
	ms = append(ms, cm...)
	if t.Event == record.EventReminded && t.State != nil && len(t.State.Reminders) > 0 && t.Request != nil {
		i := len(t.State.Reminders) - 1
		m, err := message(t.Run, KindReminder, OutboxPayload{RunID: t.Run.ID, RequestID: t.Request.ID, Reminder: &i})
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	if t.Event == record.EventEscalated && t.State != nil && len(t.State.Escalations) > 0 && t.Request != nil {
		i := firstOfLast(t.State.Escalations)
		m, err := message(t.Run, KindEscalation, OutboxPayload{RunID: t.Run.ID, RequestID: t.Request.ID, Escalation: &i})
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// approvalMessages are the posts and rewrites of the approval messages.
func approvalMessages(ctx context.Context, t *workflow.Transition) ([]*record.OutboxMessage, error) {
	update := updateEvents[t.Event]
	post := postEvents[t.Event] && t.Request != nil && t.Request.Status == record.RequestPending && t.Run.Status == record.StatusWaitingApproval
	if !update && !post {
		return nil, nil
	}
	// A request to post is the run's: the run was put to a person.
	asked := post || t.State != nil && t.State.Gate != nil && t.State.Gate.RequestID != ""
	if !asked {
		v, err := t.RunView(ctx)
		if err != nil {
			return nil, err
		}
		asked = len(v.Requests) > 0
	}
	if !asked {
		return nil, nil // never put to a person: nothing in Slack to post or rewrite
	}
	var ms []*record.OutboxMessage
	if update {
		m, err := message(t.Run, KindUpdate, OutboxPayload{RunID: t.Run.ID})
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	if post {
		m, err := message(t.Run, KindPost, OutboxPayload{RunID: t.Run.ID, RequestID: t.Request.ID})
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	if t.Event == record.EventEscalated && t.State != nil && len(t.State.Escalations) > 0 && t.Request != nil {
		i := firstOfLast(t.State.Escalations)
		m, err := message(t.Run, KindEscalation, OutboxPayload{RunID: t.Run.ID, RequestID: t.Request.ID, Escalation: &i})
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// message is an outbox row of kind about run.
func message(run *record.Run, kind record.OutboxKind, p OutboxPayload) (*record.OutboxMessage, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode %s of run %s: %w", kind, p.RunID, err)
	}
	// The transition's own time: the message is due as soon as it commits.
	return &record.OutboxMessage{RunID: p.RunID, Kind: kind, Payload: body, NextAttempt: run.UpdatedAt, CreatedAt: run.UpdatedAt}, nil
}

// outcomeStatuses are the statuses whose entry is an outcome people hear of:
// the ends, and a run handed to a person.
var outcomeStatuses = map[record.Status]bool{
	record.StatusDone: true, record.StatusRejected: true, record.StatusExpired: true,
	record.StatusCancelled: true, record.StatusFailed: true, record.StatusNeedsAttention: true,
}

// outcomeMessages queues the outcome of a run that t ends: a direct message
// to the requester when a Slack user stands for them, and one message to each
// notify: recipient of the gate. Nobody who decided the run is told again
// what they decided; nobody is told twice.
func (o Outbox) outcomeMessages(t *workflow.Transition) ([]*record.OutboxMessage, error) {
	if t.Run.Status == t.From || !outcomeStatuses[t.Run.Status] {
		return nil, nil
	}
	if t.State == nil {
		return nil, nil // no trusted state: no requester or rule to read
	}
	told := map[string]bool{}
	for _, d := range t.State.Decisions {
		told[d.By] = true
	}
	var ms []*record.OutboxMessage
	add := func(kind record.OutboxKind, to string) error {
		if to == "" || told[to] {
			return nil
		}
		told[to] = true
		m, err := message(t.Run, kind, OutboxPayload{RunID: t.Run.ID, To: to, Outcome: t.Run.Status})
		if err != nil {
			return err
		}
		ms = append(ms, m)
		return nil
	}
	if o.SlackUserOf != nil && !told[t.State.Requester.ID] {
		if err := add(KindOutcomeDM, o.SlackUserOf(t.State.Requester.ID)); err != nil {
			return nil, err
		}
	}
	if t.State.Gate != nil {
		for _, to := range t.State.Gate.Notify {
			if err := add(KindOutcomeNotify, to); err != nil {
				return nil, err
			}
		}
	}
	return ms, nil
}
