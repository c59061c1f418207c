package benchkit

import (
	"context"
	"errors"
	"fmt"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
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

// KeepNothingReplays is the replay memory of an engine whose store keeps
// nothing (KeepNothing): every request claimed in it is new, and an answer
// is dropped. The bare handler claims in it what the real one claims in the
// engine's store.
func KeepNothingReplays(roles *policy.Roles) (*workflow.Replays, error) {
	pol, err := policy.New("keep-nothing", []policy.Rule{{Name: "any", When: "true", Risk: record.RiskLow}}, roles)
	if err != nil {
		return nil, fmt.Errorf("keep-nothing policy: %w", err)
	}
	eng, err := workflow.New(workflow.Config{Store: KeepNothing{}, Policy: pol, Roles: roles})
	if err != nil {
		return nil, fmt.Errorf("keep-nothing engine: %w", err)
	}
	return eng.Replays(), nil
}
