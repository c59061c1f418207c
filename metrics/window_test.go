package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// TestScheduledRunsAreCountedAndShown: each scheduling counts once (a
// release does not), and signoff_runs has a scheduled series from the start.
func TestScheduledRunsAreCountedAndShown(t *testing.T) {
	m := New("test")
	for _, ev := range []record.Event{record.EventScheduled, record.EventReleased, record.EventScheduled} {
		if _, err := m.Hook().OnTransition(t.Context(), &workflow.Transition{Event: ev, Run: &record.Run{}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(m.scheduled); got != 2 {
		t.Fatalf("scheduled_total = %v, want 2", got)
	}
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				found = found || f.GetName() == "signoff_runs" && l.GetName() == "status" && l.GetValue() == string(record.StatusScheduled)
			}
		}
	}
	if !found {
		t.Fatal(`signoff_runs has no status="scheduled" series`)
	}
}
