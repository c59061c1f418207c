package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
)

// Group commit. A durable commit costs one fsync, which dwarfs the statements
// of a transition, and SQLite does not share a flush between writers. So one
// goroutine (the committer) owns the write connection: it opens a transaction,
// hands the connection to each queued caller in turn, whose fn runs in a
// savepoint of its own, and then commits once and answers every caller that
// took its turn.
//
// A caller whose fn failed is answered at the end of its batch too: what
// made it fail may be an earlier caller's work in the same transaction (the
// run it found already there, the version it lost to), which is not
// committed yet and may never be. Once the batch committed, its own error
// stands; when the batch was lost after such work, it is told that instead.

// maxBatch caps the callers of one transaction, so that the first of them does
// not wait behind an endless stream of later ones.
const maxBatch = 128

// savepoint is the name of each caller's savepoint; a caller's is released or
// rolled back before the next caller's begins, so one name serves all.
const savepoint = "signoff_update"

// A caller's state: queued until the committer takes it for its turn, or
// abandoned when its context ends first. Whichever moves it first wins.
const (
	queued int32 = iota
	taken
	abandoned
)

// caller is one Update waiting for, or taking, its turn.
type caller struct {
	ctx   context.Context
	state atomic.Int32
	// turn hands the caller the batch's connection (or why there is none).
	turn chan turn
	// done tells the committer the caller's turn is over.
	done chan outcome
	// result is the end of the caller's batch: for a caller whose work was
	// kept, the outcome of the commit that holds it; for one whose fn
	// failed, nil when its own error stands, else why it does not.
	result chan error
}

type turn struct {
	conn *sql.Conn
	err  error
}

// outcome is how a caller's turn ended.
type outcome struct {
	// ran: fn was called (the caller saw the batch's transaction).
	ran bool
	// kept: fn succeeded and its savepoint was released into the transaction.
	kept bool
	// broken: the transaction itself is gone (a statement SQLite answers by
	// rolling back the whole transaction, such as a full disk); nothing of
	// the batch so far can commit.
	broken error
}

func newCaller(ctx context.Context) *caller {
	return &caller{ctx: ctx, turn: make(chan turn, 1), done: make(chan outcome, 1), result: make(chan error, 1)}
}

// take claims c for its turn; false when c gave up waiting.
func (c *caller) take() bool { return c.state.CompareAndSwap(queued, taken) }

// enqueue puts c in the committer's queue and wakes it.
func (s *Store) enqueue(c *caller) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("update %s: the store is closed", s.path)
	}
	s.queue = append(s.queue, c)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default: // already woken
	}
	return nil
}

// next removes up to n callers from the queue. With wait it waits for one;
// nil then means the store is closed and the queue empty.
func (s *Store) next(n int, wait bool) []*caller {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			k := min(n, len(s.queue))
			out := make([]*caller, k)
			copy(out, s.queue)
			n := copy(s.queue, s.queue[k:])
			clear(s.queue[n:]) // let the answered callers go
			s.queue = s.queue[:n]
			s.mu.Unlock()
			return out
		}
		closed := s.closed
		s.mu.Unlock()
		if !wait || closed {
			return nil
		}
		<-s.wake
	}
}

// commitLoop is the committer: it runs until the store is closed and every
// queued caller answered. It never waits for company: whatever is queued when
// it becomes free is one batch, and a lone caller is a batch of one.
func (s *Store) commitLoop() {
	defer close(s.stopped)
	for {
		pending := s.next(maxBatch, true)
		if pending == nil {
			return
		}
		for len(pending) > 0 {
			pending = s.batch(pending)
		}
	}
}

// batch runs one transaction: each of pending in turn, then whoever queued
// meanwhile (up to maxBatch in all), then one commit. It returns the callers
// it did not get to because the transaction broke; they go in the next one.
func (s *Store) batch(pending []*caller) (rest []*caller) {
	// Not a caller's context: the transaction is everyone's, and a caller's
	// cancellation is handled at its turn.
	ctx := context.Background()
	conn, err := s.write.Conn(ctx)
	if err == nil {
		if _, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			conn.Close()
		}
	}
	if err != nil {
		err = fmt.Errorf("begin update: %w", interpretError(err))
		for _, c := range pending {
			if c.take() {
				c.turn <- turn{err: err}
			}
		}
		return nil
	}
	defer conn.Close()

	var (
		turns []took // every caller that took its turn, in order
		kept  int
	)
	seen := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		seen++
		if !c.take() {
			continue
		}
		c.turn <- turn{conn: conn}
		o := <-c.done
		if o.broken == nil && !inTransaction(conn) {
			o.broken = errors.New("SQLite ended the transaction after a failed statement")
		}
		turns = append(turns, took{c: c, kept: o.kept, afterKept: kept > 0, broke: o.broken != nil})
		if o.kept {
			kept++
		}
		if o.broken != nil {
			s.rollback(ctx, conn)
			answer(turns, fmt.Errorf("update lost with the transaction it shared with another: %w", o.broken))
			return pending
		}
		if len(pending) == 0 && seen < maxBatch {
			pending = s.next(maxBatch-seen, false)
		}
	}
	if kept == 0 {
		// Nothing to keep, so nothing to flush.
		s.rollback(ctx, conn)
		answer(turns, nil)
		return nil
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		s.rollback(ctx, conn)
		answer(turns, fmt.Errorf("commit update: %w", interpretError(err)))
		return nil
	}
	s.commits.Add(1)
	answer(turns, nil)
	return nil
}

// took is one caller's turn in a batch, as the batch's end answers it.
type took struct {
	c *caller
	// kept: its work is in the transaction; afterKept: some earlier
	// caller's was when its turn came; broke: it ended the transaction.
	kept, afterKept, broke bool
}

// answer tells every caller of a batch how it ended: lost is nil when the
// batch committed (or had nothing to keep), else why it was lost. A caller
// whose fn failed after another's work was kept is told the batch was lost,
// since what it failed on is gone; the one that broke the transaction keeps
// its own error. Each result is buffered: a caller that panicked, or never
// ran fn, need not read it.
func answer(turns []took, lost error) {
	for _, t := range turns {
		switch {
		case t.kept:
			t.c.result <- lost
		case t.afterKept && !t.broke:
			t.c.result <- lost
		default:
			t.c.result <- nil
		}
	}
}

// rollback ends the batch's transaction when one is still open (a failed
// COMMIT may leave it open, a broken one is already gone). Its error is
// logged, not returned: every caller has its answer already.
func (s *Store) rollback(ctx context.Context, conn *sql.Conn) {
	if !inTransaction(conn) {
		return
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		s.log.Error("roll back a batch of updates", "path", s.path, "err", err)
	}
}

// run is c's turn on conn: fn in a savepoint that is released into the batch's
// transaction when fn succeeds and rolled back, alone, when fn fails, panics or
// c's context ends before fn returns. On a panic the savepoint is rolled back,
// the committer goes on with the others and the panic goes on here.
func (s *Store) run(c *caller, conn *sql.Conn, fn func(ctx context.Context, tx storage.Tx) error) (o outcome, err error) {
	defer func() { c.done <- o }()
	if err := c.ctx.Err(); err != nil {
		return o, fmt.Errorf("update: %w", err)
	}
	o.ran = true
	// Not interrupted by the caller's cancellation either (see writeTx).
	sctx := context.WithoutCancel(c.ctx)
	if _, err := conn.ExecContext(sctx, "SAVEPOINT "+savepoint); err != nil {
		o.broken = fmt.Errorf("begin update: %w", interpretError(err))
		return o, o.broken
	}
	settled := false
	defer func() {
		if settled {
			return
		}
		// Runs on an error and while a panic unwinds.
		if _, rbErr := conn.ExecContext(sctx, "ROLLBACK TO "+savepoint+"; RELEASE "+savepoint); rbErr != nil {
			o.broken = fmt.Errorf("roll back update: %w", interpretError(rbErr))
			err = errors.Join(err, o.broken)
		}
	}()
	if err := fn(c.ctx, writeTx(conn)); err != nil {
		return o, err
	}
	if err := c.ctx.Err(); err != nil {
		return o, fmt.Errorf("update: %w", err)
	}
	if _, err := conn.ExecContext(sctx, "RELEASE "+savepoint); err != nil {
		settled = true
		o.broken = fmt.Errorf("release update: %w", interpretError(err))
		return o, o.broken
	}
	settled, o.kept = true, true
	return o, nil
}

// RowsWritten is how many rows the store's writes have inserted, updated or
// deleted since it was opened: SQLite's total_changes() of the write
// connection, which counts every table, so a benchmark can say what a
// transition costs in rows. It takes a turn on the write connection like an
// Update, writes nothing and flushes nothing.
func (s *Store) RowsWritten(ctx context.Context) (int64, error) {
	if s.write == nil {
		return 0, s.readOnly()
	}
	c, conn, err := s.takeTurn(ctx, "rows written")
	if err != nil {
		return 0, err
	}
	var n int64
	err = conn.QueryRowContext(context.WithoutCancel(ctx), "SELECT total_changes()").Scan(&n)
	c.done <- outcome{} // nothing of its own to keep
	if err != nil {
		return 0, fmt.Errorf("rows written: %w", interpretError(err))
	}
	return n, nil
}

// takeTurn queues a caller and waits for its turn on the write connection. The
// caller must then send its outcome on done. what names the operation in
// the error of a context that ended while it was still queued.
func (s *Store) takeTurn(ctx context.Context, what string) (*caller, *sql.Conn, error) {
	c := newCaller(ctx)
	if err := s.enqueue(c); err != nil {
		return nil, nil, err
	}
	var t turn
	select {
	case t = <-c.turn:
	case <-ctx.Done():
		if c.state.CompareAndSwap(queued, abandoned) {
			return nil, nil, fmt.Errorf("%s: %w", what, ctx.Err())
		}
		t = <-c.turn // the committer took it first: its turn is coming
	}
	if t.err != nil {
		return nil, nil, t.err
	}
	return c, t.conn, nil
}
