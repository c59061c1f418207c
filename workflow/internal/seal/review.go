package seal

import (
	"context"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

func reviewParts(r *record.Review) []string {
	return []string{r.RunID, r.RequestID, r.Rule, r.Role, r.ForcedBy, r.Reason, ms(r.Due), string(r.Status),
		r.AcknowledgedBy, ms(r.AcknowledgedAt), r.Note, ms(r.RemindedAt), ms(r.CreatedAt)}
}

func (t *sealingTx) InsertReview(ctx context.Context, r *record.Review) error {
	r.Seal = sealWith(t.in.keys, "review", reviewParts(r))
	return t.Tx.InsertReview(ctx, r)
}

func (t *sealingTx) UpdateReview(ctx context.Context, r *record.Review) error {
	r.Seal = sealWith(t.in.keys, "review", reviewParts(r))
	return t.Tx.UpdateReview(ctx, r)
}

// CheckReview checks a review's seal as read from the store: an
// IntegrityError naming its run when it does not match.
func (in *Sealer) CheckReview(ctx context.Context, tx storage.Tx, r *record.Review) error {
	if in.keys == nil {
		return nil
	}
	h, err := in.runHead(ctx, tx, r.RunID)
	if err != nil {
		return err
	}
	if p := in.sealProblem(h, "review", r.Seal, r.CreatedAt, reviewParts(r)); p != "" {
		return &record.IntegrityError{RunID: r.RunID, Problem: "the follow-up review: " + p}
	}
	return nil
}
