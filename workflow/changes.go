package workflow

import (
	"context"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// notifyingStore tells Changes which runs a transaction wrote, once it has
// committed: a waiter woken before the commit would read the old state.
type notifyingStore struct {
	storage.Store
	changes *storage.Changes
}

func (s *notifyingStore) Update(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	var ids []string
	err := s.Store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		ids = ids[:0] // a retried transaction starts over
		return fn(ctx, &notingTx{Tx: tx, ids: &ids})
	})
	if err == nil && len(ids) > 0 {
		s.changes.Notify(ids...)
	}
	return err
}

// notingTx notes the runs whose row a transaction writes: every transition
// of a run updates its row.
type notingTx struct {
	storage.Tx
	ids *[]string
}

func (t *notingTx) InsertRun(ctx context.Context, r *record.Run) error {
	err := t.Tx.InsertRun(ctx, r)
	if err == nil {
		*t.ids = append(*t.ids, r.ID)
	}
	return err
}

func (t *notingTx) SaveRun(ctx context.Context, w *storage.RunWrite) error {
	err := t.Tx.SaveRun(ctx, w)
	if err == nil {
		*t.ids = append(*t.ids, w.Run.ID)
	}
	return err
}

func (t *notingTx) UpdateRun(ctx context.Context, r *record.Run) error {
	err := t.Tx.UpdateRun(ctx, r)
	if err == nil {
		*t.ids = append(*t.ids, r.ID)
	}
	return err
}

// Changes is the hub that wakes waiters on this engine's runs.
func (e *Engine) Changes() *storage.Changes { return e.changes }

// WaitRun returns the run once its status is no longer from (at once when it
// already is not), with changed true; or, when ctx ends first, the run as it
// is then with changed false. An empty from waits for any change of status
// from the one first read. It never polls: it sleeps until Changes wakes it.
func (e *Engine) WaitRun(ctx context.Context, id string, from record.Status) (v *RunView, changed bool, err error) {
	for {
		woken, stop := e.changes.Watch(id)
		v, err = e.Get(ctx, id)
		if err != nil {
			stop()
			if ctx.Err() != nil {
				// The wait ended during the read: answer with the run as it is.
				v, err = e.Get(context.WithoutCancel(ctx), id)
				if err != nil {
					return nil, false, err
				}
				// With no status to compare (from ""), nothing was seen change.
				return v, from != "" && v.Status != from, nil
			}
			return nil, false, err
		}
		if from == "" {
			from = v.Status
		}
		if v.Status != from {
			stop()
			return v, true, nil
		}
		select {
		case <-woken:
			stop()
		case <-ctx.Done():
			stop()
			// One last read: a change another process made may not have
			// woken this one yet.
			if v, err = e.Get(context.WithoutCancel(ctx), id); err != nil {
				return nil, false, err
			}
			return v, v.Status != from, nil
		}
	}
}
