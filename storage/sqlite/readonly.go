package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"runtime"
	"strconv"

	"github.com/signoff-dev/signoff/storage/schema"
)

var (
	// ErrNotMigrated: the file lacks migrations this build needs. A read-only
	// store never migrates; any command that writes (or `signoff migrate`) does.
	ErrNotMigrated = schema.ErrNotMigrated
	// ErrNoStore: there is no store file at the path a read-only open was given;
	// reading never creates one.
	ErrNoStore = errors.New("no store file")
	// ErrReadOnly: Update on a store opened with OpenReadOnly.
	ErrReadOnly = errors.New("the store was opened read-only")
)

// OpenReadOnly opens the store in the existing SQLite file at path for reading
// only: the file is opened read-only (mode=ro), nothing is migrated, the
// journal mode is not touched and no transaction ever takes the write lock, so
// it works on a file this process may not write and while another process
// holds a write transaction (WAL readers read the last committed snapshot).
// It refuses a missing file (ErrNoStore) and a file whose schema is not
// exactly this build's (ErrNotMigrated, ErrSchemaTooNew, ErrMigrationChanged).
// Update returns ErrReadOnly.
func OpenReadOnly(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := newOptions(opts)
	read, err := OpenReadOnlyDB(path)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := checkSchema(ctx, read); err != nil {
		read.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &Store{path: path, log: o.log, feedEvery: o.feedEvery, read: read}, nil
}

// OpenReadOnlyDB opens the existing SQLite file at path read-only (mode=ro,
// query_only, deferred BEGIN): it never creates the file, never changes its
// journal mode and never takes the write lock. A missing file is ErrNoStore.
func OpenReadOnlyDB(path string) (*sql.DB, error) {
	if path == "" || path == ":memory:" {
		return nil, errors.New("open sqlite read-only: a file path is required")
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w (a command that writes creates it)", path, ErrNoStore)
		}
		return nil, fmt.Errorf("open sqlite %s read-only: %w", path, err)
	}
	db, err := openRO(path, false)
	if err != nil {
		if _, walErr := os.Stat(path + "-wal"); !errors.Is(walErr, fs.ErrNotExist) {
			return nil, fmt.Errorf("open sqlite %s read-only: %w", path, err)
		}
		// A WAL file read-only needs its -shm index, which SQLite cannot
		// create in a folder this process may not write. With no -wal file
		// the main file holds every committed transaction, so it is read as
		// immutable: no index, no locks.
		if db, err = openRO(path, true); err != nil {
			return nil, fmt.Errorf("open sqlite %s read-only: %w", path, err)
		}
	}
	n := max(4, runtime.GOMAXPROCS(0))
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	return db, nil
}

// openRO opens path with mode=ro (or immutable) and reads from it once, so
// that a file it cannot read fails here.
func openRO(path string, immutable bool) (*sql.DB, error) {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_query_only", "on")
	q.Set("_txlock", "deferred")
	q.Set("_busy_timeout", strconv.FormatInt(busyTimeout.Milliseconds(), 10))
	if immutable {
		q.Set("immutable", "1")
	}
	db := sql.OpenDB(connector{dsn: "file:" + uriPath.Replace(path) + "?" + q.Encode(), driver: plainDriver})
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master`).Scan(&n); err != nil {
		db.Close()
		return nil, interpretError(err)
	}
	return db, nil
}

// checkSchema is the read-only look at the schema: it changes nothing, and
// refuses a file that is not exactly at this build's newest version.
func checkSchema(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("check schema: %w", interpretError(err))
	}
	defer tx.Rollback()
	var tables int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&tables); err != nil {
		return fmt.Errorf("check schema: %w", interpretError(err))
	}
	var applied []appliedMigration
	if tables > 0 {
		if applied, err = readApplied(ctx, tx); err != nil {
			return fmt.Errorf("check schema: %w", err)
		}
		if err := checkApplied(applied); err != nil {
			return err
		}
	}
	versions := make([]int, len(applied))
	for i, a := range applied {
		versions[i] = a.version
	}
	return schema.Missing(migrations, versions, "run `signoff migrate` (or any command that writes) with this build")
}

// readOnly is what Update answers on a read-only store.
func (s *Store) readOnly() error {
	return fmt.Errorf("update %s: %w", s.path, ErrReadOnly)
}

// CheckSchema says whether the file's schema is still exactly this build's: a
// long-running server asks it for its readiness, since the file may be
// restored from a backup or migrated by a newer build while it runs.
func (s *Store) CheckSchema(ctx context.Context) error {
	return checkSchema(ctx, s.read)
}
