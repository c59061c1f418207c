package workflow_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// transitions records every transition the hooks are told of, each with
// a copy of its run row as the transition left it.
type transitions struct {
	mu  sync.Mutex
	got []*workflow.Transition
}

func (r *transitions) OnTransition(_ context.Context, t *workflow.Transition) ([]*record.OutboxMessage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := *t
	run := *t.Run
	c.Run = &run
	r.got = append(r.got, &c)
	return nil, nil
}

func (r *transitions) of(id string) []*workflow.Transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*workflow.Transition
	for _, t := range r.got {
		if t.Run.ID == id {
			out = append(out, t)
		}
	}
	return out
}

// windowForcePolicy is windowPolicy whose large refunds a manager may also
// force.
func windowForcePolicy(t testing.TB, roles *policy.Roles, w *record.Window) *policy.Policy {
	t.Helper()
	p, err := policy.New("rev-1", []policy.Rule{
		{Name: "large-refund", When: `action.name == "request_refund" && double(action.args.amount) > 50.0`, Risk: "high",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(72 * 3600), Edit: true}, Window: w, BreakGlass: managersForce},
		{Name: "everything-else", When: "true", Risk: "low", Window: w},
	}, roles)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

// TestAnApprovalOutsideTheWindowSchedulesInItsOwnCommit: whatever approves
// a run outside its window (the quorum met, an edit approved by its
// editor alone, an edit that needs no approval any more, a forced
// approval, a proposal that needs none) leaves it scheduled for the
// opening in that one transition, with no call after it: it is never
// executing, in its history nor to a hook; the scheduled event names the
// approval's checkpoint; at the opening a worker runs it once.
func TestAnApprovalOutsideTheWindowSchedulesInItsOwnCommit(t *testing.T) {
	decide := func(in workflow.DecideInput) func(*harness, string) *record.Run {
		return func(h *harness, id string) *record.Run {
			h.t.Helper()
			in.RunID = id
			if in.Via == "" {
				in.Via = "cli"
			}
			run, err := h.engine.Decide(ctx, in)
			if err != nil {
				h.t.Fatalf("decide: %v", err)
			}
			return run
		}
	}
	lead := record.Person{ID: "U0LEAD0001"}
	for _, tc := range []struct {
		name    string
		amount  float64
		approve func(*harness, string) *record.Run // nil: the submit is the approval
		event   record.Event
	}{
		{"quorum", 119, decide(workflow.DecideInput{Approver: lead, Verdict: record.VerdictApprove}), record.EventDecided},
		{"edit approved by its editor", 119, decide(workflow.DecideInput{Approver: lead, Verdict: record.VerdictApprove,
			Edit: json.RawMessage(`{"payment_id":"PAY-1","amount":100}`)}), record.EventEdited},
		{"edit needing no approval", 119, decide(workflow.DecideInput{Approver: lead, Verdict: record.VerdictApprove,
			Edit: json.RawMessage(`{"payment_id":"PAY-1","amount":9.95}`)}), record.EventEdited},
		{"forced", 119, decide(workflow.DecideInput{Approver: record.Person{ID: "U0MGR00001"}, Verdict: record.VerdictApprove,
			Reason: "customer waiting", Force: true}), record.EventPolicyBypassed},
		{"no approval needed", 9.95, nil, record.EventSubmitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &transitions{}
			h := newHarness(t)
			p := windowForcePolicy(t, h.roles, officeHours)
			withRec := func(c *workflow.Config) { c.Hooks = append(c.Hooks, rec) }
			h.open(p, withRec)
			run := h.submit(refund("PAY-1", tc.amount))
			if tc.approve != nil {
				if run.Status != record.StatusWaitingApproval {
					t.Fatalf("submitted: %s", run.Status)
				}
				run = tc.approve(h, run.ID)
			}
			if run.Status != record.StatusScheduled {
				t.Fatalf("the approval returned %s, want scheduled", run.Status)
			}
			h.wantScheduled(run.ID, monday)
			for _, tr := range rec.of(run.ID) {
				if tr.Run.Status == record.StatusExecuting {
					t.Fatalf("a hook was told of %s to executing by %s before the window opened", tr.From, tr.Event)
				}
			}
			last := rec.of(run.ID)[len(rec.of(run.ID))-1]
			if last.Event != tc.event || last.Run.Status != record.StatusScheduled {
				t.Fatalf("last transition %s to %s, want %s to scheduled", last.Event, last.Run.Status, tc.event)
			}
			hist, err := h.engine.History(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range hist {
				if e.State != nil && e.State.Status == record.StatusExecuting {
					t.Fatalf("checkpoint %d is executing before the window opened", e.Seq)
				}
			}
			evs, err := h.engine.AuditLog(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			var approved, scheduled int64
			for _, e := range evs {
				switch e.Action {
				case tc.event:
					approved = e.CheckpointSeq
				case record.EventScheduled:
					if scheduled != 0 {
						t.Fatalf("scheduled twice")
					}
					scheduled = e.CheckpointSeq
				}
			}
			if scheduled == 0 || scheduled != approved || scheduled != hist[len(hist)-1].Seq {
				t.Fatalf("scheduled on checkpoint %d, %s on %d, last checkpoint %d: want one and the same", scheduled, tc.event, approved, hist[len(hist)-1].Seq)
			}
			// Nothing that follows an approval moves it on early.
			if _, err := h.engine.Resume(ctx, run.ID); err != nil {
				t.Fatal(err)
			}
			h.work()
			h.wantScheduled(run.ID, monday)
			h.open(p, withRec)
			h.clock.Set(monday)
			h.work()
			h.work()
			if v := h.get(run.ID); v.Status != record.StatusDone || len(h.target.Effects()) != 1 || h.events(run.ID, record.EventReleased) != 1 {
				t.Fatalf("at the opening: %s, effects %v, released %d", v.Status, h.target.Effects(), h.events(run.ID, record.EventReleased))
			}
			if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() {
				t.Fatalf("verify: %v %+v", err, rep)
			}
		})
	}
}

// TestAnApprovalInsideTheWindowExecutes: the same approvals inside the
// window leave the run executing, as without one, and nothing is scheduled.
func TestAnApprovalInsideTheWindowExecutes(t *testing.T) {
	h := newHarness(t)
	h.clock.Set(monday.Add(time.Hour))
	h.open(windowForcePolicy(t, h.roles, officeHours))
	run := h.submit(refund("PAY-1", 119))
	got, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0MGR00001"}, Verdict: record.VerdictApprove, Reason: "urgent", Via: "cli", Force: true})
	if err != nil || got.Status != record.StatusExecuting || h.events(run.ID, record.EventScheduled) != 0 {
		t.Fatalf("%v %v, scheduled %d", got, err, h.events(run.ID, record.EventScheduled))
	}
}

// TestAResolutionOutsideTheWindowSchedules: a run approved inside its
// window that needed attention before its first action (no executor for
// it in that build) and is resolved for a retry once the window closed
// goes straight to scheduled by the resolution, and runs once at the next
// opening.
func TestAResolutionOutsideTheWindowSchedules(t *testing.T) {
	h := newHarness(t)
	p := windowPolicy(t, h.roles, officeHours)
	h.clock.Set(monday.Add(time.Hour))
	h.open(p)
	run := h.submit(refund("PAY-1", 119))
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	h.open(p, func(c *workflow.Config) { c.Actions = map[string]*workflow.ActionSpec{} })
	h.work()
	if v := h.get(run.ID); v.Status != record.StatusNeedsAttention {
		t.Fatalf("without its executor: %s (%s)", v.Status, v.Reason)
	}
	rec := &transitions{}
	h.open(p, func(c *workflow.Config) { c.Hooks = append(c.Hooks, rec) })
	h.clock.Set(monday.Add(8 * time.Hour)) // 17:00, closed
	got, err := resolve(h, run.ID, "U0MGR00001", record.ResolveRetry, "")
	if err != nil || got.Status != record.StatusScheduled {
		t.Fatalf("resolve: %v %v", got, err)
	}
	tuesday := monday.AddDate(0, 0, 1)
	h.wantScheduled(run.ID, tuesday)
	if trs := rec.of(run.ID); len(trs) != 1 || trs[0].Event != record.EventResolved || h.events(run.ID, record.EventScheduled) != 1 {
		t.Fatalf("transitions %d, scheduled %d: want the resolution alone, scheduled once", len(trs), h.events(run.ID, record.EventScheduled))
	}
	h.clock.Set(tuesday)
	h.work()
	h.work()
	if v := h.get(run.ID); v.Status != record.StatusDone || len(h.target.Effects()) != 1 {
		t.Fatalf("at the opening: %s, effects %v", v.Status, h.target.Effects())
	}
}
