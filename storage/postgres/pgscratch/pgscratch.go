// Package pgscratch gives `signoff bench` a PostgreSQL schema of its own: a
// store migrated into it beside a table of raw commits, and the server's
// sizes and WAL flushes. It is the bench's, not the store's: only
// internal/benchkit imports it. It lives under storage/postgres because the
// pgx calls it needs beside the store may be made only there.
package pgscratch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signoff-dev/signoff/storage/postgres"
)

// RawClients is how many clients at most may commit raw rows at once: each
// has a connection of its own, so the rate at several clients is what this
// server and machine give when nothing else is done per commit.
const RawClients = 8

// Scratch is a schema of its own on a server, for `signoff bench`: a store is
// migrated into it beside a table of raw commits, and Drop removes it all.
type Scratch struct {
	base string
	// Schema is the scratch schema's name.
	Schema string
	// DSN names the scratch schema (its search_path); open the store with it.
	DSN  string
	conn *pgx.Conn     // sizes and WAL flushes
	raw  *pgxpool.Pool // the raw commits', one connection per client
}

// New creates a new schema on the server at dsn, migrates a store into it
// and creates the raw commits' table there.
func New(ctx context.Context, dsn string) (*Scratch, error) {
	var b [6]byte
	rand.Read(b[:])
	s := &Scratch{base: dsn, Schema: "signoff_bench_" + hex.EncodeToString(b[:])}
	if err := exec(ctx, dsn, `CREATE SCHEMA `+s.Schema); err != nil {
		return nil, fmt.Errorf("bench schema: %w", err)
	}
	var err error
	if s.DSN, err = withSearchPath(dsn, s.Schema); err == nil {
		_, err = postgres.Migrate(ctx, s.DSN)
	}
	if err == nil {
		s.conn, err = pgx.Connect(ctx, s.DSN)
	}
	if err == nil {
		s.raw, err = rawPool(ctx, s.DSN)
	}
	if err == nil {
		_, err = s.conn.Exec(ctx, `CREATE TABLE raw (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body BYTEA NOT NULL)`)
	}
	if err != nil {
		return nil, fmt.Errorf("bench schema: %w", errors.Join(err, s.Drop(ctx)))
	}
	return s, nil
}

// rawPool holds RawClients connections, opened before the first commit is
// timed.
func rawPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = RawClients
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// Held all at once, so that each is a connection of its own; given back
	// before Close, which waits for every connection in use.
	conns := make([]*pgxpool.Conn, 0, RawClients)
	for range RawClients {
		var c *pgxpool.Conn
		if c, err = p.Acquire(ctx); err != nil {
			break
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// RawCommit commits one row of body in a transaction of its own: BEGIN,
// INSERT, COMMIT, as the store's transactions pay them. Up to RawClients
// callers may commit at once.
func (s *Scratch) RawCommit(ctx context.Context, body []byte) error {
	tx, err := s.raw.Begin(ctx)
	if err != nil {
		return fmt.Errorf("raw commit: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO raw (body) VALUES ($1)`, body); err != nil {
		return fmt.Errorf("raw commit: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("raw commit: %w", err)
	}
	return nil
}

// Size is the bytes the store's tables (with their indexes and TOAST) take,
// the raw commits' table left out.
func (s *Scratch) Size(ctx context.Context) (int64, error) {
	var n int64
	err := s.conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname <> 'raw'`, s.Schema).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store size: %w", err)
	}
	return n, nil
}

// Vacuum runs VACUUM (ANALYZE) on each of the store's tables, as a
// server's autovacuum does on its own after many writes: a status change
// leaves the row's old index entries behind until a vacuum, and a list
// read right after a burst of writes on a server without autovacuum steps
// over every one of them.
func (s *Scratch) Vacuum(ctx context.Context) error {
	rows, err := s.conn.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname <> 'raw' ORDER BY c.relname`, s.Schema)
	if err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	for _, t := range tables {
		name := pgx.Identifier{s.Schema, t}.Sanitize()
		if _, err := s.conn.Exec(ctx, `VACUUM (ANALYZE) `+name); err != nil {
			return fmt.Errorf("vacuum %s: %w", name, err)
		}
	}
	return nil
}

// BackendPID is the server's process id of the scratch's own connection
// (pg_backend_pid), by which a server on this machine is found among its
// processes.
func (s *Scratch) BackendPID(ctx context.Context) (int, error) {
	var pid int32
	if err := s.conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return 0, fmt.Errorf("backend pid: %w", err)
	}
	return int(pid), nil
}

// WALSyncs is the server's count of WAL flushes (pg_stat_wal.wal_sync): the
// whole server's, so other work on it counts too.
func (s *Scratch) WALSyncs(ctx context.Context) (int64, error) {
	var n int64
	if err := s.conn.QueryRow(ctx, `SELECT wal_sync FROM pg_stat_wal`).Scan(&n); err != nil {
		return 0, fmt.Errorf("wal syncs: %w", err)
	}
	return n, nil
}

// Drop removes the scratch schema and everything in it.
func (s *Scratch) Drop(ctx context.Context) error {
	if s.raw != nil {
		s.raw.Close()
	}
	if s.conn != nil {
		s.conn.Close(ctx)
	}
	if err := exec(ctx, s.base, `DROP SCHEMA IF EXISTS `+s.Schema+` CASCADE`); err != nil {
		return fmt.Errorf("drop bench schema: %w", err)
	}
	return nil
}

func exec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// withSearchPath is dsn with its search_path set to schema; pgx sends unknown
// DSN parameters to the server as run-time settings.
func withSearchPath(dsn, schema string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return dsn + " search_path=" + schema, nil
}
