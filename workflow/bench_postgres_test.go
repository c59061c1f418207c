package workflow_test

import (
	"context"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/storage/postgres"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/workflow"
)

// BenchmarkPostgres is BenchmarkSQLite on PostgreSQL: the same four figures, the
// engine's beside the raw single-row commit measured in the same run, so that the
// two drivers can be put side by side:
//
//	SIGNOFF_TEST_POSTGRES=postgres://… go test -run '^$' -bench 'SQLite|Postgres' -benchtime 2s ./workflow
//
// Each sub-benchmark gets a schema of its own (see pgtest). Without
// SIGNOFF_TEST_POSTGRES it skips.
func BenchmarkPostgres(b *testing.B) {
	benchmarkEngine(b, func(b *testing.B) {
		dsn := pgtest.Schema(b)
		pgtest.Exec(b, dsn, `CREATE TABLE t (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload TEXT)`)
		conn := pgtest.Conn(b, dsn)
		ctx := b.Context()
		payload := strings.Repeat("x", 2048)
		b.ResetTimer()
		for b.Loop() {
			tx, err := conn.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO t (payload) VALUES ($1)`, payload); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) *harness { return newPostgresHarness(b) })
}

// newPostgresHarness is newHarness on a fresh, migrated PostgreSQL schema: the
// same engine, executor, policy and roles. Only the helpers that go through the
// engine (submit, waiting) work on it; the harness's store field is SQLite's.
func newPostgresHarness(b testing.TB) *harness {
	b.Helper()
	dsn := pgtest.Schema(b)
	if _, err := postgres.Migrate(context.Background(), dsn); err != nil {
		b.Fatal(err)
	}
	st, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	roles, err := workflow.NewRoles(testRoles)
	if err != nil {
		b.Fatal(err)
	}
	h := &harness{t: b, target: newLedger(), clock: newFakeClock(), roles: roles}
	h.build(st, testPolicy(b, "rev-1", roles))
	return h
}
