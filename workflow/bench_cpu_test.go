package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/internal/benchkit"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// BenchmarkCPU is a gated submit with 2 KB of evidence, and
// BenchmarkIntegrity's decide and execute, measured in the
// process's CPU time (user and system, every goroutine's, the committer's and
// SQLite's included) per operation rather than in wall time: a figure that
// other load on a shared machine moves far less, for comparing two builds.
//
//	go test -run '^$' -bench CPU -benchtime 500x ./workflow
func BenchmarkCPU(b *testing.B) {
	setups := []struct {
		name string
		opts []harnessOption
	}{{"unkeyed", nil}, {"keyed", []harnessOption{withKeys(testKeys(b))}}}
	for _, fig := range []string{"submit", "decide", "execute"} {
		for _, s := range setups {
			b.Run(fig+"/"+s.name, func(b *testing.B) {
				h := newHarness(b, s.opts...)
				if fig == "submit" {
					benchmarkSubmitCPU(b, h)
					return
				}
				ids := waitingRefunds(b, h, b.N)
				approve := func(id string) error {
					_, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: id, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"})
					return err
				}
				if fig == "execute" {
					for _, id := range ids {
						if err := approve(id); err != nil {
							b.Fatal(err)
						}
					}
				}
				before := cpuTime(b)
				b.ResetTimer()
				for i := range b.N {
					var err error
					if fig == "decide" {
						err = approve(ids[i])
					} else {
						_, err = h.engine.Resume(context.Background(), ids[i])
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// benchmarkSubmitCPU submits gated refunds, each with the 2 KB of
// evidence benchkit's whole runs carry.
func benchmarkSubmitCPU(b *testing.B, h *harness) {
	h.target.captured["PAY-1"] = float64(b.N) * 1000
	evidence := benchkit.Proposal().Evidence
	before := cpuTime(b)
	b.ResetTimer()
	for range b.N {
		p := refund("PAY-1", 100)
		p.Evidence = evidence
		if run := h.submit(p); run.Status != record.StatusWaitingApproval {
			b.Fatalf("run %s is %s", run.ID, run.Status)
		}
	}
	b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

func cpuTime(b *testing.B) time.Duration {
	t, ok := benchkit.CPUTime()
	if !ok {
		b.Skip("this system does not say how much CPU time a process used")
	}
	return t
}
