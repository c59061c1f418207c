package callback_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/callback"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// TestAScheduledRunIsAnnounced: a run approved outside its execution
// window is announced as run.scheduled, showing when it runs, by the
// approval itself (nothing else ran yet), and then run.done once the
// window opened and it ran; a forced approval is told as such first. No
// event shows it executing before its window.
func TestAScheduledRunIsAnnounced(t *testing.T) {
	for _, tc := range []struct {
		name  string
		force bool
		want  []string
	}{
		{"approved", false, []string{"run.waiting", "run.scheduled", "run.done"}},
		{"forced", true, []string{"run.waiting", "run.policy_bypassed", "run.scheduled", "run.done"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "signoff.db"))
			if err != nil {
				t.Fatal(err)
			}
			// The env's clock starts on a Monday at 09:00 UTC.
			opens := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
			e := newEnvOn(t, st, func(r *policy.Rule) {
				r.Window = &record.Window{Days: []time.Weekday{0, 1, 2, 3, 4, 5, 6}, From: "10:00", To: "11:00", TZ: "UTC"}
			})
			run := e.submit("T-1")
			in := workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli", Force: tc.force}
			if tc.force {
				in.Reason = "customer waiting"
			}
			if _, err := e.engine.Decide(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			e.drain(5)
			if got := typesOf(e.recv.events()); !slices.Equal(got, tc.want[:len(tc.want)-1]) {
				t.Fatalf("after the approval alone: %v, want %v", got, tc.want[:len(tc.want)-1])
			}
			e.clock.Set(opens)
			if _, err := e.engine.Work(context.Background(), 10); err != nil {
				t.Fatal(err)
			}
			e.drain(5)
			for _, ev := range e.recv.events() {
				if ev.Type == callback.Types[record.StatusScheduled] && (ev.Run.ScheduledFor == nil || !ev.Run.ScheduledFor.Equal(opens)) {
					t.Errorf("run.scheduled shows scheduled_for %v, want %s", ev.Run.ScheduledFor, opens)
				}
				if ev.Type != callback.Types[record.StatusDone] && ev.Run.Status == record.StatusExecuting {
					t.Errorf("%s shows the run executing before its window", ev.Type)
				}
			}
			if got := typesOf(e.recv.events()); !slices.Equal(got, tc.want) {
				t.Fatalf("events %v, want %v", got, tc.want)
			}
		})
	}
}

func typesOf(evs []callback.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}
