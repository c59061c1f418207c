package workflow_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// remindPolicy is testPolicy whose large refunds need count team leads
// within 72h and remind remind before the deadline.
func remindPolicy(t testing.TB, roles *policy.Roles, count int, remind ...time.Duration) *policy.Policy {
	t.Helper()
	var offsets []record.Seconds
	for _, d := range remind {
		offsets = append(offsets, record.Seconds(d/time.Second))
	}
	p, err := policy.New("rev-1", []policy.Rule{
		{Name: "large-refund", When: `action.name == "request_refund" && double(action.args.amount) > 50.0`, Risk: "high",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: count, Expires: record.Seconds(72 * 3600), Edit: true}, Remind: offsets},
		{Name: "everything-else", When: "true", Risk: "low"},
	}, roles)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

// reminders is a harness whose policy reminds.
func reminders(t *testing.T, count int, remind ...time.Duration) *harness {
	t.Helper()
	h := newHarness(t)
	h.open(remindPolicy(t, h.roles, count, remind...))
	return h
}

// remindDue sweeps once and wants n reminders sent.
func (h *harness) remindDue(n int) {
	h.t.Helper()
	got, err := h.engine.RemindDue(context.Background())
	if err != nil || got != n {
		h.t.Fatalf("%s: reminded %d, %v; want %d", h.clock.Now().Format(time.RFC3339), got, err, n)
	}
}

// remindedEvents counts the run's reminded audit events.
func (h *harness) remindedEvents(id string) int {
	h.t.Helper()
	evs, err := h.engine.AuditLog(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Action == record.EventReminded {
			n++
		}
	}
	return n
}

// Each offset is due at deadline − offset, not a millisecond before, and is
// sent once; the gate keeps the offsets and the state the reminders.
func TestRemindersAreDueBeforeTheDeadline(t *testing.T) {
	h := reminders(t, 1, time.Hour, 24*time.Hour, time.Hour)
	run := h.submit(refund("PAY-1", 119))
	if g := h.get(run.ID).Gate; !slices.Equal(g.Remind, []record.Seconds{24 * 3600, 3600}) {
		t.Fatalf("gate remind %v, want 24h then 1h, once each", g.Remind)
	}
	h.clock.Advance(48*time.Hour - time.Millisecond)
	h.remindDue(0)
	h.clock.Advance(time.Millisecond)
	h.remindDue(1)
	h.remindDue(0)
	h.clock.Advance(22 * time.Hour)
	h.remindDue(0)
	h.clock.Advance(time.Hour)
	h.remindDue(1)
	h.clock.Advance(30 * time.Minute)
	h.remindDue(0)
	v := h.get(run.ID)
	want := []string{"U0LEAD0001", "U0LEAD0002", "U0MGR00001"}
	if len(v.Reminders) != 2 || v.Reminders[0].Before != 24*3600 || v.Reminders[1].Before != 3600 ||
		v.Reminders[0].Passed || v.Reminders[1].Passed || !slices.Equal(v.Reminders[1].Mention, want) {
		t.Fatalf("reminders %+v", v.Reminders)
	}
	if v.Status != record.StatusWaitingApproval || h.remindedEvents(run.ID) != 2 {
		t.Fatalf("status %s, %d reminded events", v.Status, h.remindedEvents(run.ID))
	}
	if n, err := h.engine.Verify(ctx); err != nil || !n.OK() {
		t.Fatalf("verify %+v %v", n, err)
	}
}

// Two reminders of one run are at least four hours apart, whatever the
// offsets: a reminder due sooner waits for the four hours.
func TestRemindersAreFourHoursApart(t *testing.T) {
	h := reminders(t, 1, 5*time.Hour, 3*time.Hour)
	run := h.submit(refund("PAY-1", 119))
	h.clock.Advance(67 * time.Hour)
	h.remindDue(1)
	h.clock.Advance(2 * time.Hour) // 3h before: due, but 2h after the last
	h.remindDue(0)
	h.clock.Advance(2*time.Hour - time.Millisecond)
	h.remindDue(0)
	h.clock.Advance(time.Millisecond)
	h.remindDue(1)
	v := h.get(run.ID)
	if len(v.Reminders) != 2 || v.Reminders[1].Before != 3*3600 || !v.Reminders[1].At.Equal(v.Reminders[0].At.Add(4*time.Hour)) {
		t.Fatalf("reminders %+v", v.Reminders)
	}
}

// After a downtime in which several offsets fell due, one reminder is sent:
// the latest offset's, the others marked passed; across a restart it is
// sent once.
func TestRemindersDueDuringADowntimeAreSentOnceAfterIt(t *testing.T) {
	h := reminders(t, 1, 24*time.Hour, 1*time.Hour)
	run := h.submit(refund("PAY-1", 119))
	h.clock.Advance(71*time.Hour + 30*time.Minute) // the server was down since the submit
	h.open(remindPolicy(t, h.roles, 1, 24*time.Hour, time.Hour))
	h.remindDue(1)
	h.open(remindPolicy(t, h.roles, 1, 24*time.Hour, time.Hour))
	h.remindDue(0)
	v := h.get(run.ID)
	if len(v.Reminders) != 2 || !v.Reminders[0].Passed || v.Reminders[0].Before != 24*3600 ||
		v.Reminders[1].Passed || v.Reminders[1].Before != 3600 || h.remindedEvents(run.ID) != 1 {
		t.Fatalf("reminders %+v, %d reminded events", v.Reminders, h.remindedEvents(run.ID))
	}
}

// A crash right after a reminder was recorded loses nothing and repeats
// nothing: the process that starts after it finds the reminder sent.
func TestACrashAfterARemindSendsItOnce(t *testing.T) {
	h := newHarness(t, crashAt("after-remind"))
	h.open(remindPolicy(t, h.roles, 1, time.Hour), crashAt("after-remind"))
	run := h.submit(refund("PAY-1", 119))
	h.clock.Advance(71 * time.Hour)
	if !survive(t, func() { _, _ = h.engine.RemindDue(ctx) }) {
		t.Fatal("the failpoint after-remind was not reached")
	}
	h.open(remindPolicy(t, h.roles, 1, time.Hour))
	h.remindDue(0)
	if v := h.get(run.ID); len(v.Reminders) != 1 || h.remindedEvents(run.ID) != 1 {
		t.Fatalf("reminders %+v, %d reminded events", v.Reminders, h.remindedEvents(run.ID))
	}
}

// A reminder mentions only who may still decide and has not: not who
// approved already, not the requester; the assignee alone when there is one.
// None is sent once the request is decided.
func TestRemindersMentionOnlyWhoMayStillDecide(t *testing.T) {
	h := reminders(t, 2, 24*time.Hour, time.Hour)
	run := h.submit(refund("PAY-1", 119))
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(48 * time.Hour)
	h.remindDue(1)
	if m := h.get(run.ID).Reminders[0].Mention; !slices.Equal(m, []string{"U0LEAD0002", "U0MGR00001"}) {
		t.Fatalf("mention %q, want the two who have not decided", m)
	}
	if _, err := h.engine.Reassign(ctx, run.ID, record.Person{ID: "U0MGR00001"}, record.Person{ID: "U0LEAD0002"}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(23 * time.Hour)
	h.remindDue(1)
	if m := h.get(run.ID).Reminders[1].Mention; !slices.Equal(m, []string{"U0LEAD0002"}) {
		t.Fatalf("mention %q, want the assignee", m)
	}

	decided := reminders(t, 1, 24*time.Hour, time.Hour)
	other := decided.submit(refund("PAY-1", 119))
	decided.clock.Advance(48 * time.Hour)
	decided.remindDue(1)
	if _, err := decided.engine.Decide(ctx, workflow.DecideInput{RunID: other.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictReject, Reason: "not this one", Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	decided.clock.Advance(23 * time.Hour)
	decided.remindDue(0)
	if v := decided.get(other.ID); v.Status != record.StatusRejected || len(v.Reminders) != 1 {
		t.Fatalf("status %s, reminders %+v", v.Status, v.Reminders)
	}
}

// Two servers sweeping the same store remind once: the second finds the
// reminder recorded (the write is a compare-and-set on the run).
func TestTwoServersRemindOnce(t *testing.T) {
	h := reminders(t, 1, time.Hour)
	run := h.submit(refund("PAY-1", 119))
	h.clock.Advance(71 * time.Hour)
	first := h.engine
	h.build(h.store, remindPolicy(t, h.roles, 1, time.Hour))
	second := h.engine
	done := make(chan int, 2)
	for _, e := range []*workflow.Engine{first, second} {
		go func() {
			n, err := e.RemindDue(ctx)
			if err != nil {
				t.Error(err)
			}
			done <- n
		}()
	}
	if n := <-done + <-done; n != 1 || h.remindedEvents(run.ID) != 1 {
		t.Fatalf("reminded %d times, %d events; want once", n, h.remindedEvents(run.ID))
	}
}

// The offsets are not part of the fingerprint: a gate that reminds has the
// fingerprint of its run's proposal alone, as one without.
func TestRemindLeavesTheFingerprint(t *testing.T) {
	h := reminders(t, 1, time.Hour)
	v := h.get(h.submit(refund("PAY-1", 119)).ID)
	want, err := policy.Fingerprint(policy.FingerprintInput{RunID: v.ID, Actions: v.Actions, Evidence: v.Evidence, Risk: v.Gate.Risk, PolicyRevision: v.Gate.PolicyRevision})
	if err != nil {
		t.Fatal(err)
	}
	if v.Gate.Fingerprint != want || len(v.Gate.Remind) != 1 {
		t.Fatalf("fingerprint %s, want %s; remind %v", v.Gate.Fingerprint, want, v.Gate.Remind)
	}
}

// The server's loops remind only when a rule has remind:, at their pace
// (only time makes a reminder due, so commits do not wake the loop), and a
// process that starts after a downtime sends what fell due once.
func TestTheRemindLoopRemindsAtItsPace(t *testing.T) {
	const name = "remind before the deadline"
	for _, l := range newHarness(t).engine.Loops(time.Hour, nil) {
		if l.Name == name {
			t.Fatal("a remind loop without a rule that reminds")
		}
	}
	h := reminders(t, 1, 24*time.Hour, time.Hour)
	run := h.submit(refund("PAY-1", 119))
	l := loopNamed(t, h.engine.Loops(time.Hour, nil), name)
	if l.Changes != nil {
		t.Fatal("the remind loop is woken by commits")
	}
	pace := handPaced(l)
	stop := runLoop(t, l)
	pace.RoundEnded(t)
	if n := h.remindedEvents(run.ID); n != 0 {
		t.Fatalf("%d reminders at the start", n)
	}
	h.clock.Advance(48 * time.Hour)
	pace.Tick(t)
	pace.RoundEnded(t)
	pace.Tick(t)
	pace.RoundEnded(t)
	if n := h.remindedEvents(run.ID); n != 1 {
		t.Fatalf("%d reminders after 48h and two rounds, want 1", n)
	}

	// A restart 23h30m later: the new process's loop sends the 1h one, once.
	stop()
	h.clock.Advance(23*time.Hour + 30*time.Minute)
	h.open(remindPolicy(t, h.roles, 1, 24*time.Hour, time.Hour))
	l = loopNamed(t, h.engine.Loops(time.Hour, nil), name)
	pace = handPaced(l)
	runLoop(t, l)
	pace.RoundEnded(t)
	pace.Tick(t)
	pace.RoundEnded(t)
	if v := h.get(run.ID); h.remindedEvents(run.ID) != 2 || len(v.Reminders) != 2 || v.Reminders[1].Before != 3600 {
		t.Fatalf("%d reminders after the restart: %+v", h.remindedEvents(run.ID), v.Reminders)
	}
}

// An edit asks again under a new request: its offsets are its own, so the
// new request is reminded before its own deadline.
func TestAnEditedRequestIsRemindedOfItsOwnDeadline(t *testing.T) {
	h := reminders(t, 2, 24*time.Hour)
	run := h.submit(refund("PAY-1", 119))
	h.clock.Advance(48 * time.Hour)
	h.remindDue(1)
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli",
		Edit: []byte(`{"payment_id":"PAY-1","amount":60}`)}); err != nil {
		t.Fatal(err)
	}
	v := h.get(run.ID)
	if v.Status != record.StatusWaitingApproval || v.Gate.RequestID == v.Reminders[0].RequestID {
		t.Fatalf("status %s, request %s after the edit; reminders %+v", v.Status, v.Gate.RequestID, v.Reminders)
	}
	h.clock.Set(v.Deadline.Add(-24*time.Hour - time.Millisecond))
	h.remindDue(0)
	h.clock.Advance(time.Millisecond)
	h.remindDue(1)
	v = h.get(run.ID)
	if len(v.Reminders) != 2 || v.Reminders[1].RequestID != v.Gate.RequestID || slices.Contains(v.Reminders[1].Mention, "U0LEAD0001") {
		t.Fatalf("reminders %+v", v.Reminders)
	}
}
