package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
)

// HistoryEntry is one checkpoint of a run, decoded.
type HistoryEntry struct {
	Seq     int64         `json:"seq"`
	At      time.Time     `json:"at"`
	Hash    string        `json:"hash"`
	State   *record.State `json:"state,omitempty"`
	Problem string        `json:"problem,omitempty"`
	// Pruned is when Prune removed this checkpoint's state (nil: it has it).
	Pruned *time.Time `json:"pruned,omitempty"`
}

// History lists a run's checkpoints. It does not stop at a damaged one: it says
// what is wrong with it and goes on.
func (e *Engine) History(ctx context.Context, id string) ([]HistoryEntry, error) {
	var out []HistoryEntry
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		cps, err := checkpointsOf(ctx, tx, id)
		if err != nil {
			return err
		}
		// A pruned run's chain verifies as a whole only: a prefix ending at a
		// pruned checkpoint lacks the summary that allows it.
		_, _, whole := chain.Verify(id, cps)
		prefixes := chain.VerifyPrefixes(id, cps)
		for i, c := range cps {
			h := HistoryEntry{Seq: c.Seq, At: c.CreatedAt, Hash: c.Hash}
			switch {
			case !c.PrunedAt.IsZero():
				at := c.PrunedAt
				h.Pruned = &at
				if whole != nil {
					h.Problem = whole.Error()
				}
			case whole == nil && !cps[0].PrunedAt.IsZero():
				// A pruned run: its whole chain was verified above.
			default:
				if err := prefixes[i]; err != nil {
					h.Problem = err.Error()
				}
			}
			if b, err := chain.Resolve(cps, i); err == nil {
				if st, err := chain.Decode(b); err == nil {
					h.State = st
				}
			}
			out = append(out, h)
		}
		return nil
	})
	return out, err
}

// checkpointsOf reads a run's checkpoints as stored, unverified: a run that
// does not exist is refused as unknown.
func checkpointsOf(ctx context.Context, tx storage.Tx, id string) ([]*record.Checkpoint, error) {
	if _, err := tx.Run(ctx, id); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, UnknownRun(id)
		}
		return nil, fmt.Errorf("load run %s: %w", id, err)
	}
	cps, err := tx.Checkpoints(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("load checkpoints of run %s: %w", id, err)
	}
	return cps, nil
}
