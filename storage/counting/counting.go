// Package counting wraps a store to count the read-write transactions that
// commit: what the speed figures (internal/benchkit) divide by the
// operations they measure. It is a store of its own, so that nothing above
// the store opens a transaction to count one.
package counting

import (
	"context"
	"sync/atomic"

	"github.com/signoff-dev/signoff/storage"
)

// Store is a store that counts its Updates that committed.
type Store struct {
	storage.Store
	commits atomic.Int64
}

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
