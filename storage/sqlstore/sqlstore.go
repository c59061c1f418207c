// Package sqlstore is the SQL that the storage drivers share: every method of
// storage.Tx, the column lists and the scanners, written once over a small
// connection interface (Conn). Each driver adapts its own transaction to Conn
// and supplies a Dialect with what its database does differently: placeholders,
// the claim, the audit chains' locks, savepoints, row locks and error mapping.
//
// It imports no driver and not database/sql, so that storage/sqlite stays the
// only importer of go-sqlite3 and storage/postgres the only importer of pgx.
//
// Encoding, the same in every driver (see the drivers' migrations/001_init.sql):
// times are unix milliseconds in UTC with 0 for the zero time, byte slices are
// bound as they are (nil is NULL, empty is a zero-length value), and
// runs.idempotency_key is NULL when empty and unique per requester_id.
package sqlstore

import (
	"context"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// Row is the one row of Conn.QueryRow: its Scan reports a missing row with the
// driver's own "no rows" error, which Dialect.Err maps to storage.ErrNotFound.
type Row interface {
	Scan(dest ...any) error
}

// Rows is the result of Conn.Query.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Conn runs statements in one transaction. Statements reach it already bound
// (Dialect.Bind), and its errors are the driver's native ones.
type Conn interface {
	Exec(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Dialect is what one database does differently. The core writes its statements
// with ? placeholders and binds them before they reach a Conn or a Dialect
// method; a Dialect writes its own statements in its database's syntax. Every
// method but Err and Bind returns errors already mapped by Err.
type Dialect interface {
	// Err maps a native error to the sentinels of storage.Store (ErrNotFound,
	// ErrDuplicate), keeping the native error in the chain for its message. It is
	// the driver's one place for that mapping; nil stays nil.
	Err(err error) error
	// Bind rewrites a statement written with ? placeholders into the database's.
	Bind(query string) string
	// Guarded runs a statement that may fail on a constraint, so that the
	// transaction goes on after such a failure (the contract promises it for
	// every method but SaveRun, see Pipeliner). scan
	// reads the statement's one row; nil means it returns none.
	Guarded(ctx context.Context, c Conn, scan func(Row) error, query string, args ...any) error
	// CompareAndSet runs update, an UPDATE … WHERE <keyColumn> = ? AND version = ?
	// (bound, its last two arguments the key and the version), and turns zero rows changed into ErrNotFound (no row has key) or ErrConflict
	// (the row moved on).
	CompareAndSet(ctx context.Context, c Conn, table, keyColumn string, key any, update string, args ...any) error
	// ClaimRuns leases runs as storage.Tx.ClaimRuns describes (limit 0 = none)
	// and returns the claimed rows in columns, in any order. Times are in
	// milliseconds.
	ClaimRuns(ctx context.Context, c Conn, columns, owner string, statuses []record.Status, now, until int64, limit int) (Rows, error)
	// LockRow is appended to the read of a run inside a write transaction, to lock
	// its row until the transaction ends ("" where the database needs no lock).
	LockRow() string
	// AuditRunHead returns the seq of a new audit event (larger than every
	// committed one) and the hash of run's last event ("" for none), and holds
	// whatever lock keeps other appenders to the same run out until the
	// transaction ends.
	AuditRunHead(ctx context.Context, c Conn, runID string) (seq int64, hash string, err error)
	// AuditMoveHead is put before the INSERT of n audit events of one run,
	// so that the same statement moves the run's row of audit_heads to the
	// last of them: a WITH clause that may name the INSERT's bound
	// arguments (13 an event: the first the seq, the second the run id, the
	// eighth the hash) and two more after them all, the head's key id and
	// MAC. "" where the core moves the head with a statement of its own.
	AuditMoveHead(n int) string
	// Batch runs qs in order on c and hands each its rows, in as few round
	// trips as the database allows (PostgreSQL pipelines them in one;
	// SQLite, in process, runs them one after another with RunQueries).
	Batch(ctx context.Context, c Conn, qs []Query) error
	// RunWritten follows each statement that inserted or updated a run's row
	// (InsertRun, UpdateRun, SaveRun; not a claim, which moves only the lease): where
	// the database can tell other processes of a commit, it queues that word
	// inside the transaction, so it is delivered only if the transaction
	// commits (PostgreSQL: pg_notify). Where it cannot, it does nothing.
	RunWritten(ctx context.Context, c Conn, runID string) error
}

// Deferrer is a Dialect that can send a write ahead of the transaction's
// next statement or its COMMIT, in the same round trip, instead of in one of
// its own (PostgreSQL). AppendAudit defers its insert: the event's seq and
// hashes are known before it is sent, every later statement of the
// transaction sees it, and if it fails the transaction fails, at the
// statement it travelled with or at COMMIT.
type Deferrer interface {
	Defer(c Conn, what, query string, args ...any)
}

// Ender is a Dialect that can end a read-only transaction in the round trip
// of its next statement (PostgreSQL), for storage.LastRead.
type Ender interface {
	EndWithNext(c Conn)
}

// Tx is storage.Tx on one transaction of a SQL database.
type Tx struct {
	c Conn
	d Dialect
	// write is set for a read-write transaction: there a run is read with
	// Dialect.LockRow.
	write bool
	// head is the audit head SaveRun read ahead (nil: none).
	head *auditHead
	// lost is why the transaction must not commit (see Lost).
	lost error
}

var _ storage.Tx = (*Tx)(nil)

// NewWriteTx is the Tx of a read-write transaction (the store's Update).
func NewWriteTx(c Conn, d Dialect) *Tx { return &Tx{c: c, d: d, write: true} }

// NewReadTx is the Tx of a read-only transaction (the store's View).
func NewReadTx(c Conn, d Dialect) *Tx { return &Tx{c: c, d: d} }

var _ storage.LastReader = (*Tx)(nil)

// LastRead is storage.LastRead: on a read-only transaction, a Dialect that is
// an Ender ends it with the next statement.
func (t *Tx) LastRead() {
	if e, ok := t.d.(Ender); ok && !t.write {
		e.EndWithNext(t.c)
	}
}

// Conn is the connection t runs on, for what a driver does beside the
// contract (its tests ask the server about the transaction).
func (t *Tx) Conn() Conn { return t.c }

// millis stores t as unix milliseconds in UTC; the zero time is 0.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// fromMillis reverses millis: 0 is the zero time, anything else a UTC time.
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// nullIfEmpty stores "" as NULL, for unique columns where "" means "none".
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
