package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
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

var _ storage.ChangeFeed = (*Store)(nil)

// FeedChanges tells c when another process has committed to the file: SQLite
// has no way to notify another process, but PRAGMA data_version, read on one
// connection, changes only when some other connection has committed since
// that connection's last read. While someone waits (c.Wanted(): on a run,
// or on any change, as serve's workers always do) it reads it every feed
// interval and calls c.NotifyAll when it changed; while no one waits it reads
// nothing.
//
// This is not a busy loop. The read is of a counter in the WAL index, in
// shared memory: no query of runs, no disk, no lock a writer waits for. The
// waiters themselves still sleep until woken, and then read their run once.
// It does not know which run changed, so every waiter reads its run again.
//
// The connection it reads on is the store's write connection, taken between
// two batches of Updates (for the microseconds the read takes): that is the
// one connection whose own commits do not change its data_version, so this
// process's commits, whose waiters the engine has already woken, wake no one
// a second time. A read-only store has no write connection and makes no
// commits: it keeps one connection of its read pool for the purpose.
//
// It calls c.NotifyAll once it first reads the counter (a commit before was
// not seen) and again whenever it reads on a connection other than last
// time's (a failed read closes the one it kept), since two connections'
// numbers cannot be compared. It returns nil when ctx ends. A file opened
// read-only as immutable (no WAL file, in a folder it may not write) never
// changes as far as SQLite knows, so no wake comes from it.
func (s *Store) FeedChanges(ctx context.Context, c *storage.Changes) error {
	t := time.NewTicker(s.feedEvery)
	defer t.Stop()
	var fv feedVersion
	defer fv.close()
	var last int64
	failing := false
	for {
		if fv.on == nil || c.Wanted() {
			v, fresh, err := s.dataVersion(ctx, &fv)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return nil
				}
				if !failing {
					s.log.Warn("looking for commits of other processes", "path", s.path, "error", err.Error())
				}
				failing = true
				fv.close()
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

// feedVersion is the connection FeedChanges reads data_version on: on is the
// driver's connection last read on, kept is the read pool's connection a
// read-only store holds.
type feedVersion struct {
	on   any
	kept *sql.Conn
}

func (fv *feedVersion) close() {
	if fv.kept != nil {
		fv.kept.Close()
	}
	*fv = feedVersion{}
}

// dataVersion reads PRAGMA data_version, on the write connection or on the
// read connection fv keeps; fresh says the connection is not last time's.
func (s *Store) dataVersion(ctx context.Context, fv *feedVersion) (v int64, fresh bool, err error) {
	conn := fv.kept
	if s.write != nil {
		// The pool's one connection, back to the committer right after.
		if conn, err = s.write.Conn(ctx); err != nil {
			return 0, false, fmt.Errorf("data version: %w", err)
		}
		defer conn.Close()
	} else if conn == nil {
		if conn, err = s.read.Conn(ctx); err != nil {
			return 0, false, fmt.Errorf("data version: %w", err)
		}
		fv.kept = conn
	}
	var on any
	_ = conn.Raw(func(dc any) error {
		on = dc
		return nil
	})
	if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		return 0, false, fmt.Errorf("data version: %w", interpretError(err))
	}
	fresh = on != fv.on
	fv.on = on
	return v, fresh, nil
}
