package api_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// closedWindow is an execution window, every day, that opens two hours
// from now: closed for the whole of a test.
func closedWindow() *record.Window {
	now := time.Now().UTC()
	return &record.Window{Days: []time.Weekday{0, 1, 2, 3, 4, 5, 6}, From: now.Add(2 * time.Hour).Format("15:04"), To: now.Add(3 * time.Hour).Format("15:04"), TZ: "UTC"}
}

// TestAScheduledRunConforms: a run outside its window is scheduled; GET
// shows when it runs and the gate's window, as the document says (the
// harness checks every answer against it); cancel ends it.
func TestAScheduledRunConforms(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	c := h.client(tokAll)
	s, err := c.Submit(ctx, &workflow.Proposal{Actions: []record.Action{{Name: "note", Args: json.RawMessage(`{"text":"later"}`)}}})
	if err != nil || s.Status != "scheduled" {
		t.Fatalf("submit: %+v, %v; want scheduled", s, err)
	}
	v, err := c.Get(ctx, s.Id)
	if err != nil {
		t.Fatal(err)
	}
	if v.ScheduledFor == nil || !v.ScheduledFor.After(time.Now()) || v.Gate == nil || v.Gate.Window == nil {
		t.Fatalf("scheduled for %v, gate %+v", v.ScheduledFor, v.Gate)
	}
	if v, err = c.Cancel(ctx, s.Id, "not needed"); err != nil || v.Status != record.StatusCancelled {
		t.Fatalf("cancel: %+v, %v", v, err)
	}
}
