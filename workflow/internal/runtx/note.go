package runtx

import (
	"context"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// Note appends an audit event of run runID that changes no checkpoint (a
// record of its own changed beside the run, such as a review), in tx.
func (rs *Runs) Note(ctx context.Context, tx storage.Tx, runID, actor string, action record.Event, detail any) error {
	return rs.audit(ctx, tx, runID, actor, action, detail)
}

// NoteTold is Note for an event the hooks are told of as of a transition
// that leaves run as it is (its row and state as loaded, in tx): an agent
// hears of it, and nothing a worker holds is written.
func (rs *Runs) NoteTold(ctx context.Context, tx storage.Tx, run *record.Run, st *record.State, actor string, action record.Event, detail any) error {
	if err := rs.audit(ctx, tx, run.ID, actor, action, detail); err != nil {
		return err
	}
	return rs.notify(ctx, tx, Change{Run: run, State: st, From: run.Status, Event: action})
}
