package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// Outbox is the engine's outbox as the dispatchers that deliver it use it:
// the messages to send, what became of each attempt, and where a request's
// message was posted. Each method is one transaction of the engine's; a
// dispatcher never opens one itself.
type Outbox struct{ e *Engine }

// Outbox returns the engine's outbox.
func (e *Engine) Outbox() *Outbox { return &Outbox{e} }

// List lists the undelivered messages that pass f (see Tx.ListOutbox).
func (o *Outbox) List(ctx context.Context, f storage.OutboxFilter) ([]*record.OutboxMessage, error) {
	var ms []*record.OutboxMessage
	err := o.e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		ms, err = tx.ListOutbox(ctx, f)
		return err
	})
	return ms, err
}

// Claim takes m for one more attempt: m.Attempts goes up by one and nobody
// else is to take it before until (a dispatcher that died mid-delivery
// leaves it to the next). ErrConflict when someone else took or recorded m
// since it was read: then it is theirs.
func (o *Outbox) Claim(ctx context.Context, m *record.OutboxMessage, until time.Time) error {
	m.Attempts++
	m.NextAttempt = until
	return o.put(ctx, m)
}

// Sent records that m was delivered at at.
func (o *Outbox) Sent(ctx context.Context, m *record.OutboxMessage, at time.Time) error {
	m.DeliveredAt, m.LastError = at, ""
	return o.put(ctx, m)
}

// Retry records that the last attempt at m failed, saying why, and that the
// next is due at next.
func (o *Outbox) Retry(ctx context.Context, m *record.OutboxMessage, next time.Time, reason string) error {
	m.NextAttempt, m.LastError = next, reason
	return o.put(ctx, m)
}

// put writes m's delivery state, a compare-and-set on its version.
func (o *Outbox) put(ctx context.Context, m *record.OutboxMessage) error {
	return o.e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return tx.UpdateOutbox(ctx, m) })
}

// Queue queues m at most once under the key m.RunID names (a channel's
// digest of one day, say), delivered or not: a second Queue with the key,
// after a restart or on another replica, queues nothing. The store refuses
// the second (record.OutboxMessage.Once), so two that queue at the same
// moment cannot both commit. queued says whether this one did.
func (o *Outbox) Queue(ctx context.Context, m *record.OutboxMessage) (queued bool, err error) {
	m.Once = m.RunID
	err = o.e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		queued = false
		if err := tx.EnqueueOutbox(ctx, m); err != nil {
			if errors.Is(err, storage.ErrDuplicate) {
				return nil
			}
			return err
		}
		queued = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("queue outbox message %s: %w", m.RunID, err)
	}
	return queued, nil
}

// Keyed lists the messages queued under key (see Queue), delivered or not,
// in the order they were queued.
func (o *Outbox) Keyed(ctx context.Context, key string) ([]*record.OutboxMessage, error) {
	var ms []*record.OutboxMessage
	err := o.e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		ms, err = tx.OutboxForRun(ctx, key)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read outbox messages %s: %w", key, err)
	}
	return ms, nil
}

// Posted records where a request's message went (see
// Tx.InsertMessageLocation): ErrDuplicate when another delivery of the post
// recorded its message first.
func (o *Outbox) Posted(ctx context.Context, l *record.MessageLocation) error {
	return o.e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return tx.InsertMessageLocation(ctx, l) })
}

// Unposted lists the pending requests of the runs named that have no
// message, from one snapshot. It is a hint for QueuePost, which checks again.
func (o *Outbox) Unposted(ctx context.Context, runIDs []string) ([]*record.ApprovalRequest, error) {
	var found []*record.ApprovalRequest
	err := o.e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		found = found[:0]
		for _, id := range runIDs {
			b, err := tx.LoadRun(ctx, id, storage.RunParts{Requests: true, Messages: true})
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			posted := postedRequests(b.Messages)
			for _, r := range b.Requests {
				if r.Status == record.RequestPending && !posted[r.ID] {
					found = append(found, r)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the pending requests without a message: %w", err)
	}
	return found, nil
}

// QueuePost queues m, the post of req's message, unless the request has a
// message or one is queued (an undelivered message of m's kind that isPost
// says is this request's post), or it is no longer pending on a waiting
// run; it says whether it queued m. The transaction reads the run first,
// which locks its row until it ends (SQLite has one writer), so that two
// sweeps take turns and the second finds the first's message; the run's
// chain and its requests are read as the engine reads a run it acts on,
// their seals checked. A run that fails that check is put in
// needs_attention, and the error returned.
func (o *Outbox) QueuePost(ctx context.Context, req *record.ApprovalRequest, m *record.OutboxMessage, isPost func(*record.OutboxMessage) bool) (bool, error) {
	e := o.e
	err := e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		l, err := e.runs.LoadWith(ctx, tx, req.RunID, storage.RunParts{Requests: true, Messages: true})
		if err != nil {
			return err
		}
		if err := e.in.CheckRun(ctx, tx, req.RunID, nil, l.More.Requests, nil, nil); err != nil {
			return err
		}
		if l.Run.Status != record.StatusWaitingApproval || !pendingAmong(l.More.Requests, req.ID) || postedRequests(l.More.Messages)[req.ID] {
			return errPostSettled
		}
		rows, err := tx.ListOutbox(ctx, storage.OutboxFilter{Kinds: []record.OutboxKind{m.Kind}, RunID: req.RunID})
		if err != nil {
			return fmt.Errorf("read the outbox of run %s: %w", req.RunID, err)
		}
		for _, r := range rows {
			if isPost(r) {
				return errPostSettled
			}
		}
		return tx.EnqueueOutbox(ctx, m)
	})
	var ie *IntegrityError
	switch {
	case errors.Is(err, errPostSettled) || record.IsRefused(err, record.CodeUnknownRun):
		return false, nil
	case errors.As(err, &ie):
		if aerr := e.runs.Attention(ctx, req.RunID, ie.Error()); aerr != nil {
			return false, errors.Join(err, aerr)
		}
		return false, err
	case err != nil:
		return false, fmt.Errorf("queue the post of request %s of run %s: %w", req.ID, req.RunID, err)
	}
	return true, nil
}

// errPostSettled: the request QueuePost was given was posted, queued or
// decided meanwhile.
var errPostSettled = errors.New("the request was posted, queued or decided meanwhile")

// postedRequests says which requests the locations are of.
func postedRequests(locs []*record.MessageLocation) map[string]bool {
	posted := make(map[string]bool, len(locs))
	for _, l := range locs {
		posted[l.RequestID] = true
	}
	return posted
}

// pendingAmong says whether request id is among reqs and pending.
func pendingAmong(reqs []*record.ApprovalRequest, id string) bool {
	for _, r := range reqs {
		if r.ID == id {
			return r.Status == record.RequestPending
		}
	}
	return false
}
