package callback_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/callback"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/sqlite"
)

// TestAScheduledRunIsAnnounced: a run approved outside its execution
// window is announced as run.scheduled, showing when it runs, and then
// run.done once the window opened and it ran.
func TestAScheduledRunIsAnnounced(t *testing.T) {
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
	e.approve(run.ID)
	e.drain(5)
	e.clock.Set(opens)
	if _, err := e.engine.Work(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	e.drain(5)
	var types []string
	for _, ev := range e.recv.events() {
		types = append(types, ev.Type)
		if ev.Type == callback.Types[record.StatusScheduled] && (ev.Run.ScheduledFor == nil || !ev.Run.ScheduledFor.Equal(opens)) {
			t.Errorf("run.scheduled shows scheduled_for %v, want %s", ev.Run.ScheduledFor, opens)
		}
	}
	if len(types) != 3 || types[0] != "run.waiting" || types[1] != "run.scheduled" || types[2] != "run.done" {
		t.Fatalf("events %v, want run.waiting, run.scheduled, run.done", types)
	}
}
