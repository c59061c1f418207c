// Package postgres is the scale-out store of signoff: storage.Store on
// PostgreSQL through pgx v5, so that several signoff replicas can share one
// database. It is the only package that imports pgx.
//
// The schema is not created by Open: Migrate applies it (`signoff migrate`), and
// Open refuses a database that is behind (ErrNotMigrated) or ahead
// (ErrSchemaTooNew) of this build. Every table lives in the first schema of the
// connection's search_path, so one database can hold several independent stores
// (set search_path in the DSN: postgres://…/db?search_path=signoff).
//
// The behaviour is that of storage/sqlite, held to it by the storagetest suite.
// The SQL of its transactions is storage/sqlstore's, shared with storage/sqlite;
// tx.go holds what PostgreSQL needs done differently to get that behaviour, and
// its comments say why.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/signoff-dev/signoff/storage"
)

// IdleInTransactionTimeout is how long the server lets one of the store's
// transactions wait on its client before ending it (PostgreSQL's
// idle_in_transaction_session_timeout), unless the DSN sets that parameter.
// signoff's transactions never wait on anything outside the database, so a
// transaction idle that long belongs to a replica that froze (a paused VM, a
// SIGSTOP) or lost its network: its row locks (a run, the audit head) would
// otherwise stop every other replica for as long as it stays frozen.
const IdleInTransactionTimeout = "10s"

const idleInTxParam = "idle_in_transaction_session_timeout"

// Store is storage.Store on a PostgreSQL database, through a connection pool.
// Any number of Stores, in one process or in several replicas, may share the
// database: row locks and compare-and-set keep their writes apart.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	rt   *roundTrips
	seqs *seqPool
}

// roundTrips counts the store's round trips to the server: each statement
// sent alone (BEGIN and COMMIT included), each batch, which pgx sends as
// one pipeline, and each preparation of a statement a connection had not
// prepared yet (pgx prepares once per connection and statement, before its
// first use; a batch's new statements go in one pipeline ahead of it, which
// is not seen here). Counting is an atomic add per round trip.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (r *roundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return ctx
}

// TracePrepareEnd counts a preparation that went to the server: one the
// connection had already made is answered from its cache.
func (r *roundTrips) TracePrepareEnd(_ context.Context, _ *pgx.Conn, d pgx.TracePrepareEndData) {
	if !d.AlreadyPrepared {
		r.n.Add(1)
	}
}

// RoundTrips is how many round trips to the server the store has made so
// far (statements, batches and first preparations on each connection), for
// measuring what an operation costs.
func (s *Store) RoundTrips() int64 { return s.rt.n.Load() }

var _ storage.Store = (*Store)(nil)

// Option configures Open and Migrate.
type Option func(*options)

type options struct {
	log *slog.Logger
}

func newOptions(opts []Option) options {
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithLogger makes the store log to l (schema migrations Migrate applies).
// Without it the store logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// Open connects to the database that dsn names (a postgres:// URL or key=value
// pairs, with pgx's pool settings such as pool_max_conns) and checks its schema:
// it changes nothing, and refuses a database that lacks migrations
// (ErrNotMigrated, naming them), was migrated by a newer build (ErrSchemaTooNew),
// or whose applied migrations differ from this build's (ErrMigrationChanged).
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	o := newOptions(opts)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	rt := &roundTrips{}
	cfg.ConnConfig.Tracer = rt
	if _, set := cfg.ConnConfig.RuntimeParams[idleInTxParam]; !set {
		cfg.ConnConfig.RuntimeParams[idleInTxParam] = IdleInTransactionTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// The pool connects lazily; Ping makes a server that cannot be reached fail
	// here, and say so, rather than in the first transaction.
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := checkSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return &Store{pool: pool, log: o.log, rt: rt, seqs: newSeqPool()}, nil
}

// Close closes the pool, waiting for connections in use to be returned.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Update runs fn in one read-write transaction and commits when fn returns nil.
// When fn returns an error the transaction is rolled back and that error is
// returned as is; when fn panics it is rolled back and the panic goes on.
//
// The isolation level is READ COMMITTED, on purpose. Every state change of the
// contract is a compare-and-set (UPDATE … WHERE version = $n), a unique insert,
// a SKIP LOCKED claim or a locked append, and PostgreSQL makes each of those
// decide on the latest committed row: an UPDATE that waited for another
// transaction's lock re-checks its WHERE against the row that transaction
// committed, so a lost update shows as zero rows (ErrConflict), and a second
// insert of a key waits and fails (ErrDuplicate). Reads inside fn see the latest
// commits as of each statement, never a stale snapshot to act on. REPEATABLE READ
// or SERIALIZABLE would add serialization failures (40001) that every caller
// would have to retry, and protect nothing the compare-and-set does not.
//
// A lock wait can end in a deadlock (40P01), returned as the native error: one
// transaction that appends to the audit chain and then writes a row another
// appender holds is the shape to avoid. ctx bounds the whole transaction; if it
// ends while COMMIT is in flight, the outcome is unknown to the caller, as with
// any lost connection: the compare-and-set versions tell a retry what happened.
func (s *Store) Update(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("begin update: %w", err)
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin update: %w", interpretError(err))
	}
	defer pc.Release()
	tx := newLazyTx(pc, "BEGIN ISOLATION LEVEL READ COMMITTED")
	tx.seqs = s.seqs
	done := false
	defer func() {
		if done {
			return
		}
		// Runs on an error and while a panic unwinds.
		if rbErr := rollback(ctx, tx); rbErr != nil && err != nil {
			err = errors.Join(err, fmt.Errorf("roll back update: %w", rbErr))
		}
	}()
	wtx := newTx(tx, true)
	if err := fn(ctx, wtx); err != nil {
		return err
	}
	// A SaveRun that failed may have left some of its writes behind: the
	// transaction is rolled back even if fn went on.
	if err := wtx.Lost(); err != nil {
		return fmt.Errorf("commit update: rolled back after a failed write: %w", err)
	}
	// pgx would refuse to send COMMIT on an ended context anyway; saying so here
	// keeps the reason, and the deferred rollback ends the transaction cleanly.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit update: %w", err)
	}
	done = true
	if err := tx.commit(ctx); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			return fmt.Errorf("commit update: %w: %w", ctxErr, err)
		}
		return fmt.Errorf("commit update: %w", interpretError(err))
	}
	return nil
}

// View runs fn in a REPEATABLE READ, READ ONLY transaction: one snapshot, taken
// at fn's first statement, for every read, and any write fails. It takes no row
// lock, so it neither waits for nor delays an Update. A View whose first read
// reserves audit seqs (storage.RunParts.Reserve) begins without READ ONLY,
// which nextval needs; it writes nothing else.
func (s *Store) View(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin view: %w", interpretError(err))
	}
	defer pc.Release()
	tx := newLazyTx(pc, readOnlyBegin)
	tx.seqs = s.seqs
	// Nothing to commit; rolling back only ends the snapshot, and its error
	// could not change what fn read.
	defer rollback(ctx, tx)
	return fn(ctx, newTx(tx, false))
}

// rollbackTimeout bounds a rollback, which runs even after ctx has ended.
const rollbackTimeout = 5 * time.Second

// rollback ends tx without committing. It does not use ctx's cancellation: a
// rollback after ctx ended must still reach the server, or the connection would
// be closed instead of going back to the pool (the pool closes a connection
// released inside a transaction).
func rollback(ctx context.Context, tx *lazyTx) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	return tx.rollback(rctx)
}

// rollbackTx is rollback for a pgx transaction (migrations). A transaction
// already ended is no error.
func rollbackTx(ctx context.Context, pgTx pgx.Tx) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	if err := pgTx.Rollback(rctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return err
	}
	return nil
}
