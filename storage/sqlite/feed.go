package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// defaultFeedEvery is how often FeedChanges looks at data_version while
// someone waits: a wake comes at most this late after another process's
// commit.
const defaultFeedEvery = 25 * time.Millisecond

// WithFeedInterval makes FeedChanges look for other processes' commits every
// d instead of every 25 ms.
func WithFeedInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.feedEvery = d
		}
	}
}

var _ workflow.ChangeFeed = (*Store)(nil)

// FeedChanges tells c when another connection has committed to the file:
// SQLite has no way to notify another process, but PRAGMA data_version, read
// on one connection kept for the purpose, changes only when a commit was made
// by some other connection since its last read. While someone waits
// (c.Waiting() > 0) it reads it every feed interval and calls c.NotifyAll when
// it changed; while no one waits it reads nothing.
//
// This is not a busy loop. The read is of a counter in the WAL index, in
// shared memory: no query of runs, no disk, no lock a writer waits for. The
// waiters themselves still sleep until woken, and then read their run once.
// The commits of this process's own Store change the counter too (they are
// another connection's); the engine has already woken their waiters, so each
// wakes them once more, at most once per interval however many commits it
// made, for the price of one read per waiter. It does not know which run
// changed, so every waiter reads its run again.
//
// The connection is one of the read pool's, held while the feed runs: one
// reader fewer for View, and no second set of pragmas to keep alike.
//
// It calls c.NotifyAll once it first reads the counter (a commit before was
// not seen) and again after a failed read, when it reads on a new
// connection. It returns nil when ctx ends. A file opened read-only as
// immutable (no WAL file, in a folder it may not write) never changes as far
// as SQLite knows, so no wake comes from it.
func (s *Store) FeedChanges(ctx context.Context, c *workflow.Changes) error {
	t := time.NewTicker(s.feedEvery)
	defer t.Stop()
	var conn *sql.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var last int64
	failing := false
	for {
		if conn == nil || c.Waiting() > 0 {
			v, fresh, err := s.dataVersion(ctx, &conn)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return nil
				}
				if !failing {
					s.log.Warn("looking for commits of other processes", "path", s.path, "error", err.Error())
				}
				failing = true
				if conn != nil {
					conn.Close()
					conn = nil
				}
			case fresh || v != last:
				failing = false
				last = v
				c.NotifyAll()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// dataVersion reads PRAGMA data_version on *conn, taking a connection from
// the read pool first when there is none; fresh says it did, since a new
// connection's number says nothing of the old one's.
func (s *Store) dataVersion(ctx context.Context, conn **sql.Conn) (v int64, fresh bool, err error) {
	if *conn == nil {
		if *conn, err = s.read.Conn(ctx); err != nil {
			return 0, false, fmt.Errorf("data version: %w", err)
		}
		fresh = true
	}
	if err := (*conn).QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		return 0, false, fmt.Errorf("data version: %w", interpretError(err))
	}
	return v, fresh, nil
}
