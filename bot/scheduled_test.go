package bot

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/storage"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// scheduled is v, approved, waiting for its weekday office-hours window.
func scheduled(v *workflow.RunView) *workflow.RunView {
	v.Status = record.StatusScheduled
	v.ScheduledFor = tp("2026-12-01T14:00:00Z")
	g := *v.Gate
	g.Window = &record.Window{Days: []time.Weekday{1, 2, 3, 4, 5}, From: "09:00", To: "17:00", TZ: "America/New_York"}
	v.Gate = &g
	return v
}

// withScheduled is an engine that also has these scheduled runs (the
// harness's config has no execution window to make them).
type withScheduled struct {
	Engine
	runs map[string]*workflow.RunView
}

func (e withScheduled) List(ctx context.Context, f storage.RunFilter) ([]*record.Run, error) {
	if slices.Equal(f.Statuses, []record.Status{record.StatusScheduled}) {
		var out []*record.Run
		for _, v := range e.runs {
			out = append(out, &record.Run{ID: v.ID, Status: v.Status, RequesterID: v.Requester.ID, CreatedAt: v.CreatedAt})
		}
		return out, nil
	}
	return e.Engine.List(ctx, f)
}

func (e withScheduled) Get(ctx context.Context, id string) (*workflow.RunView, error) {
	if v, ok := e.runs[id]; ok {
		return v, nil
	}
	return e.Engine.Get(ctx, id)
}

// TestRunsPendingListsScheduledRuns: /runs pending lists, after the runs
// waiting for approval, the approved runs waiting for their window, with
// when each runs; with none waiting, those alone.
func TestRunsPendingListsScheduledRuns(t *testing.T) {
	v := scheduled(approved(refundView()))
	later := withScheduled{runs: map[string]*workflow.RunView{v.ID: v}}
	h := newSlackHarness(t, func(c *ServerConfig) { later.Engine = c.Engine; c.Engine = later })
	want := []string{"Scheduled: approved, waiting for their window", v.ID, "runs <!date^1796133600^"}
	_, r := h.runsCommand(leadGrace, "pending")
	got := replyText(r)
	for _, w := range append(want, "Nothing is waiting for approval; some approved runs wait for their execution window") {
		if !strings.Contains(got, w) {
			t.Errorf("reply lacks %q:\n%s", w, got)
		}
	}
	waiting := h.submit("refund-double-charge", "")
	_, r = h.runsCommand(leadGrace, "pending")
	got = replyText(r)
	for _, w := range append(want, "Waiting for approval", waiting.ID) {
		if !strings.Contains(got, w) {
			t.Errorf("reply lacks %q:\n%s", w, got)
		}
	}
	if strings.Index(got, waiting.ID) > strings.Index(got, v.ID) {
		t.Errorf("the scheduled run comes before the waiting one:\n%s", got)
	}
}
