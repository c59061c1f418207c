package benchkit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// BenchmarkEndToEnd is whole runs (submit, wait, approve, execute, done) from
// 1, 8 and 64 concurrent clients on a SQLite file, with the durable flushes
// each run cost: the e2e rows of `signoff bench`, as a Go benchmark to profile.
//
//	go test ./internal/benchkit -run '^$' -bench EndToEnd -benchtime 2s -cpuprofile cpu.out
func BenchmarkEndToEnd(b *testing.B) {
	for _, clients := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			t, err := OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "signoff.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer t.Close()
			eng, err := NewEngine(t.Store)
			if err != nil {
				b.Fatal(err)
			}
			syncs0, _ := t.Syncs(b.Context())
			var left atomic.Int64
			left.Store(int64(b.N))
			b.ResetTimer()
			_, took, err := Drive(b.Context(), clients, 0, func(ctx context.Context) (bool, error) {
				if left.Add(-1) < 0 {
					return false, nil
				}
				return true, EndToEnd(ctx, eng)
			})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			syncs1, _ := t.Syncs(b.Context())
			b.ReportMetric(float64(b.N)/took.Seconds(), "runs/s")
			b.ReportMetric(float64(syncs1-syncs0)/float64(b.N), "fsyncs/run")
		})
	}
}

// maxRoundTripsPerRun bounds the round trips of one whole run on PostgreSQL:
// what it takes today, so that a change that adds one is seen.
const maxRoundTripsPerRun = 18

// TestRoundTripsPerRunOnPostgres counts the round trips one whole run (submit,
// wait, approve, execute, done) makes to PostgreSQL, alone on its store: what
// a replica's run costs in latency beside its commits. It skips without
// SIGNOFF_TEST_POSTGRES.
func TestRoundTripsPerRunOnPostgres(t *testing.T) {
	dsn := os.Getenv("SIGNOFF_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("SIGNOFF_TEST_POSTGRES is not set")
	}
	tg, err := OpenPostgres(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	eng, err := NewEngine(tg.Store)
	if err != nil {
		t.Fatal(err)
	}
	if err := EndToEnd(t.Context(), eng); err != nil { // statements prepared, keys read
		t.Fatal(err)
	}
	const runs = 10
	before := tg.RoundTrips()
	for range runs {
		if err := EndToEnd(t.Context(), eng); err != nil {
			t.Fatal(err)
		}
	}
	per := float64(tg.RoundTrips()-before) / runs
	t.Logf("%.1f round trips per run", per)
	if per > maxRoundTripsPerRun {
		t.Errorf("%.1f round trips per run, want at most %d", per, maxRoundTripsPerRun)
	}
}
