package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/verify"
)

// Anchor names, as recorded outside the store, either an anchor record by
// its id and hash (A12:HASH: serve writes one every ten minutes and logs
// it), which commits to every run's audit events up to its time, or, as
// anchors did before the log was chained per run, one event of the global
// chain by its seq and hash (SEQ:HASH).
type Anchor = verify.Anchor

// ParseAnchor reads A12:HASH (an anchor record) or SEQ:HASH (an event of
// the global chain, as anchors were written before).
func ParseAnchor(s string) (Anchor, error) { return verify.ParseAnchor(s) }

// Anchor writes an anchor record that commits to every run's audit events up
// to now (the heads that moved since the anchor before it, chained to it) and
// returns it, to be recorded outside the store: `verify --anchor` later
// proves the log still extends it. When no head moved it returns the newest
// anchor, and before any event, the zero Anchor. serve calls it every ten
// minutes; anchor writers on several replicas take turns.
func (e *Engine) Anchor(ctx context.Context) (Anchor, error) {
	var out Anchor
	err := e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		prev, err := tx.LatestAnchor(ctx)
		if errors.Is(err, storage.ErrNotFound) {
			prev, err = nil, nil
		}
		if err != nil {
			return err
		}
		heads, err := tx.AnchorHeads(ctx)
		if err != nil {
			return err
		}
		if len(heads) == 0 {
			if prev != nil {
				out = Anchor{Seq: prev.ID, Hash: prev.Hash}
			}
			return nil
		}
		a := &record.AuditAnchor{ID: 1, At: e.now(), Heads: heads}
		if prev != nil {
			a.ID, a.PrevHash = prev.ID+1, prev.Hash
		}
		a.Hash = record.AnchorHash(a)
		e.in.SealAnchor(a)
		if err := tx.InsertAnchor(ctx, a); err != nil {
			return err
		}
		out = Anchor{Seq: a.ID, Hash: a.Hash}
		return e.in.AnchorHead(ctx, tx, a)
	})
	if err != nil {
		return Anchor{}, fmt.Errorf("write an audit anchor: %w", err)
	}
	return out, nil
}

// LastAuditSeq is the seq of the newest audit event (0 for none).
func (e *Engine) LastAuditSeq(ctx context.Context) (int64, error) {
	var seq int64
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		evs, err := tx.AuditEvents(ctx, storage.AuditFilter{Newest: true, Limit: 1})
		if err != nil {
			return err
		}
		if len(evs) > 0 {
			seq = evs[0].Seq
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read the newest audit event: %w", err)
	}
	return seq, nil
}
