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
}

func newLazyTx(conn *pgxpool.Conn, begin string) *lazyTx {
	return &lazyTx{conn: conn, begin: begin}
}

// started says whether BEGIN has reached the server.
func (t *lazyTx) started() bool { return t.begin == "" }

// SendBatch sends b, with the pending BEGIN in front of it.
func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.started() {
		return t.conn.SendBatch(ctx, b)
	}
	nb := &pgx.Batch{}
	nb.Queue(t.begin)
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	t.begin = ""
	br := t.conn.SendBatch(ctx, nb)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return failedBatch{err}
	}
	return br
}

func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.started() {
		return t.conn.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.started() {
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
	if t.started() {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	return batchRow{row: br.QueryRow(), br: br}
}

// commit sends the queued notifications and COMMIT in one pipeline. A
// transaction the server had to abort answers COMMIT with ROLLBACK: that is
// pgx.ErrTxCommitRollback, as pgx's own Commit says.
func (t *lazyTx) commit(ctx context.Context) error {
	if !t.started() {
		return nil
	}
	b := &pgx.Batch{}
	for _, id := range t.notify {
		b.Queue(`SELECT pg_notify('`+channel+`', $1)`, id)
	}
	b.Queue("COMMIT")
	br := t.conn.SendBatch(ctx, b)
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
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// rollback ends the transaction without committing, if it began.
func (t *lazyTx) rollback(ctx context.Context) error {
	if !t.started() {
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
