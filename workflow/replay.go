package workflow

import (
	"context"
	"errors"
	"fmt"
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

// ReplayedError is what a decision carried by a request claimed before
// (DecideInput.Claim) gets: nothing was decided or recorded, and First is
// the request as stored, with the first copy's answer once it has one.
type ReplayedError struct {
	First *record.SeenRequest
}

func (e *ReplayedError) Error() string {
	return "request " + e.First.Digest + " was claimed before: not handled again"
}

// claim is a DecideInput's Claim on its way through one Decide: taken in a
// transaction that may yet roll back, committed once one that took it has.
// A nil claim (no Claim) takes nothing.
type claim struct {
	req       *record.SeenRequest
	committed bool
}

// take claims the request in tx, first thing: a *ReplayedError when a copy
// took it before, which the caller returns to roll back.
func (c *claim) take(ctx context.Context, tx storage.Tx) error {
	if c == nil || c.committed {
		return nil
	}
	first, claimed, err := tx.ClaimRequest(ctx, c.req)
	if err != nil {
		return fmt.Errorf("claim the request of a decision: %w", err)
	}
	if !claimed {
		return &ReplayedError{First: first}
	}
	return nil
}

// commit notes the outcome of the transaction that took the claim.
func (c *claim) commit(err error) {
	if c != nil && err == nil {
		c.committed = true
	}
}

// claimAlone commits c in a transaction of its own.
func (p *Replays) claimAlone(ctx context.Context, c *claim) error {
	err := p.e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return c.take(ctx, tx) })
	c.commit(err)
	return err
}

// refuse audits a refused decision, taking its claim in the same
// transaction: a copy of the request is refused by nobody twice.
func (e *Engine) refuse(ctx context.Context, in DecideInput, r *record.RefusedError) error {
	if in.claim == nil {
		err := e.runs.Refuse(ctx, in.Approver.ID, r)
		if err == error(r) {
			e.fail("after-refusal-commit")
		}
		return err
	}
	err := e.runs.RefuseWith(ctx, in.Approver.ID, r, in.claim.take)
	var replayed *ReplayedError
	switch {
	case errors.As(err, &replayed):
		return replayed
	case err == error(r):
		in.claim.commit(nil)
		e.fail("after-refusal-commit")
	}
	return err
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
