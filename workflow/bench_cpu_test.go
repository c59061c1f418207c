package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/internal/benchkit"
	"github.com/signoff-dev/signoff/workflow"
)

// BenchmarkCPU is BenchmarkIntegrity's decide and execute measured in the
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
	for _, fig := range []string{"decide", "execute"} {
		for _, s := range setups {
			b.Run(fig+"/"+s.name, func(b *testing.B) {
				h := newHarness(b, s.opts...)
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

func cpuTime(b *testing.B) time.Duration {
	t, ok := benchkit.CPUTime()
	if !ok {
		b.Skip("this system does not say how much CPU time a process used")
	}
	return t
}
