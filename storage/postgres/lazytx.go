package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lazyTx is one transaction on a pooled connection that saves round trips:
// BEGIN is not sent alone but in one pipeline with the transaction's first
// statement (or batch), and the notifications a transaction queues
// (RunWritten) go in one pipeline with its COMMIT. A transaction that sent
// nothing ends without a word to the server. Each of its statements still
// sees and does what it would after a BEGIN of its own: the server runs the
// pipeline in order.
type lazyTx struct {
	conn *pgxpool.Conn
	// begin is the BEGIN statement still to send ("" once sent).
	begin string
	// notify are the runs to notify of on commit, each once.
	notify []string
	// deferred are writes still to send, ahead of the transaction's next
	// statement or its COMMIT (see Defer).
	deferred []deferredWrite
	// lost is the failure of BEGIN or of a deferred write: every later
	// statement and COMMIT fail with it.
	lost error
	// endWithNext says that the next statement (or batch) ends the
	// transaction, and ended that one did (see EndWithNext).
	endWithNext, ended bool
	// readWrite says the transaction began (or will) able to write.
	readWrite bool
	// seqs are the store's audit seqs taken ahead (nil: none kept).
	seqs *seqPool
}

// errEnded is a read after a View's last read (storage.LastRead).
var errEnded = errors.New("read after the view's last read: its snapshot has ended")

// EndWithNext makes the transaction's next statement (or batch) its last:
// ROLLBACK travels in one pipeline behind it, so that a View that reads
// once costs one round trip, BEGIN and the end included. Every statement
// after it fails (errEnded) rather than run outside the snapshot.
func (t *lazyTx) EndWithNext() { t.endWithNext = true }

// A deferred write fails in one of two ways. The server refused it
// (deferredError): the transaction is aborted, nothing in it can commit. Or
// the pipeline it travelled in broke (the connection, the caller's context,
// pgx itself): whatever travelled with it, COMMIT included, may or may not
// have run (brokenError).

// deferredWrite is a statement that returns no rows, queued by Defer; what
// names it in an error.
type deferredWrite struct {
	what, sql string
	args      []any
	// refused, when not nil, says that the write's refusal as a division
	// by zero is a compare-and-set it lost (see dialect.GuardedUpdate), and
	// is the sentinel that says so (storage.ErrConflict or ErrHeadMoved).
	refused error
}

// deferredError is a deferred write the server refused, reported by the
// statement (or COMMIT) it travelled with. It does not unwrap to the
// server's error, so that the failure is never read as that statement's own
// (its duplicate key, say).
type deferredError struct {
	what string
	err  error
	// refused, when not nil, is the write's sentinel: it was a guarded one
	// that changed nothing.
	refused error
}

// Is makes a guarded write that lost its compare-and-set its sentinel
// (storage.ErrConflict, or ErrHeadMoved, which is one too).
func (e *deferredError) Is(target error) bool {
	return e.refused != nil && errors.Is(e.refused, target)
}

func (e *deferredError) Error() string {
	return fmt.Sprintf("%s (sent ahead of the next statement): %v; the transaction is rolled back", e.what, e.err)
}

// brokenError is a pipeline that broke while it carried a deferred write.
// It unwraps, so that a caller sees its context end or its connection go.
type brokenError struct {
	what string
	err  error
}

func (e *brokenError) Error() string {
	return fmt.Sprintf("%s (sent ahead of the next statement) and what went with it: the outcome is unknown: %v", e.what, e.err)
}

func (e *brokenError) Unwrap() error { return e.err }

// failedWrite is the error of deferred write w that failed with err.
func failedWrite(w deferredWrite, err error) error {
	if pe, refused := errors.AsType[*pgconn.PgError](err); refused {
		de := &deferredError{what: w.what, err: err}
		if pe.Code == codeDivisionByZero {
			de.refused = w.refused
		}
		return de
	}
	return &brokenError{what: w.what, err: err}
}

// Defer queues a write to travel in one pipeline with whatever the
// transaction sends next, instead of in a round trip of its own. The server
// runs it first, so every later statement sees it; if it fails, the
// transaction is lost (see lost).
func (t *lazyTx) Defer(what, sql string, args ...any) {
	t.deferred = append(t.deferred, deferredWrite{what: what, sql: sql, args: args})
}

// DeferGuarded is Defer for a write whose guard may refuse it (a
// compare-and-set that changed nothing, see dialect.GuardedUpdate): that
// refusal fails the transaction with refused, storage.ErrConflict or an
// error that is one.
func (t *lazyTx) DeferGuarded(what string, refused error, sql string, args ...any) {
	t.deferred = append(t.deferred, deferredWrite{what: what, sql: sql, args: args, refused: refused})
}

// readOnlyBegin is a View's BEGIN, and readWriteBegin the same snapshot
// able to take seqs (see dialect.ReserveQuery).
const (
	readOnlyBegin  = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
	readWriteBegin = "BEGIN ISOLATION LEVEL REPEATABLE READ"
)

// writable makes a View that has not begun able to take seqs, and says
// whether the transaction can: an Update can, a View that began cannot.
func (t *lazyTx) writable() bool {
	switch t.begin {
	case readOnlyBegin:
		t.begin, t.readWrite = readWriteBegin, true
		return true
	case "":
		return t.readWrite
	}
	return true
}

// direct says whether a statement can go to the server as it is: BEGIN was
// sent, nothing is deferred and nothing deferred failed.
func (t *lazyTx) direct() bool {
	return t.started() && len(t.deferred) == 0 && t.lost == nil && !t.endWithNext && !t.ended
}

func newLazyTx(conn *pgxpool.Conn, begin string) *lazyTx {
	return &lazyTx{conn: conn, begin: begin, readWrite: begin != readOnlyBegin}
}

// started says whether BEGIN has reached the server.
func (t *lazyTx) started() bool { return t.begin == "" }

// SendBatch sends b, with the pending BEGIN and deferred writes in front of
// it.
func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.lost != nil {
		return failedBatch{t.lost}
	}
	if t.ended {
		return failedBatch{errEnded}
	}
	if t.direct() {
		return t.conn.SendBatch(ctx, b)
	}
	nb := &pgx.Batch{}
	begin := !t.started()
	if begin {
		nb.Queue(t.begin)
		t.begin = ""
	}
	deferred := t.deferred
	t.deferred = nil
	for _, w := range deferred {
		nb.Queue(w.sql, w.args...)
	}
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	if t.endWithNext {
		// Read by the batch's Close, after the caller's results.
		nb.Queue("ROLLBACK")
		t.endWithNext, t.ended = false, true
	}
	br := t.conn.SendBatch(ctx, nb)
	if begin {
		if _, err := br.Exec(); err != nil {
			br.Close()
			// Nothing after it may run outside the transaction it did not begin.
			t.lost = fmt.Errorf("begin: %w", err)
			return failedBatch{t.lost}
		}
	}
	for _, w := range deferred {
		if _, err := br.Exec(); err != nil {
			br.Close()
			t.lost = failedWrite(w, err)
			return failedBatch{t.lost}
		}
	}
	return br
}

func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.direct() {
		return t.conn.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.direct() {
		return t.conn.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.direct() {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	return batchRow{row: br.QueryRow(), br: br}
}

// commit sends the deferred writes, the queued notifications and COMMIT in
// one pipeline. A transaction the server had to abort answers COMMIT with
// ROLLBACK: that is pgx.ErrTxCommitRollback, as pgx's own Commit says.
func (t *lazyTx) commit(ctx context.Context) error {
	if t.lost != nil {
		return t.abandon(ctx)
	}
	if !t.started() && len(t.deferred) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, id := range t.notify {
		b.Queue(`SELECT pg_notify('`+channel+`', $1)`, id)
	}
	b.Queue("COMMIT")
	br := t.SendBatch(ctx, b)
	var err error
	for range t.notify {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	if _, broken := errors.AsType[*brokenError](t.lost); broken {
		// COMMIT went out with the deferred writes: it may have run.
		return fmt.Errorf("commit: %w", t.lost)
	}
	if t.lost != nil {
		return t.abandon(ctx)
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// abandon ends a lost transaction (see lost) instead of COMMIT: the
// server holds it open, aborted, until ROLLBACK, and a connection released
// in that state would be closed instead of going back to the pool.
func (t *lazyTx) abandon(ctx context.Context) error {
	if err := rollback(ctx, t); err != nil {
		return errors.Join(t.lost, fmt.Errorf("roll back: %w", err))
	}
	return t.lost
}

// rollback ends the transaction without committing, if it began.
func (t *lazyTx) rollback(ctx context.Context) error {
	t.deferred = nil
	if !t.started() {
		return nil
	}
	if t.ended && t.conn.Conn().PgConn().TxStatus() == 'I' {
		// The last read's ROLLBACK ran. A pipeline that failed before it
		// leaves the transaction open (aborted), and it is rolled back here.
		return nil
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}

// batchRows are the rows of a statement sent with BEGIN: closing them
// closes the batch.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r *batchRows) Close() {
	r.Rows.Close()
	r.br.Close()
}

// batchRow is the row of a statement sent with BEGIN: scanning it closes
// the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if closeErr := r.br.Close(); err == nil {
		err = closeErr
	}
	return err
}

// failedBatch is the results of a batch whose BEGIN failed.
type failedBatch struct{ err error }

func (f failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f failedBatch) Query() (pgx.Rows, error)         { return nil, f.err }
func (f failedBatch) QueryRow() pgx.Row                { return errRow(f) }
func (f failedBatch) Close() error                     { return f.err }
func (f failedBatch) Tx() pgx.Tx                       { return nil }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
