// Package counting wraps a store to count the read-write transactions that
// commit, and the time spent in its list reads: what the speed figures
// (internal/benchkit, signoff bench) divide by the operations they measure,
// and the store's part of a list the engine reads. It is a store of its
// own, so that nothing above the store opens a transaction to count one.
package counting

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// Store is a store that counts its Updates that committed and times the
// lists its Views read.
type Store struct {
	storage.Store
	commits atomic.Int64
	listed  atomic.Int64 // nanoseconds in ListRuns and ListRunHeads of Views
}

// View is the store's, with the time its list reads take counted (Listed).
func (c *Store) View(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	return c.Store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		return fn(ctx, &timedTx{Tx: tx, listed: &c.listed})
	})
}

// Listed is the time the store has spent in the list reads of Views so far
// (ListRuns, ListRunHeads: the query and the scan of its rows).
func (c *Store) Listed() time.Duration { return time.Duration(c.listed.Load()) }

// timedTx times a View's list reads.
type timedTx struct {
	storage.Tx
	listed *atomic.Int64
}

func (t *timedTx) ListRuns(ctx context.Context, f storage.RunFilter) ([]*record.Run, error) {
	defer t.since(time.Now())
	return t.Tx.ListRuns(ctx, f)
}

func (t *timedTx) ListRunHeads(ctx context.Context, f storage.RunFilter) ([]*storage.RunHead, error) {
	defer t.since(time.Now())
	return t.Tx.ListRunHeads(ctx, f)
}

func (t *timedTx) since(t0 time.Time) { t.listed.Add(int64(time.Since(t0))) }

// New wraps s.
func New(s storage.Store) *Store { return &Store{Store: s} }

// Update is the store's, counted when it returns nil.
func (c *Store) Update(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	err := c.Store.Update(ctx, fn)
	if err == nil {
		c.commits.Add(1)
	}
	return err
}

// Commits is how many Updates committed so far.
func (c *Store) Commits() int64 { return c.commits.Load() }

// LastRead passes the View's hint on (storage.LastRead), so that timing a
// View costs it no round trip.
func (t *timedTx) LastRead() { storage.LastRead(t.Tx) }
