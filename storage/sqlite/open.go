// Package sqlite is the embedded default store of signoff: one SQLite file in WAL
// mode, opened through mattn/go-sqlite3. It is the only package that imports the
// driver; other SQLite files of the project (the practice shop) are opened with
// OpenDB so that they get the same pragmas.
package sqlite

import (
	"database/sql"
	"fmt"
	"net/url"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" database/sql driver
)

// OpenDB opens (creating if needed) the SQLite file at path with the settings every
// signoff file uses:
//   - WAL, so readers never block the writer and a CLI and a server can share a file;
//   - synchronous=FULL, because a commit that reports success must survive power loss;
//   - foreign keys on (SQLite's default is off);
//   - busy_timeout, so a second process waits for the write lock instead of failing;
//   - _txlock=immediate, so a read-write transaction takes the write lock at BEGIN
//     and never fails half way with SQLITE_BUSY when it upgrades.
func OpenDB(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_foreign_keys", "on")
	q.Set("_busy_timeout", "10000")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}
