package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// TestScheduledRunsAreCountedAndShown: each scheduling counts once (a
// release does not), an approval that schedules its run in its own
// transition too, and signoff_runs has a scheduled series from the start.
func TestScheduledRunsAreCountedAndShown(t *testing.T) {
	m := New("test")
	scheduled := &record.Run{Status: record.StatusScheduled}
	for _, tr := range []*workflow.Transition{
		{Event: record.EventScheduled, From: record.StatusExecuting, Run: scheduled},
		{Event: record.EventReleased, From: record.StatusScheduled, Run: &record.Run{Status: record.StatusExecuting}},
		{Event: record.EventScheduled, From: record.StatusScheduled, Run: scheduled},
		{Event: record.EventPolicyBypassed, From: record.StatusWaitingApproval, Run: scheduled},
		{Event: record.EventDecided, From: record.StatusWaitingApproval, Run: scheduled},
	} {
		if _, err := m.Hook().OnTransition(t.Context(), tr); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(m.scheduled); got != 4 {
		t.Fatalf("scheduled_total = %v, want 4", got)
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
