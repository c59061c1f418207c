package workflow

import (
	"context"

	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/verify"
)

// VerifyReport is what Verify found.
type VerifyReport = verify.Report

// Verify checks every run's checkpoint chain and audit chain, the seals of
// every checkpoint, approval request, decision, operation, audit event, run
// head, anchor and delegation when keys are configured, that every sealed transition has
// its audit event, that each run's audit log ends where its sealed head says
// and the global chain of older events where the store's head says (so
// deleting the newest events shows), and that the log extends every anchor
// stored and each of anchors. It changes nothing.
func (e *Engine) Verify(ctx context.Context, anchors ...Anchor) (*VerifyReport, error) {
	v := &verify.Verifier{Sealer: e.in, RowProblem: rowProblem}
	var rep *VerifyReport
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		if rep, err = v.Verify(ctx, tx, anchors); err != nil {
			return err
		}
		return e.delegations.verify(ctx, tx, rep)
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}
