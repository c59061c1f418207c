package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/signoff-dev/signoff/workflow"
)

// Store is workflow.Store on one SQLite file. Several Stores, in one process or in
// several (a CLI beside a running server), may share the file: SQLite's write lock
// serialises their transactions and WAL lets readers go on meanwhile.
type Store struct {
	path string
	log  *slog.Logger
	// write runs Update: one connection whose BEGIN is IMMEDIATE (see OpenDB).
	write *sql.DB
	// read runs View. mattn/go-sqlite3 ignores sql.TxOptions.ReadOnly and applies
	// _txlock to every BEGIN, so a read-only transaction on write would take the
	// write lock and queue behind every writer. A second pool opened with a
	// deferred BEGIN and query_only reads a WAL snapshot without any lock a writer
	// waits for.
	read *sql.DB
	// commits counts the write transactions committed, for benchmarks.
	commits atomic.Int64
}

var _ workflow.Store = (*Store)(nil)

// Option configures Open.
type Option func(*options)

type options struct {
	log *slog.Logger
}

// WithLogger makes the store log to l (schema migrations it applies). Without it
// the store logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// Open opens the store in the SQLite file at path, creating it if needed, and
// migrates its schema to the newest this build knows. It refuses a file migrated
// by a newer build (ErrSchemaTooNew) or whose applied migrations differ from this
// build's (ErrMigrationChanged).
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	if path == ":memory:" {
		// The store holds two connection pools on the file; two in-memory
		// databases would be two different stores.
		return nil, errors.New("open store: a file path is required (not :memory:)")
	}
	write, err := OpenDB(path)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := migrate(ctx, write, o.log); err != nil {
		write.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	read, err := openReadDB(path)
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return &Store{path: path, log: o.log, write: write, read: read}, nil
}

// Path is the file the store lives in.
func (s *Store) Path() string { return s.path }

// Close closes both connection pools.
func (s *Store) Close() error {
	if s.write == nil {
		return s.read.Close()
	}
	return errors.Join(s.write.Close(), s.read.Close())
}

// Update runs fn in one read-write transaction (BEGIN IMMEDIATE: it holds the
// file's write lock from the start, so it never fails half way on a lock upgrade)
// and commits when fn returns nil. When fn returns an error the transaction is
// rolled back and that error is returned as is; when fn panics it is rolled back
// and the panic goes on. Transactions of one Store queue for its single write
// connection, so fn must not call Update on the same Store: it would wait for
// itself.
func (s *Store) Update(ctx context.Context, fn func(ctx context.Context, tx workflow.Tx) error) (err error) {
	if s.write == nil {
		return s.readOnly()
	}
	sqlTx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin update: %w", interpretError(err))
	}
	done := false
	defer func() {
		if done {
			return
		}
		// Runs on an error and while a panic unwinds. ErrTxDone means database/sql
		// already rolled back because ctx ended.
		if rbErr := sqlTx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) && err != nil {
			err = errors.Join(err, fmt.Errorf("roll back update: %w", rbErr))
		}
	}()
	if err := fn(ctx, newTx(sqlTx, true)); err != nil {
		return err
	}
	done = true
	if err := sqlTx.Commit(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			// database/sql rolled back when ctx ended; say why, not just "done".
			return fmt.Errorf("commit update: %w: %w", ctxErr, err)
		}
		return fmt.Errorf("commit update: %w", interpretError(err))
	}
	s.commits.Add(1)
	return nil
}

// View runs fn in a read-only transaction on a consistent snapshot: the snapshot
// is taken at fn's first read and later commits are not seen. It takes no write
// lock, so it neither waits for nor delays an Update. Writes inside fn fail.
func (s *Store) View(ctx context.Context, fn func(ctx context.Context, tx workflow.Tx) error) error {
	sqlTx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin view: %w", interpretError(err))
	}
	// Nothing to commit; rolling back only ends the snapshot, and its error
	// could not change what fn read.
	defer sqlTx.Rollback()
	return fn(ctx, newTx(sqlTx, false))
}
