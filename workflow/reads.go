package workflow

import (
	"context"
	"fmt"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// Backlog is what waits, as one snapshot shows it: how many runs are in
// each status, the requests waiting for a decision, the messages not
// delivered yet. It is read on the indexes of status and of undelivered
// messages, for gauges.
type Backlog struct {
	// Runs counts the runs in each status (a status without runs is absent).
	Runs map[record.Status]int
	// Pending are the pending requests of the waiting runs, of at most
	// limit runs.
	Pending []*record.ApprovalRequest
	// Undelivered are the messages not delivered yet, due or not, oldest
	// first, at most limit.
	Undelivered []*record.OutboxMessage
}

// Backlog reads the backlog in one read transaction, at most limit waiting
// runs and limit messages of it (0: no limit).
func (e *Engine) Backlog(ctx context.Context, limit int) (*Backlog, error) {
	b := &Backlog{}
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		*b = Backlog{}
		var err error
		// One GROUP BY on the status index counts every status, however
		// many runs ended.
		if b.Runs, err = tx.CountRuns(ctx); err != nil {
			return err
		}
		runs, err := tx.ListRuns(ctx, storage.RunFilter{Statuses: []record.Status{record.StatusWaitingApproval}, Limit: limit})
		if err != nil {
			return err
		}
		for _, r := range runs {
			reqs, err := tx.RequestsForRun(ctx, r.ID)
			if err != nil {
				return err
			}
			for _, q := range reqs {
				if q.Status == record.RequestPending {
					b.Pending = append(b.Pending, q)
				}
			}
		}
		b.Undelivered, err = tx.ListOutbox(ctx, storage.OutboxFilter{Limit: limit})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the backlog: %w", err)
	}
	return b, nil
}

// AuditEvents lists the audit events f selects, as stored: a page of the
// log (see AuditLog for all of a run's).
func (e *Engine) AuditEvents(ctx context.Context, f storage.AuditFilter) ([]*record.AuditEvent, error) {
	var evs []*record.AuditEvent
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		evs, err = tx.AuditEvents(ctx, f)
		return err
	})
	return evs, err
}

// ReadIntegrityHead reads the store's integrity head as it is stored,
// unchecked: what a command looks at to choose the keys an engine is to be
// built with, before there is an engine. ErrNotFound when the store was
// never keyed.
func ReadIntegrityHead(ctx context.Context, s storage.Store) (*record.IntegrityHead, error) {
	var h *record.IntegrityHead
	err := s.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		h, err = tx.IntegrityHead(ctx)
		return err
	})
	return h, err
}
