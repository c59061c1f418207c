// Package sqlite is the embedded default store of signoff: one SQLite file in WAL
// mode, opened through mattn/go-sqlite3. It is the only package that imports the
// driver; other SQLite files of the project (the practice shop) are opened with
// OpenDB so that they get the same pragmas. The SQL of its transactions is
// storage/sqlstore's; tx.go holds what SQLite does differently.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3" // also registers the "sqlite3" database/sql driver
)

// OpenDB opens (creating if needed) the SQLite file at path with the settings every
// signoff file uses:
//   - WAL, so readers never block the writer and a CLI and a server can share a file;
//   - synchronous=FULL, because a commit that reports success must survive power loss;
//   - foreign keys on (SQLite's default is off);
//   - busy_timeout, so a second process waits for the write lock instead of failing;
//   - _txlock=immediate, so a read-write transaction takes the write lock at BEGIN
//     and never fails half way with SQLITE_BUSY when it upgrades;
//   - temp_store=MEMORY (see writeDriver).
//
// The pool holds one connection. Every transaction takes the write lock at BEGIN,
// so a second connection in the same process adds no concurrency: it would only
// wait in SQLite's busy handler, which polls with sleeps of up to 100 ms, instead
// of in database/sql's queue, which hands the connection over at once and honours
// the context. Consequence: do not hold *sql.Rows open outside a transaction while
// running another statement on the same *sql.DB; it would wait for itself.
func OpenDB(path string) (*sql.DB, error) {
	db, err := open(path, "immediate", false)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// openReadDB opens path for read-only transactions: BEGIN is deferred, so a reader
// takes no write lock and reads a WAL snapshot while a writer commits, and
// query_only makes a stray write fail instead of silently taking the lock.
// Several connections, because readers do run in parallel.
func openReadDB(path string) (*sql.DB, error) {
	db, err := open(path, "deferred", true)
	if err != nil {
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0))
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n) // reopening a connection re-runs every pragma
	return db, nil
}

// uriPath escapes the characters that SQLite's URI filenames give a meaning to,
// so that any file name opens the file it names.
var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

func open(path, txlock string, queryOnly bool) (*sql.DB, error) {
	if path == "" {
		return nil, errors.New("open sqlite: a file path is required")
	}
	q := url.Values{}
	q.Set("_synchronous", "FULL")
	q.Set("_foreign_keys", "on")
	q.Set("_busy_timeout", strconv.FormatInt(busyTimeout.Milliseconds(), 10))
	q.Set("_txlock", txlock)
	// Each connection keeps its prepared statements for reuse instead of
	// preparing every statement of every transaction anew: the store runs a
	// few dozen distinct statements, and BenchmarkCPU spends about a tenth
	// less CPU per decision and per execution with the cache.
	q.Set("_stmt_cache_size", "128")
	drv, ready := writeDriver, useWAL
	if queryOnly {
		q.Set("_query_only", "on")
		drv, ready = plainDriver, (*sql.DB).Ping
	} else {
		// Set before the first table is made, this makes a new file one whose
		// freed pages PRAGMA incremental_vacuum can give back (see Reclaim);
		// on an existing file it changes nothing until a VACUUM.
		q.Set("_auto_vacuum", "incremental")
	}
	db := sql.OpenDB(connector{dsn: "file:" + uriPath.Replace(path) + "?" + q.Encode(), driver: drv})
	err := ready(db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}

// connector opens connections of driver (plainDriver or writeDriver) on
// dsn, with no global registration.
type connector struct {
	dsn    string
	driver *sqlite3.SQLiteDriver
}

var plainDriver = &sqlite3.SQLiteDriver{}

// writeDriver opens connections with temp_store=MEMORY, which the DSN cannot
// set. Every Update of the group commit is a savepoint, and a savepoint keeps
// a copy of each page it changes (its sub-journal): in a temporary file by
// default, a write system call per page. Measured, whole runs at 64 clients
// went from about 530 to 940 a second with it in memory. A sub-journal lives
// only until its savepoint is released, so memory holds the pages of one
// Update at a time. Readers make no savepoints and keep the default, and
// what sorts or copies a whole table (migrations, VACUUM) sets files again
// (see tempFiles).
var writeDriver = &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
	_, err := c.Exec("PRAGMA temp_store = MEMORY", nil)
	return err
}}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.driver.Open(c.dsn) }

func (c connector) Driver() driver.Driver { return c.driver }

// tempFiles runs fn with db's temporary data in files, as SQLite keeps it by
// default: an index built over a large table or a VACUUM copies the whole
// table, which memory should not have to hold. db has one connection
// (OpenDB), so the setting applies to everything fn runs.
func tempFiles(ctx context.Context, db *sql.DB, fn func() error) error {
	if _, err := db.ExecContext(ctx, "PRAGMA temp_store = FILE"); err != nil {
		return fmt.Errorf("keep temporary data in files: %w", err)
	}
	err := fn()
	if _, rerr := db.ExecContext(context.WithoutCancel(ctx), "PRAGMA temp_store = MEMORY"); rerr != nil {
		err = errors.Join(err, fmt.Errorf("keep temporary data in memory again: %w", rerr))
	}
	return err
}

// busyTimeout is how long a connection waits for a lock another holds.
const busyTimeout = 10 * time.Second

// useWAL puts the file in WAL mode. The mode is stored in the file, so it is set
// once here rather than by every new connection. Converting a new file takes an
// exclusive lock for a moment, and SQLite reports a collision with another
// process doing the same ("database is locked") at once instead of waiting in
// the busy handler, so the collision is retried here.
func useWAL(db *sql.DB) error {
	deadline := time.Now().Add(busyTimeout)
	for {
		var mode string
		err := db.QueryRow(`PRAGMA journal_mode = WAL`).Scan(&mode)
		if err == nil {
			if mode != "wal" {
				return fmt.Errorf("journal_mode is %q, want wal", mode)
			}
			return nil
		}
		var se sqlite3.Error
		if !errors.As(err, &se) || (se.Code != sqlite3.ErrBusy && se.Code != sqlite3.ErrLocked) || time.Now().After(deadline) {
			return fmt.Errorf("set journal_mode to WAL: %w", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
