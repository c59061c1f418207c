package workflow_test

import (
	"context"
	"testing"

	"github.com/signoff-dev/signoff/workflow"
)

// BenchmarkIntegrity is the cost of keyed integrity: each engine figure
// without keys and with them, side by side in one run on the same disk.
//
//	go test -run '^$' -bench Integrity -benchtime 2s -count 3 ./workflow
//
// Keyed, every write also seals its rows and moves the sealed audit head (one
// more statement in the same transaction), and decide and execute check the
// seals of what they act on.
func BenchmarkIntegrity(b *testing.B) {
	setups := []struct {
		name string
		opts []harnessOption
	}{{"unkeyed", nil}, {"keyed", []harnessOption{withKeys(testKeys(b))}}}
	for _, fig := range []string{"suspend", "decide", "execute"} {
		for _, s := range setups {
			b.Run(fig+"/"+s.name, func(b *testing.B) {
				h := newHarness(b, s.opts...)
				switch fig {
				case "suspend":
					b.ResetTimer()
					for b.Loop() {
						h.submit(refund("PAY-1", 100))
					}
				case "decide", "execute":
					ids := waitingRefunds(b, h, b.N)
					if fig == "execute" {
						for _, id := range ids {
							if _, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: id, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
								b.Fatal(err)
							}
						}
					}
					b.ResetTimer()
					for i := range b.N {
						var err error
						if fig == "decide" {
							_, err = h.engine.Decide(context.Background(), workflow.DecideInput{RunID: ids[i], Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"})
						} else {
							_, err = h.engine.Resume(context.Background(), ids[i])
						}
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})
		}
	}
}

// waitingRefunds suspends n refunds on the harness, outside the timer.
func waitingRefunds(b *testing.B, h *harness, n int) []string {
	b.Helper()
	h.target.captured["PAY-1"] = float64(n) * 1000
	ids := make([]string, n)
	for i := range ids {
		run := h.submit(refund("PAY-1", 100))
		if run.Status != record.StatusWaitingApproval {
			b.Fatalf("run %s is %s", run.ID, run.Status)
		}
		ids[i] = run.ID
	}
	return ids
}
