// Package callback sends a run's status changes to the callback_url its
// proposal named: an event {id, type, run}, signed as Standard Webhooks 1.0
// says (the event id is the webhook-id), through the durable outbox. The Hook
// queues each event in the transaction of the transition it announces, so an
// event is never lost and never sent for a change that did not commit; the
// Dispatcher POSTs queued events, retries with backoff until the receiver
// answers 2xx, and never holds up a run. Delivery is at least once: a
// receiver deduplicates by the event id.
package callback

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// Kind is the outbox kind of a callback row.
const Kind record.OutboxKind = "callback"

// Types are the event types, by the status a run enters: an event is queued
// each time a run with a callback URL enters one of these.
var Types = map[record.Status]string{
	record.StatusWaitingApproval: "run.waiting",
	record.StatusScheduled:       "run.scheduled",
	record.StatusDone:            "run.done",
	record.StatusFailed:          "run.failed",
	record.StatusRejected:        "run.rejected",
	record.StatusExpired:         "run.expired",
	record.StatusCancelled:       "run.cancelled",
	record.StatusNeedsAttention:  "run.needs_attention",
}

// EventTypes are the event types of transitions an agent should hear of
// besides a status it enters: who may decide and until when changed, or the
// approval was forced.
var EventTypes = map[record.Event]string{
	record.EventReminded:  "run.reminded",
	record.EventEscalated: "run.escalated",
	// A forced approval (break-glass) is told as such, though the run
	// only moves on to executing.
	record.EventPolicyBypassed: "run.policy_bypassed",
	// The follow-up review of a forced approval was acknowledged: the run
	// is as it was, its review (in the run) says by whom.
	record.EventReviewAcknowledged: "run.review_acknowledged",
	// An approval of a step-up rule came from elsewhere than the web
	// console: the run still waits for its confirmation there.
	record.EventApprovalUnconfirmed: "run.approval_unconfirmed",
}

// eventTypes are the types of the events t announces, in order: what
// happened, when it is one of EventTypes, then the status it entered, when
// it entered one of Types. Both only for a forced approval outside its
// execution window, which schedules the run in the same transition.
func eventTypes(t *workflow.Transition) []string {
	var out []string
	if typ, ok := EventTypes[t.Event]; ok {
		out = append(out, typ)
	}
	if typ, ok := Types[t.Run.Status]; ok && t.Run.Status != t.From {
		out = append(out, typ)
	}
	return out
}

// Event is what a receiver gets: a fresh id (the webhook-id header), the type,
// and the run as GET /v1/runs/{id} shows it at the transition, redacted.
type Event struct {
	ID   string            `json:"id"`
	Type string            `json:"type"`
	Run  *workflow.RunView `json:"run"`
}

// payload is the outbox row of one event: where it goes and the body exactly
// as it is signed and sent on every attempt, so that a redelivery is the same
// message with the same id.
type payload struct {
	URL  string `json:"url"`
	ID   string `json:"id"`
	Body string `json:"body"`
}

// Hook is the engine hook that queues callback events.
type Hook struct{}

var _ workflow.Hook = Hook{}

// OnTransition queues an event when t moves a run with a callback URL into a
// status of Types, or is one of EventTypes. The event shows the run as the transition leaves it (the
// engine's view of the transition, redacted), so it shows the status it
// announces even when it is delivered much later.
func (Hook) OnTransition(ctx context.Context, t *workflow.Transition) ([]*record.OutboxMessage, error) {
	types := eventTypes(t)
	if len(types) == 0 {
		return nil, nil
	}
	// The sealed state's URL; without a state (a run put aside because it
	// could not be read) the row's, which the dispatcher still holds to the
	// allow-list before it sends anything.
	url := t.Run.CallbackURL
	if t.State != nil {
		url = t.State.CallbackURL
	}
	if url == "" {
		return nil, nil
	}
	v, err := t.RunView(ctx)
	if err != nil {
		return nil, fmt.Errorf("render run %s for its callback: %w", t.Run.ID, err)
	}
	var ms []*record.OutboxMessage
	for _, typ := range types {
		ev := Event{ID: NewEventID(), Type: typ, Run: v}
		body, err := json.Marshal(ev)
		if err != nil {
			return nil, fmt.Errorf("encode %s event of run %s: %w", typ, t.Run.ID, err)
		}
		p, err := json.Marshal(payload{URL: url, ID: ev.ID, Body: string(body)})
		if err != nil {
			return nil, fmt.Errorf("encode %s event of run %s: %w", typ, t.Run.ID, err)
		}
		// The transition's own time: the event is due as soon as it commits.
		ms = append(ms, &record.OutboxMessage{RunID: t.Run.ID, Kind: Kind, Payload: p, NextAttempt: t.Run.UpdatedAt, CreatedAt: t.Run.UpdatedAt})
	}
	return ms, nil
}

// NewEventID is a fresh event id: evt_ and 128 random bits.
func NewEventID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("read random: %v", err)) // crypto/rand does not fail on supported platforms
	}
	return "evt_" + hex.EncodeToString(b[:])
}

// Target is where a callback row goes and the id of its event, read from the
// row (for `signoff outbox`); ok is false for a row that is not a callback or
// cannot be read.
func Target(m *record.OutboxMessage) (url, eventID string, ok bool) {
	if m.Kind != Kind {
		return "", "", false
	}
	var p payload
	if json.Unmarshal(m.Payload, &p) != nil {
		return "", "", false
	}
	return p.URL, p.ID, true
}
