package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Store is storage.Store on one SQLite file. Several Stores, in one process or in
// several (a CLI beside a running server), may share the file: SQLite's write lock
// serialises their transactions and WAL lets readers go on meanwhile. Within one
// Store, concurrent Updates are committed together (see Update).
type Store struct {
	path string
	log  *slog.Logger
	// feedEvery is how often FeedChanges looks for other processes' commits.
	feedEvery time.Duration
	// write holds the one write connection (see OpenDB); only the committer
	// goroutine (commit.go) uses it.
	write *sql.DB
	// read runs View. mattn/go-sqlite3 ignores sql.TxOptions.ReadOnly and applies
	// _txlock to every BEGIN, so a read-only transaction on write would take the
	// write lock and queue behind every writer. A second pool opened with a
	// deferred BEGIN and query_only reads a WAL snapshot without any lock a writer
	// waits for.
	read *sql.DB
	// commits counts the write transactions committed (fsyncs), for benchmarks.
	commits atomic.Int64

	mu     sync.Mutex
	queue  []*caller // Updates waiting for the committer
	closed bool
	// wake tells the committer the queue is not empty (or the store closed).
	wake chan struct{}
	// stopped is closed when the committer has returned.
	stopped   chan struct{}
	closeOnce sync.Once
}

var _ storage.Store = (*Store)(nil)

// Option configures Open.
type Option func(*options)

type options struct {
	log *slog.Logger
	// feedEvery is how often FeedChanges looks at data_version.
	feedEvery time.Duration
}

func newOptions(opts []Option) options {
	o := options{log: slog.New(slog.DiscardHandler), feedEvery: defaultFeedEvery}
	for _, opt := range opts {
		opt(&o)
	}
	return o
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
	o := newOptions(opts)
	if path == ":memory:" {
		// The store holds two connection pools on the file; two in-memory
		// databases would be two different stores.
		return nil, errors.New("open store: a file path is required (not :memory:)")
	}
	write, err := OpenDB(path)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := tempFiles(ctx, write, func() error { return migrate(ctx, write, o.log) }); err != nil {
		write.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	read, err := openReadDB(path)
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{path: path, log: o.log, feedEvery: o.feedEvery, write: write, read: read, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go s.commitLoop()
	return s, nil
}

// Commits is how many write transactions the store has committed, each one
// durable flush. With concurrent Updates it is less than the Updates made.
func (s *Store) Commits() int64 { return s.commits.Load() }

// Path is the file the store lives in.
func (s *Store) Path() string { return s.path }

// Close answers the Updates already queued, then closes both connection pools.
// Updates after Close fail.
func (s *Store) Close() error {
	if s.write == nil {
		return s.read.Close()
	}
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
		<-s.stopped
		err = errors.Join(s.write.Close(), s.read.Close())
	})
	return err
}

// Update runs fn in a read-write transaction and commits when fn returns nil.
// When fn returns an error its writes are rolled back and that error is
// returned as is; when fn panics its writes are rolled back and the panic goes
// on in the caller's goroutine.
//
// Group commit: one goroutine owns the write connection. It gathers the
// Updates queued when it becomes free (a lone Update never waits for company)
// into one transaction (BEGIN IMMEDIATE: it holds the file's write lock from
// the start, so it never fails half way on a lock upgrade), runs each caller's
// fn in turn in a savepoint of its own, so a failing or panicking fn rolls back
// alone, then commits and flushes once (synchronous=FULL) and only then answers
// every caller it holds. If the commit fails, every caller of the batch gets
// the error and none of their work is kept. Audit events are appended in the
// order the callers' turns ran, each on the head the previous left.
//
// Cancellation: a context that ends before the caller's turn takes it out of
// the batch (Update returns the context's error); one that ends while fn runs
// rolls fn's savepoint back (the same). Once fn returned and its savepoint was
// released, the work is committed with the batch and Update returns the
// commit's outcome, whatever the context does meanwhile.
//
// fn must not call Update on the same Store: it would wait for its own turn.
// Another Store on the same file (another process: a CLI beside a server)
// takes the file's write lock between batches and waits up to the busy
// timeout for it.
func (s *Store) Update(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	if s.write == nil {
		return s.readOnly()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	c, conn, err := s.takeTurn(ctx, "update")
	if err != nil {
		return err
	}
	o, err := s.run(c, conn, fn)
	if err != nil {
		if !o.ran {
			return err // it saw nothing of the batch
		}
		// What fn failed on may be an earlier caller's work, which only the
		// batch's end makes final (see commit.go).
		if lost := <-c.result; lost != nil {
			return fmt.Errorf("%w (the update had failed on what that transaction held: %v)", lost, err)
		}
		return err
	}
	return <-c.result
}

// View runs fn in a read-only transaction on a consistent snapshot: the snapshot
// is taken at fn's first read and later commits are not seen. It takes no write
// lock, so it neither waits for nor delays an Update. Writes inside fn fail.
func (s *Store) View(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	sqlTx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin view: %w", interpretError(err))
	}
	// Nothing to commit; rolling back only ends the snapshot, and its error
	// could not change what fn read.
	defer sqlTx.Rollback()
	return fn(ctx, readTx(sqlTx))
}
