package workflow

import (
	"context"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// Replays is the engine's memory of the requests a server took (SeenRequest),
// so that a copy of one, on any replica, gets the first one's answer and
// changes nothing. Each method is one transaction of the engine's: a claim
// commits before its request is handled, so a copy on another replica sees
// it at once.
type Replays struct{ e *Engine }

// Replays returns the engine's memory of requests taken.
func (e *Engine) Replays() *Replays { return &Replays{e} }

// Claim takes r's digest unless a request with it was taken before (see
// Tx.ClaimRequest): first is the request stored, r or the copy that came
// first, and claimed says which.
func (p *Replays) Claim(ctx context.Context, r *record.SeenRequest) (first *record.SeenRequest, claimed bool, err error) {
	err = p.e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		first, claimed, err = tx.ClaimRequest(ctx, r)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return first, claimed, nil
}

// Answer records the answer r carries (see Tx.AnswerRequest), for the
// copies that follow.
func (p *Replays) Answer(ctx context.Context, r *record.SeenRequest) error {
	return p.e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return tx.AnswerRequest(ctx, r) })
}

// Forget deletes up to limit (0: no limit) requests whose window passed by
// now, and says how many.
func (p *Replays) Forget(ctx context.Context, now time.Time, limit int) (int, error) {
	var n int
	err := p.e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		n, err = tx.ForgetRequests(ctx, now, limit)
		return err
	})
	return n, err
}
