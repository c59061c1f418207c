package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// officeHours: weekdays 09:00-17:00 UTC. The harness's clock starts on
// Friday 2026-11-27 at 17:00 UTC, just as it closes.
var officeHours = &record.Window{Days: []time.Weekday{1, 2, 3, 4, 5}, From: "09:00", To: "17:00", TZ: "UTC"}

// monday is when officeHours next opens after the harness's start.
var monday = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// windowPolicy is testPolicy whose large refunds, and with low the others
// too, may run only within w.
func windowPolicy(t testing.TB, roles *policy.Roles, w *record.Window) *policy.Policy {
	t.Helper()
	p, err := policy.New("rev-1", []policy.Rule{
		{Name: "large-refund", When: `action.name == "request_refund" && double(action.args.amount) > 50.0`, Risk: "high",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(72 * 3600), Edit: true}, Window: w},
		{Name: "everything-else", When: "true", Risk: "low", Window: w},
	}, roles)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

func (h *harness) work() int {
	h.t.Helper()
	n, err := h.engine.Work(context.Background(), 10)
	if err != nil {
		h.t.Fatalf("work: %v", err)
	}
	return n
}

func (h *harness) events(id string, ev record.Event) int {
	h.t.Helper()
	evs, err := h.engine.AuditLog(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Action == ev {
			n++
		}
	}
	return n
}

func (h *harness) wantScheduled(id string, at time.Time) {
	h.t.Helper()
	v := h.get(id)
	if v.Status != record.StatusScheduled || v.ScheduledFor == nil || !v.ScheduledFor.Equal(at) {
		h.t.Fatalf("status %s (%s) scheduled for %v, want scheduled for %s", v.Status, v.Reason, v.ScheduledFor, at)
	}
	if e := h.target.Effects(); len(e) != 0 {
		h.t.Fatalf("effects before the window opened: %v", e)
	}
}

// An approval outside the window schedules the run for the next opening;
// workers leave it alone until then, expiry and the old deadline do not
// touch it, an operator's resume does not run it early; at the opening a
// worker releases it and it runs once.
func TestApprovedOutsideTheWindowRunsWhenItOpens(t *testing.T) {
	h := newHarness(t)
	h.open(windowPolicy(t, h.roles, officeHours))
	run := h.submit(refund("PAY-1", 119))
	if _, err := h.approve(run.ID, "U0LEAD0001"); err != nil {
		t.Fatal(err)
	}
	h.wantScheduled(run.ID, monday)
	if h.events(run.ID, record.EventScheduled) != 1 {
		t.Fatalf("scheduled events: %d, want 1", h.events(run.ID, record.EventScheduled))
	}
	// Past the approval's 72h deadline, still before the window: nothing expires.
	h.clock.Set(monday.Add(-time.Millisecond))
	if n, err := h.engine.ExpireDue(ctx); err != nil || n != 0 {
		t.Fatalf("expired %d, %v", n, err)
	}
	if n := h.work(); n != 0 {
		t.Fatalf("a worker claimed %d runs before the window opened", n)
	}
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	h.wantScheduled(run.ID, monday)
	h.clock.Set(monday)
	if n := h.work(); n != 1 {
		t.Fatalf("claimed %d at the opening, want 1", n)
	}
	if v := h.get(run.ID); v.Status != record.StatusDone || v.ScheduledFor != nil {
		t.Fatalf("status %s (%s), scheduled for %v", v.Status, v.Reason, v.ScheduledFor)
	}
	h.work()
	if e := h.target.Effects(); len(e) != 1 || h.events(run.ID, record.EventReleased) != 1 {
		t.Fatalf("effects %v, released %d times; want once each", e, h.events(run.ID, record.EventReleased))
	}
}

// A run that needs no approval but has a window waits for it too.
func TestNoApprovalButAWindowIsScheduled(t *testing.T) {
	h := newHarness(t)
	h.open(windowPolicy(t, h.roles, officeHours))
	run := h.submit(refund("PAY-2", 9.95))
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	h.wantScheduled(run.ID, monday)
}

// Inside the window an approved run runs at once, as without one.
func TestApprovedInsideTheWindowRunsAtOnce(t *testing.T) {
	h := newHarness(t)
	h.clock.Set(monday.Add(time.Hour))
	h.open(windowPolicy(t, h.roles, officeHours))
	run := h.submit(refund("PAY-1", 119))
	got, err := h.approve(run.ID, "U0LEAD0001")
	if err != nil || got.Status != record.StatusDone || h.events(run.ID, record.EventScheduled) != 0 {
		t.Fatalf("%v %v, scheduled %d", got, err, h.events(run.ID, record.EventScheduled))
	}
}

// The window is looked at again right before the first intent: a run
// approved inside it that reaches execution once it closed, or released
// at the opening but executed only after it closed, goes back to
// scheduled with the next opening, and nothing is sent.
func TestWindowClosedBeforeExecutionSchedulesAgain(t *testing.T) {
	h := newHarness(t)
	tuesday, wednesday := monday.AddDate(0, 0, 1), monday.AddDate(0, 0, 2)
	h.clock.Set(monday.Add(8*time.Hour - time.Minute)) // 16:59
	p := windowPolicy(t, h.roles, officeHours)
	h.open(p)
	run := h.submit(refund("PAY-1", 119))
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	// Approved at 16:59 (executing), reached by a worker at 17:00: closed.
	h.clock.Advance(time.Minute)
	h.work()
	h.wantScheduled(run.ID, tuesday)
	// Released at Tuesday's opening, but the clock reads past the close
	// before its first intent (a process stalled between the two).
	h.open(p, func(c *workflow.Config) {
		c.Failpoint = func(name string) {
			if name == "after-release" {
				h.clock.Set(tuesday.Add(8 * time.Hour))
			}
		}
	})
	h.clock.Set(tuesday)
	h.work()
	h.wantScheduled(run.ID, wednesday)
	if n := h.events(run.ID, record.EventScheduled); n != 2 {
		t.Fatalf("scheduled %d times, want 2", n)
	}
	h.open(p)
	h.clock.Set(wednesday)
	h.work()
	if v := h.get(run.ID); v.Status != record.StatusDone || len(h.target.Effects()) != 1 {
		t.Fatalf("status %s, effects %v", v.Status, h.target.Effects())
	}
}

// A scheduled run can be cancelled by who may cancel it; it never runs.
func TestCancelAScheduledRun(t *testing.T) {
	h := newHarness(t)
	h.open(windowPolicy(t, h.roles, officeHours))
	run := h.submit(refund("PAY-1", 119))
	if _, err := h.approve(run.ID, "U0LEAD0001"); err != nil {
		t.Fatal(err)
	}
	h.wantScheduled(run.ID, monday)
	got, err := h.engine.Cancel(ctx, run.ID, record.Person{ID: "agent:resolver"}, "not needed any more")
	if err != nil || got.Status != record.StatusCancelled {
		t.Fatalf("cancel: %v %v", got, err)
	}
	h.clock.Set(monday)
	h.work()
	if v := h.get(run.ID); v.Status != record.StatusCancelled || len(h.target.Effects()) != 0 {
		t.Fatalf("status %s, effects %v", v.Status, h.target.Effects())
	}
}

// A restart while a run is scheduled loses nothing: the new engine's
// worker releases it once at the opening.
func TestRestartDuringTheWaitReleasesOnce(t *testing.T) {
	h := newHarness(t)
	p := windowPolicy(t, h.roles, officeHours)
	h.open(p)
	run := h.submit(refund("PAY-1", 119))
	if _, err := h.approve(run.ID, "U0LEAD0001"); err != nil {
		t.Fatal(err)
	}
	h.open(p)
	h.clock.Set(monday)
	h.work()
	h.open(p)
	h.work()
	if v := h.get(run.ID); v.Status != record.StatusDone || len(h.target.Effects()) != 1 || h.events(run.ID, record.EventReleased) != 1 {
		t.Fatalf("status %s, effects %v, released %d", v.Status, h.target.Effects(), h.events(run.ID, record.EventReleased))
	}
}
