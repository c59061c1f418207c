package execute

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// An intent is recorded in the checkpoint of the commit that makes it (the
// run's state, sealed and chained, with the run row moved on by
// compare-and-set), not in a row of its own: the operation's row is written
// with its first outcome (a receipt, a failure) or its first counted retry.
// Until then the intent is a pending record of the state with Intended set,
// and WithIntents is how every reader of a run's operations sees it.

// WithIntents is ops, a run's operation rows, with the intents st holds
// that no row holds yet, as the operations they are (Version 0: their row
// is inserted when written), in the order of their actions. A row wins over
// the record of its key: it is the later write.
func WithIntents(ops []*record.Operation, runID string, st *record.State) []*record.Operation {
	if st == nil {
		return ops
	}
	var out []*record.Operation
	for _, rec := range st.Operations {
		if rec.Intended == nil || rec.Status != record.OpPending || hasKey(ops, rec.Key) {
			continue
		}
		if out == nil {
			out = slices.Clone(ops)
		}
		out = append(out, intentOf(runID, rec))
	}
	if out == nil {
		return ops
	}
	slices.SortStableFunc(out, func(a, b *record.Operation) int { return a.Index - b.Index })
	return out
}

func hasKey(ops []*record.Operation, key string) bool {
	for _, op := range ops {
		if op.Key == key {
			return true
		}
	}
	return false
}

// intentOf is the operation an intent record stands for.
func intentOf(runID string, rec record.OperationRecord) *record.Operation {
	return &record.Operation{
		Key: rec.Key, RunID: runID, Index: rec.Index, Action: rec.Action, ArgsDigest: rec.ArgsDigest, Status: rec.Status,
		Attempts: rec.Attempts, Error: rec.Error, CreatedAt: *rec.Intended, UpdatedAt: *rec.Intended,
	}
}

// WriteOperation writes op's row: inserted when only its run's checkpoint
// held it (an intent, Version 0), else moved on by compare-and-set. Either
// way a row another wrote first is storage.ErrConflict: Version 0 is the
// compare-and-set's "no row yet".
func WriteOperation(ctx context.Context, tx storage.Tx, op *record.Operation) error {
	if op.Version == 0 {
		err := tx.InsertOperation(ctx, op)
		if errors.Is(err, storage.ErrDuplicate) {
			return fmt.Errorf("write operation %s: another wrote it first: %w (%w)", op.Key, storage.ErrConflict, err)
		}
		if err != nil {
			return fmt.Errorf("write operation %s: %w", op.Key, err)
		}
		return nil
	}
	if err := tx.UpdateOperation(ctx, op); err != nil {
		return fmt.Errorf("write operation %s: %w", op.Key, err)
	}
	return nil
}
