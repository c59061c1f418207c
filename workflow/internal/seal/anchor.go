package seal

import (
	"context"
	"errors"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// SealAnchor seals an anchor record about to be written; without keys it
// leaves it unsealed.
func (in *Sealer) SealAnchor(a *record.AuditAnchor) {
	if in.keys != nil {
		a.Seal = sealWith(in.keys, "anchor", anchorParts(a))
	}
}

// AnchorHead moves the store's sealed head to anchor a, just written, so
// that deleting the newest anchors shows: the head names the last one. A
// store's first anchor may make its head. Without keys there is no head to
// move, and a damaged head is left as it is, for verify to report, not
// sealed again.
func (in *Sealer) AnchorHead(ctx context.Context, tx storage.Tx, a *record.AuditAnchor) error {
	if in.keys == nil {
		return nil
	}
	h, err := in.ReadHead(ctx, tx)
	var ie *record.IntegrityError
	if errors.As(err, &ie) {
		return nil // left for verify to report, not sealed again
	}
	if err != nil {
		return err
	}
	if h == nil {
		h = &record.IntegrityHead{KeyedSince: a.At}
	}
	h.AnchorID, h.AnchorHash = a.ID, a.Hash
	h.Seal = sealWith(in.keys, "head", headParts(h))
	return tx.PutIntegrityHead(ctx, h)
}

// AnchorProblem says what is wrong with an anchor record's seal, or "".
func (in *Sealer) AnchorProblem(h *record.IntegrityHead, a *record.AuditAnchor) string {
	return in.sealProblem(h, "anchor", a.Seal, a.At, anchorParts(a))
}
