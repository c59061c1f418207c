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
)

// OutboxPayload is the body of a Slack outbox row: what to render, not the
// rendering, so that a late delivery shows the run as it is then.
type OutboxPayload struct {
	RunID     string `json:"run_id"`
	RequestID string `json:"request_id,omitempty"`
}

// Outbox is the engine hook that queues Slack messages in the transaction of the
// transition that causes them: a decision never waits for Slack, and a Slack
// outage loses nothing.
type Outbox struct{}

var _ workflow.Hook = Outbox{}

// events after which a posted message no longer shows the run as it is.
var updateEvents = map[record.Event]bool{
	record.EventDecided: true, record.EventEdited: true, record.EventCancelled: true,
	record.EventExpired: true, record.EventFinished: true, record.EventNeedsAttention: true,
	record.EventReassigned: true, record.EventExtended: true, record.EventExecuted: true,
	record.EventReconciled: true, record.EventResolved: true,
}

// events that create a request a person must see.
var postEvents = map[record.Event]bool{record.EventSubmitted: true, record.EventProposed: true, record.EventEdited: true}

// OnTransition queues a post when a transition creates a pending request, and a
// rewrite after every change of a run that was ever put to a person, whatever
// its gate says now (an edit can lower the risk so that no request is current).
func (Outbox) OnTransition(ctx context.Context, t *workflow.Transition) ([]*record.OutboxMessage, error) {
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
