// Package pgtest gives tests a PostgreSQL schema of their own. The server comes
// from the environment variable SIGNOFF_TEST_POSTGRES (a DSN such as
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable); without it the
// tests that need one skip, so `go test ./...` passes on a laptop without
// PostgreSQL.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the environment variable that points the tests at a server.
const EnvDSN = "SIGNOFF_TEST_POSTGRES"

// DSN is the server's DSN from the environment; without one it skips t.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		t.Skip(EnvDSN + " is not set: skipping a PostgreSQL test " +
			"(e.g. " + EnvDSN + "=postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	return dsn
}

// Schema creates a new, empty schema for t and returns a DSN whose search_path
// names it, so that whatever t opens with that DSN is independent of every other
// test, and tests may run in parallel. The schema is dropped when t ends (after
// the stores t's cleanups close, since cleanups run last-registered first).
func Schema(t testing.TB) string {
	t.Helper()
	base := DSN(t)
	var b [8]byte
	rand.Read(b[:])
	name := "signoff_test_" + hex.EncodeToString(b[:])
	Exec(t, base, `CREATE SCHEMA `+name)
	t.Cleanup(func() { Exec(t, base, `DROP SCHEMA `+name+` CASCADE`) })
	return WithSearchPath(t, base, name)
}

// WithSearchPath is dsn with its search_path set to schema; pgx sends unknown
// DSN parameters to the server as run-time settings.
func WithSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("%s: %v", EnvDSN, err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}

// Exec runs one statement on its own connection to dsn, behind any store's
// back. It does not use t's context, which has ended by the time cleanups run.
func Exec(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to %s: %v", EnvDSN, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Conn is a connection of its own to dsn, closed when t ends: the raw floor
// that benchmarks measure the store against.
func Conn(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to %s: %v", EnvDSN, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
