package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/mattn/go-sqlite3"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlstore"
)

// interpretError is the one place where native errors become the sentinels of
// storage.Store. The native error stays in the chain, for the message.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return storage.ErrNotFound
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.ExtendedCode {
		case sqlite3.ErrConstraintUnique, sqlite3.ErrConstraintPrimaryKey:
			return fmt.Errorf("%w: %w", storage.ErrDuplicate, err)
		case sqlite3.ErrConstraintForeignKey:
			// The record refers to one that does not exist (a checkpoint of an
			// unknown run): the caller's "not found", not a storage failure.
			return fmt.Errorf("%w: a record it refers to does not exist: %w", storage.ErrNotFound, err)
		}
	}
	return err
}

// readTx is storage.Tx on a read-only database/sql transaction (View). Byte
// slices are bound as they are: nil is stored as NULL and read back as nil, an
// empty slice as a zero-length BLOB and read back as an empty, non-nil slice.
func readTx(q *sql.Tx) storage.Tx {
	return sqlstore.NewReadTx(conn{q}, dialect{})
}

// writeTx is storage.Tx on the write connection, inside the transaction of a
// batch (see commit.go). Its statements ignore the caller's cancellation:
// SQLite answers an interrupted write by rolling back the whole transaction,
// the other callers' work with it. The caller's context is looked at when fn
// returns instead.
func writeTx(c *sql.Conn) storage.Tx {
	return sqlstore.NewWriteTx(conn{detached{c}}, dialect{})
}

// querier is what *sql.Tx and *sql.Conn have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// detached runs statements on a connection without their context's
// cancellation (its values stay).
type detached struct{ c *sql.Conn }

func (d detached) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return d.c.ExecContext(context.WithoutCancel(ctx), query, args...)
}

func (d detached) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return d.c.QueryContext(context.WithoutCancel(ctx), query, args...)
}

func (d detached) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return d.c.QueryRowContext(context.WithoutCancel(ctx), query, args...)
}

// conn is sqlstore.Conn on a transaction's statements.
type conn struct{ q querier }

func (c conn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c conn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rs, err := c.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return rows{rs}, nil
}

func (c conn) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return c.q.QueryRowContext(ctx, query, args...)
}

// inTransaction tells whether c's connection is inside a transaction. SQLite
// rolls a whole transaction back by itself on some errors (a full disk, an I/O
// error, an interrupt); then this turns false.
func inTransaction(c *sql.Conn) bool {
	in := true
	_ = c.Raw(func(dc any) error {
		if sc, ok := dc.(*sqlite3.SQLiteConn); ok {
			in = !sc.AutoCommit()
		}
		return nil
	})
	return in
}

// rows is *sql.Rows as sqlstore.Rows. Close's error is dropped: rows are
// closed after Err has told whether reading them went well.
type rows struct{ *sql.Rows }

func (r rows) Close() { r.Rows.Close() }

// dialect is what SQLite does differently. Its one writer at a time (BEGIN
// IMMEDIATE holds the file's write lock) makes locks unnecessary, and a failed
// statement fails only itself, so no statement needs a savepoint of its own
// (each Update of a batch has one: see commit.go).
type dialect struct{}

func (dialect) Err(err error) error { return interpretError(err) }

// Bind: SQLite takes ? as it is.
func (dialect) Bind(query string) string { return query }

func (dialect) Guarded(ctx context.Context, c sqlstore.Conn, scan func(sqlstore.Row) error, query string, args ...any) error {
	if scan != nil {
		return interpretError(scan(c.QueryRow(ctx, query, args...)))
	}
	_, err := c.Exec(ctx, query, args...)
	return interpretError(err)
}

func (dialect) CompareAndSet(ctx context.Context, c sqlstore.Conn, table, keyColumn string, key any, update string, args ...any) error {
	n, err := c.Exec(ctx, update, args...)
	if err != nil {
		return interpretError(err)
	}
	if n == 1 {
		return nil
	}
	var one int
	err = c.QueryRow(ctx, "SELECT 1 FROM "+table+" WHERE "+keyColumn+" = ?", key).Scan(&one)
	if err != nil {
		return interpretError(err)
	}
	return storage.ErrConflict
}

func (dialect) ClaimRuns(ctx context.Context, c sqlstore.Conn, columns, owner string, statuses []record.Status, now, until int64, limit int) (sqlstore.Rows, error) {
	args := []any{owner, until, now}
	marks := make([]string, len(statuses))
	for i, s := range statuses {
		marks[i] = "?"
		args = append(args, string(s))
	}
	lim := -1 // SQLite: a negative LIMIT means none
	if limit > 0 {
		lim = limit
	}
	args = append(args, lim)
	// One statement: the single writer makes the select-then-update atomic, so
	// two claimers never lease the same run.
	rs, err := c.Query(ctx, `UPDATE runs
		SET lease_owner = ?, lease_until = ?, fence = fence + 1, version = version + 1
		WHERE id IN (SELECT id FROM runs WHERE lease_until <= ? AND status IN (`+strings.Join(marks, ", ")+`)
			ORDER BY updated_at, id LIMIT ?)
		RETURNING `+columns, args...)
	return rs, interpretError(err)
}

// LockRow: the transaction already holds the file's write lock.
func (dialect) LockRow() string { return "" }

// AuditRunHead: the write transaction holds the file's write lock, so no
// other writer can append before this one's insert, and the last seq + 1 is
// unique and in commit order.
func (d dialect) AuditRunHead(ctx context.Context, c sqlstore.Conn, runID string) (int64, string, error) {
	seq, hash, _, err := d.RunAuditHead(ctx, c, runID)
	return seq, hash, err
}

var _ sqlstore.RunHeads = dialect{}

// RunAuditHead: a run's head is in its run row once it has one there, and
// before that (an event about the run written before its row) in
// audit_heads, as is the head of the events about no run.
func (dialect) RunAuditHead(ctx context.Context, c sqlstore.Conn, runID string) (seq int64, hash string, inHeads bool, err error) {
	var inRun, inTable *string
	// The log's last seq is in audit or, for a transition's events, in
	// the index of checkpoints' last_event_seq.
	err = c.QueryRow(ctx, `SELECT MAX((SELECT COALESCE(MAX(seq), 0) FROM audit),
		(SELECT COALESCE(MAX(last_event_seq), 0) FROM checkpoints WHERE last_event_seq > 0)) + 1,
		(SELECT audit_hash FROM runs WHERE id = ? AND audit_seq > 0),
		(SELECT hash FROM audit_heads WHERE run_id = ?)`, runID, runID).Scan(&seq, &inRun, &inTable)
	switch {
	case err != nil:
		return 0, "", false, interpretError(err)
	case inRun != nil:
		return seq, *inRun, false, nil
	case inTable != nil:
		return seq, *inTable, true, nil
	}
	return seq, "", false, nil
}

// AuditMoveHead: SQLite has no data-modifying WITH; the core upserts the head.
func (dialect) AuditMoveHead(int) string { return "" }

// Batch: in process there is no round trip to save.
func (d dialect) Batch(ctx context.Context, c sqlstore.Conn, qs []sqlstore.Query) error {
	return sqlstore.RunQueries(ctx, c, d, qs)
}

// RunWritten: SQLite cannot tell other processes of a commit; its feed
// (feed.go) sees their commits in PRAGMA data_version instead.
func (dialect) RunWritten(context.Context, sqlstore.Conn, string) error { return nil }
