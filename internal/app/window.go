package app

import (
	"fmt"
	"io"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// statusText is a run's status as a list shows it: a scheduled run says
// when it runs.
func statusText(v *workflow.RunView) string {
	if v.Status == record.StatusScheduled && v.ScheduledFor != nil {
		return "scheduled, runs at " + v.ScheduledFor.UTC().Format(time.RFC3339)
	}
	return term(string(v.Status))
}

// renderScheduled prints when a scheduled run runs, in which window, and
// what may be done meanwhile.
func renderScheduled(w io.Writer, v *workflow.RunView, now time.Time) {
	if v.Status != record.StatusScheduled || v.ScheduledFor == nil {
		return
	}
	when := "due now"
	if v.ScheduledFor.After(now) {
		when = deadlineText(now, *v.ScheduledFor)
	}
	window := ""
	if v.Gate != nil && v.Gate.Window != nil {
		window = " when its window " + term(v.Gate.Window.String()) + " opens"
	}
	fmt.Fprintf(w, "  scheduled, runs at %s (%s)%s\n", v.ScheduledFor.UTC().Format(time.RFC3339), when, window)
	fmt.Fprintf(w, "  next: a running serve runs it then; until then %s stops it\n", shellLine("signoff", "cancel", term(v.ID), "--as", "MEMBER", "--reason", "WHY"))
}
