package benchkit

import (
	"context"
	"errors"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// KeepNothing is a store for measuring a handler without its storage: every
// request claimed in it is new, and an answer recorded is dropped. It keeps
// no runs: View is refused, and a transaction has only the claim and the
// answer (its other methods panic; a handler measured with it calls none).
type KeepNothing struct{}

var _ storage.Store = KeepNothing{}

// ErrKeepsNothing is KeepNothing's answer to View.
var ErrKeepsNothing = errors.New("this store keeps nothing")

// Update runs fn on a transaction that claims every request.
func (KeepNothing) Update(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	return fn(ctx, claimEvery{})
}

// View refuses: there is nothing to read.
func (KeepNothing) View(context.Context, func(ctx context.Context, tx storage.Tx) error) error {
	return ErrKeepsNothing
}

// Close has nothing to release.
func (KeepNothing) Close() error { return nil }

// claimEvery is KeepNothing's transaction: the embedded nil Tx stands for
// every method but the claim and the answer.
type claimEvery struct{ storage.Tx }

func (claimEvery) ClaimRequest(_ context.Context, r *record.SeenRequest) (*record.SeenRequest, bool, error) {
	r.Version = 1
	return r, true, nil
}

func (claimEvery) AnswerRequest(context.Context, *record.SeenRequest) error { return nil }
