package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// maxChecked bounds the waiting runs QueueUnposted remembers as settled; past
// it the memory starts over, which costs one more read of each.
const maxChecked = 100000

// unposted is a pending request without a message, as one snapshot saw it.
type unposted struct {
	run *record.Run
	req *record.ApprovalRequest
}

// QueueUnposted queues the post of every pending request of a waiting run that
// has no message and no post queued, and returns how many it queued. Such runs
// waited while no process queued their message: submitted before the config
// had a slack section, or by a process without one.
//
// Several replicas may sweep at once without posting twice: a request found
// without a message and without an undelivered post row is checked again by
// the engine in the transaction that queues its post (Outbox.QueuePost),
// which reads its run first and so takes turns with every other sweep and
// decision. Nothing but the outbox row is written (but for a run whose
// records fail their check there, which the engine puts in needs_attention).
//
// Runs found settled are remembered with the time of their last change, so
// that later sweeps read only runs that are new or changed.
func (d *Dispatcher) QueueUnposted(ctx context.Context) (int, error) {
	f := storage.RunFilter{Statuses: []record.Status{record.StatusWaitingApproval}, Limit: 500}
	queued := 0
	for {
		page, found, err := d.unpostedIn(ctx, f)
		if err != nil {
			return queued, fmt.Errorf("look for waiting runs without a message: %w", err)
		}
		for _, u := range found {
			ok, err := d.queuePost(ctx, u)
			if err != nil {
				return queued, err
			}
			if ok {
				queued++
			}
		}
		if len(page) < f.Limit {
			return queued, nil
		}
		last := page[len(page)-1]
		f.AfterCreated, f.AfterID = last.CreatedAt, last.ID
	}
}

// unpostedIn reads one page of waiting runs and returns the pending requests
// among them that have neither a message nor an undelivered post row.
func (d *Dispatcher) unpostedIn(ctx context.Context, f storage.RunFilter) ([]*record.Run, []unposted, error) {
	page, err := d.Engine.List(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	runs := map[string]*record.Run{}
	var ids []string
	for _, run := range page {
		if !d.settled(run) {
			runs[run.ID] = run
			ids = append(ids, run.ID)
		}
	}
	if len(ids) == 0 {
		return page, nil, nil
	}
	outbox := d.Engine.Outbox()
	reqs, err := outbox.Unposted(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	var found []unposted
	asks := map[string]bool{}
	for _, r := range reqs {
		if run := runs[r.RunID]; run != nil {
			found, asks[run.ID] = append(found, unposted{run, r}), true
		}
	}
	for _, id := range ids {
		if !asks[id] {
			d.settle(runs[id])
		}
	}
	if len(found) == 0 {
		return page, nil, nil
	}
	// Every post row not delivered yet, due or not: a post row in retry or
	// in flight counts as queued.
	rows, err := outbox.List(ctx, storage.OutboxFilter{Kinds: []record.OutboxKind{KindPost}})
	if err != nil {
		return nil, nil, fmt.Errorf("read the outbox: %w", err)
	}
	queued := queuedPosts(rows)
	missing := found[:0]
	for _, u := range found {
		if queued[u.req.ID] {
			d.settle(u.run)
			continue
		}
		missing = append(missing, u)
	}
	return page, missing, nil
}

// queuePost has the engine queue the post row of u's request, unless it was
// posted, queued or decided since u was read. It reports whether it did.
func (d *Dispatcher) queuePost(ctx context.Context, u unposted) (bool, error) {
	body, err := json.Marshal(OutboxPayload{RunID: u.run.ID, RequestID: u.req.ID})
	if err != nil {
		return false, fmt.Errorf("encode the post of run %s: %w", u.run.ID, err)
	}
	now := d.now()
	m := &record.OutboxMessage{RunID: u.run.ID, Kind: KindPost, Payload: body, NextAttempt: now, CreatedAt: now}
	ok, err := d.Engine.Outbox().QueuePost(ctx, u.req, m, func(row *record.OutboxMessage) bool {
		return queuedPosts([]*record.OutboxMessage{row})[u.req.ID]
	})
	if err != nil {
		return false, err
	}
	if !ok {
		return false, nil // changed meanwhile: the next sweep reads it again
	}
	d.settle(u.run)
	d.log().Info("slack message queued for a run that waited without one", "run_id", u.run.ID, "request_id", u.req.ID)
	return true, nil
}

func (d *Dispatcher) settled(run *record.Run) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.checked[run.ID]
	return ok && at.Equal(run.UpdatedAt)
}

func (d *Dispatcher) settle(run *record.Run) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.checked == nil || len(d.checked) >= maxChecked {
		d.checked = map[string]time.Time{}
	}
	d.checked[run.ID] = run.UpdatedAt
}

// queuedPosts says which requests rows hold a post of.
func queuedPosts(rows []*record.OutboxMessage) map[string]bool {
	queued := map[string]bool{}
	for _, m := range rows {
		if m.Kind != KindPost {
			continue
		}
		var p OutboxPayload
		if json.Unmarshal(m.Payload, &p) == nil {
			queued[p.RequestID] = true
		}
	}
	return queued
}
