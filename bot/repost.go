package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
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
// without a message and without an undelivered post row is checked again in
// the transaction that queues its post, after reading its run there, which
// locks the run's row (SQLite has one writer): two sweeps take turns, and the
// second finds the first's row. Nothing but the outbox row is written.
//
// Runs found settled are remembered with the time of their last change, so
// that later sweeps read only runs that are new or changed.
func (d *Dispatcher) QueueUnposted(ctx context.Context) (int, error) {
	f := storage.RunFilter{Statuses: []record.Status{record.StatusWaitingApproval}, Limit: 500}
	queued := 0
	for {
		var page []*record.Run
		var found []unposted
		err := d.Store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
			var err error
			page, found, err = d.unpostedIn(ctx, tx, f)
			return err
		})
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
func (d *Dispatcher) unpostedIn(ctx context.Context, tx storage.Tx, f storage.RunFilter) ([]*record.Run, []unposted, error) {
	page, err := tx.ListRuns(ctx, f)
	if err != nil {
		return nil, nil, fmt.Errorf("list waiting runs: %w", err)
	}
	var found []unposted
	for _, run := range page {
		if d.settled(run) {
			continue
		}
		reqs, err := tx.RequestsForRun(ctx, run.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("list requests of run %s: %w", run.ID, err)
		}
		posted, err := postedRequests(ctx, tx, run.ID)
		if err != nil {
			return nil, nil, err
		}
		none := true
		for _, r := range reqs {
			if r.Status == record.RequestPending && !posted[r.ID] {
				found, none = append(found, unposted{run, r}), false
			}
		}
		if none {
			d.settle(run)
		}
	}
	if len(found) == 0 {
		return page, nil, nil
	}
	// Every row not delivered yet, due or not: a post row in retry or in
	// flight counts as queued.
	rows, err := tx.DueOutbox(ctx, d.now().Add(100*365*24*time.Hour), 0)
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

// postedRequests says which of a run's requests have a message.
func postedRequests(ctx context.Context, tx storage.Tx, runID string) (map[string]bool, error) {
	locs, err := tx.MessageLocations(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("list the messages of run %s: %w", runID, err)
	}
	posted := make(map[string]bool, len(locs))
	for _, l := range locs {
		posted[l.RequestID] = true
	}
	return posted, nil
}

// errSettled: the request found unposted was posted, queued or decided
// meanwhile.
var errSettled = errors.New("the request changed since the sweep read it")

// queuePost writes the post row of u's request, unless it was posted, queued
// or decided since u was read. It reports whether it did.
func (d *Dispatcher) queuePost(ctx context.Context, u unposted) (bool, error) {
	body, err := json.Marshal(OutboxPayload{RunID: u.run.ID, RequestID: u.req.ID})
	if err != nil {
		return false, fmt.Errorf("encode the post of run %s: %w", u.run.ID, err)
	}
	now := d.now()
	err = d.Store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		// First the run: in a write transaction its row is locked until the
		// end, so what follows is read after any sweep or decision before.
		run, err := tx.Run(ctx, u.run.ID)
		if err != nil {
			return err
		}
		req, err := tx.Request(ctx, u.req.ID)
		if err != nil {
			return err
		}
		if run.Status != record.StatusWaitingApproval || req.Status != record.RequestPending {
			return errSettled
		}
		posted, err := postedRequests(ctx, tx, run.ID)
		if err != nil {
			return err
		}
		rows, err := tx.ListOutbox(ctx, storage.OutboxFilter{Kinds: []record.OutboxKind{KindPost}, RunID: run.ID})
		if err != nil {
			return fmt.Errorf("read the outbox of run %s: %w", run.ID, err)
		}
		if posted[req.ID] || queuedPosts(rows)[req.ID] {
			return errSettled
		}
		return tx.EnqueueOutbox(ctx, &record.OutboxMessage{RunID: u.run.ID, Kind: KindPost, Payload: body, NextAttempt: now, CreatedAt: now})
	})
	if errors.Is(err, errSettled) || errors.Is(err, storage.ErrNotFound) {
		return false, nil // changed meanwhile: the next sweep reads it again
	}
	if err != nil {
		return false, fmt.Errorf("queue the post of run %s: %w", u.run.ID, err)
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
