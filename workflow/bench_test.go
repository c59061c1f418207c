package workflow_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/signoff-dev/signoff/internal/benchkit"
	"github.com/signoff-dev/signoff/workflow"
)

// BenchmarkSQLite measures the engine's durable throughput on a real SQLite file
// (WAL, synchronous=FULL) beside the raw single-row commit rate measured in the
// same run, on the same disk, so the ratio means something on any machine:
//
//	go test -run '^$' -bench SQLite -benchtime 2s ./workflow
//
// The bodies are internal/benchkit's, which `signoff bench` runs too (there
// also from 8 and 64 clients at once):
// raw_commit: one 2 KB INSERT per transaction: the floor cost of a durable commit.
// suspend: submit a gated proposal: checks, policy, checkpoint, request, audit (1 commit).
// decide: approve a waiting run: compare-and-set, decision, checkpoint, audit (1 commit).
// execute: run an approved action: intent with its first attempt, call, receipt with the run's end (2 commits).
func BenchmarkSQLite(b *testing.B) {
	benchmarkEngine(b, func(b *testing.B) *benchkit.Target {
		t, err := benchkit.OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "signoff.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { t.Close() })
		return t
	})
}

// benchmarkEngine runs the four figures on stores that open makes.
func benchmarkEngine(b *testing.B, open func(b *testing.B) *benchkit.Target) {
	b.Run("raw_commit", func(b *testing.B) {
		t := open(b)
		body := benchkit.Payload(2048)
		for b.Loop() {
			if err := t.RawCommit(b.Context(), body); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	})
	b.Run("suspend", func(b *testing.B) {
		eng := benchEngine(b, open(b))
		for b.Loop() {
			if _, err := benchkit.Suspend(b.Context(), eng); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
	})
	b.Run("decide", func(b *testing.B) {
		eng := benchEngine(b, open(b))
		ids := waiting(b, eng, b.N)
		b.ResetTimer()
		for i := range b.N {
			if err := benchkit.Decide(b.Context(), eng, ids[i]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	})
	b.Run("execute", func(b *testing.B) {
		eng := benchEngine(b, open(b))
		ids := waiting(b, eng, b.N)
		for _, id := range ids {
			if err := benchkit.Decide(b.Context(), eng, id); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for i := range b.N {
			if err := benchkit.Execute(b.Context(), eng, ids[i]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
	})
}

func benchEngine(b *testing.B, t *benchkit.Target) *workflow.Engine {
	b.Helper()
	eng, err := benchkit.NewEngine(t.Store)
	if err != nil {
		b.Fatal(err)
	}
	return eng
}

// waiting suspends n runs for a benchmark, outside its timer.
func waiting(b *testing.B, eng *workflow.Engine, n int) []string {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		id, err := benchkit.Suspend(context.Background(), eng)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}
