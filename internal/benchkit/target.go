// Package benchkit holds what the speed figures are made of, shared by the
// benchmarks and `signoff bench`: the store to measure (a Target, with its raw
// single-row commit and its size), an engine with one gated action, and the
// drivers that run suspend, decide, end-to-end runs and clicks from N
// concurrent clients for a bounded time.
package benchkit

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/signoff-dev/signoff/storage/counting"
	"github.com/signoff-dev/signoff/storage/postgres"
	"github.com/signoff-dev/signoff/storage/postgres/pgscratch"
	"github.com/signoff-dev/signoff/storage/sqlite"
)

// Target is one store to measure, with what the figures are read against.
type Target struct {
	// Name says which database: "sqlite" or "postgres".
	Name string
	// Store counts the Updates that committed.
	Store *counting.Store
	// RawCommit commits one row of body in a transaction of its own, on the
	// same disk (SQLite) or server (PostgreSQL) as the store.
	RawCommit func(ctx context.Context, body []byte) error
	// RawClients is how many clients may call RawCommit at once: 1 on
	// SQLite, whose one writer takes commits in turn, more on PostgreSQL,
	// where the raw rate at several clients is the most this server and
	// machine give the store's scaling.
	RawClients int
	// Size is the bytes the store takes.
	Size func(ctx context.Context) (int64, error)
	// Syncs counts durable flushes so far: SQLite's committed transactions, or
	// the PostgreSQL server's WAL flushes (the whole server's).
	Syncs func(ctx context.Context) (int64, error)
	// RowsWritten counts the rows the store's writes inserted, updated or
	// deleted so far (SQLite's total_changes); nil where the database does
	// not count them for one connection (PostgreSQL's statistics lag).
	RowsWritten func(ctx context.Context) (int64, error)
	// RoundTrips counts the store's round trips to the server so far
	// (PostgreSQL; nil for SQLite, which has no server).
	RoundTrips func() int64
	// ServerCPU is the CPU time the database server's processes have used
	// so far (PostgreSQL on this machine: see ServerCPU); nil for SQLite,
	// whose work is this process's, and for a server not found here.
	ServerCPU func() (ProcTimes, error)
	// Reclaim gives the space a prune freed back to the file system, as
	// `signoff prune` does on SQLite; nil on PostgreSQL, whose autovacuum
	// makes it reusable on its own.
	Reclaim func(ctx context.Context) error
	// Settle does what the server does on its own between bursts of writes
	// (PostgreSQL's autovacuum: VACUUM (ANALYZE)), for reads timed after a
	// bulk load to see the store as a running server keeps it; nil on
	// SQLite, which has nothing of the kind to wait for.
	Settle func(ctx context.Context) error
	// Where says where the store lives, for the report.
	Where string
	close func() error
}

// Close closes the store and removes what the target made.
func (t *Target) Close() error { return t.close() }

// OpenSQLite makes a new store in the SQLite file at path, which must not
// exist, and a file of raw commits beside it. Close removes both.
func OpenSQLite(ctx context.Context, path string) (*Target, error) {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("bench store %s: the file exists (the benchmark writes thousands of runs: name a new file)", path)
	}
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	rawPath := filepath.Join(filepath.Dir(path), "raw-"+filepath.Base(path))
	raw, err := sqlite.OpenDB(rawPath)
	if err == nil {
		_, err = raw.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS raw (id INTEGER PRIMARY KEY, body BLOB NOT NULL)`)
	}
	// A connection of its own to fold the WAL into the file before measuring it.
	var probe *sql.DB
	if err == nil {
		probe, err = sqlite.OpenDB(path)
	}
	remove := func() error {
		var errs []error
		for _, p := range []string{path, rawPath} {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				if err := os.Remove(p + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
		return errors.Join(errs...)
	}
	if err != nil {
		st.Close()
		if raw != nil {
			raw.Close()
		}
		return nil, errors.Join(fmt.Errorf("bench store: %w", err), remove())
	}
	return &Target{
		Name:       "sqlite",
		Store:      counting.New(st),
		Where:      path,
		RawClients: 1,
		RawCommit: func(ctx context.Context, body []byte) error {
			tx, err := raw.BeginTx(ctx, nil)
			if err != nil {
				return fmt.Errorf("raw commit: %w", err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, `INSERT INTO raw (body) VALUES (?)`, body); err != nil {
				return fmt.Errorf("raw commit: %w", err)
			}
			if err := tx.Commit(); err != nil {
				return fmt.Errorf("raw commit: %w", err)
			}
			return nil
		},
		Size: func(ctx context.Context) (int64, error) {
			// The WAL is reused, not truncated, after a checkpoint: fold it
			// into the file and truncate it, then the file is the store.
			if _, err := probe.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				return 0, fmt.Errorf("store size: %w", err)
			}
			var n int64
			for _, suffix := range []string{"", "-wal"} {
				fi, err := os.Stat(path + suffix)
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					return 0, fmt.Errorf("store size: %w", err)
				}
				if err == nil {
					n += fi.Size()
				}
			}
			return n, nil
		},
		Syncs:       func(context.Context) (int64, error) { return st.Commits(), nil },
		RowsWritten: st.RowsWritten,
		Reclaim: func(ctx context.Context) error {
			_, err := st.Reclaim(ctx)
			return err
		},
		close: func() error {
			return errors.Join(st.Close(), raw.Close(), probe.Close(), remove())
		},
	}, nil
}

// OpenPostgres makes a new store in a schema of its own on the server at dsn,
// with a table of raw commits beside it. Close drops the schema.
func OpenPostgres(ctx context.Context, dsn string) (*Target, error) {
	sc, err := pgscratch.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	st, err := postgres.Open(ctx, sc.DSN)
	if err != nil {
		return nil, errors.Join(err, sc.Drop(context.WithoutCancel(ctx)))
	}
	var serverCPU func() (ProcTimes, error)
	if pid, err := sc.BackendPID(ctx); err == nil {
		serverCPU, _ = ServerCPU(pid)
	}
	return &Target{
		Name:       "postgres",
		ServerCPU:  serverCPU,
		Store:      counting.New(st),
		Where:      "schema " + sc.Schema + ", dropped after",
		RawCommit:  sc.RawCommit,
		RawClients: pgscratch.RawClients,
		Size:       sc.Size,
		Syncs:      sc.WALSyncs,
		RoundTrips: st.RoundTrips,
		Settle:     sc.Vacuum,
		close: func() error {
			return errors.Join(st.Close(), sc.Drop(context.Background()))
		},
	}, nil
}

// Payload is n random bytes, the body of a raw commit.
func Payload(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
