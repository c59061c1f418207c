package workflow_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// BenchmarkSQLite measures the engine's durable throughput on a real SQLite file
// (WAL, synchronous=FULL) beside the raw single-row commit rate measured in the
// same run, on the same disk, so the ratio means something on any machine:
//
//	go test -run '^$' -bench SQLite -benchtime 2s ./workflow
//
// raw_commit: one 2 KB INSERT per transaction: the floor cost of a durable commit.
// suspend: submit a gated proposal: checks, policy, checkpoint, request, audit (1 commit).
// decide: approve a waiting run: compare-and-set, decision, checkpoint, audit (1 commit).
// execute: run an approved action: intent, attempt, call, receipt, done (4 commits).
func BenchmarkSQLite(b *testing.B) {
	benchmarkEngine(b, func(b *testing.B) {
		db, err := sqlite.OpenDB(filepath.Join(b.TempDir(), "raw.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, payload TEXT)`); err != nil {
			b.Fatal(err)
		}
		payload := strings.Repeat("x", 2048)
		b.ResetTimer()
		for b.Loop() {
			tx, err := db.Begin()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Exec(`INSERT INTO t (payload) VALUES (?)`, payload); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) *harness { return newHarness(b) })
}

// benchmarkEngine runs the four figures on one driver: raw does b.N single-row
// commits on that driver, newH makes an engine on it.
func benchmarkEngine(b *testing.B, raw func(b *testing.B), newH func(b *testing.B) *harness) {
	b.Run("raw_commit", func(b *testing.B) {
		raw(b)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	})
	b.Run("suspend", func(b *testing.B) {
		h := newH(b)
		b.ResetTimer()
		for b.Loop() {
			h.submit(refund("PAY-1", 100))
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
	})
	b.Run("decide", func(b *testing.B) {
		h := newH(b)
		ids := waiting(b, h, b.N)
		b.ResetTimer()
		for i := range b.N {
			_, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: ids[i], Approver: workflow.Person{ID: "U0LEAD0001"}, Verdict: workflow.VerdictApprove, Via: "cli"})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	})
	b.Run("execute", func(b *testing.B) {
		h := newH(b)
		ids := waiting(b, h, b.N)
		for _, id := range ids {
			if _, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: id, Approver: workflow.Person{ID: "U0LEAD0001"}, Verdict: workflow.VerdictApprove, Via: "cli"}); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for i := range b.N {
			run, err := h.engine.Resume(context.Background(), ids[i])
			if err != nil || run.Status != workflow.StatusDone {
				b.Fatalf("resume: %v %v", run, err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
	})
}

// waiting suspends n runs for a benchmark, outside its timer.
func waiting(b *testing.B, h *harness, n int) []string {
	b.Helper()
	h.target.captured["PAY-1"] = float64(n) * 1000
	ids := make([]string, n)
	for i := range ids {
		run := h.submit(refund("PAY-1", 100))
		if run.Status != workflow.StatusWaitingApproval {
			b.Fatalf("run %s is %s", run.ID, run.Status)
		}
		ids[i] = run.ID
	}
	return ids
}
