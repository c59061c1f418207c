package benchkit

import (
	"context"
	"fmt"
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
