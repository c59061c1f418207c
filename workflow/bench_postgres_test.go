package workflow_test

import (
	"testing"

	"github.com/signoff-dev/signoff/internal/benchkit"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
)

// BenchmarkPostgres is BenchmarkSQLite on PostgreSQL: the same four figures, the
// engine's beside the raw single-row commit measured in the same run, so that the
// two drivers can be put side by side:
//
//	SIGNOFF_TEST_POSTGRES=postgres://… go test -run '^$' -bench 'SQLite|Postgres' -benchtime 2s ./workflow
//
// Each sub-benchmark gets a schema of its own, dropped after. Without
// SIGNOFF_TEST_POSTGRES it skips.
func BenchmarkPostgres(b *testing.B) {
	benchmarkEngine(b, func(b *testing.B) *benchkit.Target {
		t, err := benchkit.OpenPostgres(b.Context(), pgtest.DSN(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { t.Close() })
		return t
	})
}
