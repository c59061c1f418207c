package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// channel is where every transaction that writes a run's row notifies, with
// the run's id as the payload (see RunWritten). Run ids are short, far below
// the 8000 bytes a payload may have. The channel is the database's, not the
// schema's: stores that share a database in several schemas hear each other's
// runs, which costs a waiter nothing (ids do not collide, and a wake is a
// hint to read again).
const channel = "signoff_runs"

// Backoff between attempts to listen again after the connection was lost.
const (
	listenRetryMin = 50 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

var _ storage.ChangeFeed = (*Store)(nil)

// FeedChanges tells c of the runs other processes commit: it LISTENs on a
// connection of its own (outside the pool: a listener holds its connection
// for as long as it listens) and calls c.Notify with each notification's run
// id. A lost connection is opened again with backoff; once listening again it
// calls c.NotifyAll, since a notification sent meanwhile was lost. It returns
// nil when ctx ends.
func (s *Store) FeedChanges(ctx context.Context, c *storage.Changes) error {
	wait := listenRetryMin
	for {
		listened, err := s.listen(ctx, c)
		if ctx.Err() != nil {
			return nil
		}
		if listened {
			wait = listenRetryMin
		}
		s.log.Warn("listening for run changes: connection lost, listening again", "error", err.Error(), "retry_in", wait.String())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(2*wait, listenRetryMax)
	}
}

// listen connects, LISTENs, wakes every waiter once and then passes each
// notification on until the connection or ctx ends; listened says whether it
// got that far.
func (s *Store) listen(ctx context.Context, c *storage.Changes) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	// Whatever committed before the LISTEN was not heard: every waiter reads
	// its run once more.
	c.NotifyAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		c.Notify(n.Payload)
	}
}
