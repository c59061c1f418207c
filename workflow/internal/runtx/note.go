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
