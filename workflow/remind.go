package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// reminderGap is the least time between two reminders of one run, whatever
// the rule's remind: says: a reminder that falls due sooner waits for it.
const reminderGap = 4 * time.Hour

// reminder reminds the people who may still decide a pending request before
// its deadline (the gate's Remind). Each reminder is a transition of its own
// (EventReminded, sealed and audited with the reminder recorded in the
// state), written compare-and-set like every transition: two servers
// sweeping at once remind once, and a restart sends what fell due while it
// was down, once.
type reminder struct {
	runs  *runtx.Runs
	store storage.Store
	roles *policy.Roles
	fail  func(string)
	log   *slog.Logger
	// deputies names the delegates of who is reminded.
	deputies *deputyFinder
	// horizon is the longest offset of any rule: only runs whose deadline is
	// nearer than it can have a reminder due.
	horizon time.Duration

	sweep
}

func newReminder(e *Engine) *reminder {
	var horizon record.Seconds
	for _, r := range e.policy.Rules() {
		for _, d := range r.Remind {
			horizon = max(horizon, d)
		}
	}
	return &reminder{runs: e.runs, store: e.store, roles: e.roles, fail: e.fail, log: e.log, deputies: &deputyFinder{in: e.in}, horizon: horizon.Duration()}
}

// RemindDue sends every reminder that is due: for each waiting run whose
// pending request has an offset of its gate's Remind reached and not yet
// handled, and no reminder in the last four hours, it records one reminder
// (of the latest offset reached; earlier ones that fell due with it are
// marked passed) mentioning who may still decide and has not. It returns
// how many it sent.
func (e *Engine) RemindDue(ctx context.Context) (int, error) {
	return e.reminders.due(ctx)
}

func (rm *reminder) due(ctx context.Context) (int, error) {
	if rm.horizon <= 0 {
		return 0, nil
	}
	now := rm.runs.Now()
	runs, err := listRuns(ctx, rm.store, storage.RunFilter{Statuses: []record.Status{record.StatusWaitingApproval}, DeadlineBefore: now.Add(rm.horizon + time.Millisecond)})
	if err != nil {
		return 0, fmt.Errorf("list runs near their deadline: %w", err)
	}
	return rm.over(ctx, runs, now, rm.remind)
}

// remind records the reminder due for run id, if one is, in one transaction
// with its checkpoint and audit event, and reports whether it did.
func (rm *reminder) remind(ctx context.Context, id string) (bool, error) {
	sent := false
	err := rm.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		sent = false
		l, err := rm.runs.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		g, now := l.State.Gate, rm.runs.Now()
		if l.Run.Status != record.StatusWaitingApproval || g == nil || g.RequestID == "" || len(g.Remind) == 0 || !now.Before(l.Run.Deadline) {
			rm.remember(id, l.Run.Deadline.Add(time.Hour)) // nothing more to remind of
			return nil
		}
		plan := planReminder(g.Remind, g.RequestID, l.Run.Deadline, l.State.Reminders, now)
		if !plan.ok {
			rm.remember(id, plan.next)
			return nil
		}
		req, err := tx.Request(ctx, g.RequestID)
		if err != nil {
			return fmt.Errorf("load approval request of run %s: %w", id, err)
		}
		if req.Status != record.RequestPending {
			rm.remember(id, l.Run.Deadline)
			return nil
		}
		deps, err := rm.deputies.find(ctx, tx, now)
		if err != nil {
			return err
		}
		mention := withDeputies(stillToDecide(rm.roles, req, g, l.State.Decisions, l.State.Escalations), deps, req, decidedOn(req.ID, l.State.Decisions))
		for _, p := range plan.passed {
			l.State.Reminders = append(l.State.Reminders, record.ReminderRecord{RequestID: req.ID, Before: p, At: now, Passed: true})
		}
		l.State.Reminders = append(l.State.Reminders, record.ReminderRecord{RequestID: req.ID, Before: plan.send, At: now, Mention: mention})
		detail := map[string]string{"before": plan.send.Duration().String(), "deadline": l.Run.Deadline.Format(time.RFC3339), "mention": strings.Join(mention, ",")}
		if err := rm.runs.Save(ctx, tx, l, record.StatusWaitingApproval, record.EventReminded, "signoff", detail, req); err != nil {
			return err
		}
		sent = true
		return nil
	})
	var ie *IntegrityError
	if errors.As(err, &ie) {
		return false, rm.runs.Attention(ctx, id, ie.Error())
	}
	if err != nil {
		return false, fmt.Errorf("remind run %s: %w", id, err)
	}
	if sent {
		rm.remember(id, rm.runs.Now().Add(reminderGap))
		rm.log.Info("run reminded", "run_id", id)
		rm.fail("after-remind")
	}
	return sent, nil
}

// reminderPlan is what is due of a run's reminders at a time: send the
// reminder of offset send (when ok), marking passed the earlier offsets that
// fell due with it; next is the earliest time another could be due.
type reminderPlan struct {
	ok     bool
	send   record.Seconds
	passed []record.Seconds
	next   time.Time
}

// planReminder says which reminder is due at now of request reqID with
// these offsets (longest first) and deadline, given the run's reminders so
// far: of the offsets reached and not handled for this request, only the
// latest is sent, and none within reminderGap of the last one the run sent
// (for whichever request: an edit asks again, and is not reminded sooner).
func planReminder(offsets []record.Seconds, reqID string, deadline time.Time, done []record.ReminderRecord, now time.Time) reminderPlan {
	var last time.Time
	handled := map[record.Seconds]bool{}
	for _, r := range done {
		if r.RequestID == reqID {
			handled[r.Before] = true
		}
		if !r.Passed && r.At.After(last) {
			last = r.At
		}
	}
	var due []record.Seconds
	next := deadline
	for _, off := range offsets {
		if handled[off] {
			continue
		}
		at := deadline.Add(-off.Duration())
		if at.After(now) {
			next = minTime(next, at)
			continue
		}
		due = append(due, off)
	}
	if !last.IsZero() && now.Before(last.Add(reminderGap)) {
		if len(due) > 0 {
			next = last.Add(reminderGap)
		}
		return reminderPlan{next: next}
	}
	if len(due) == 0 {
		return reminderPlan{next: next}
	}
	// Longest first: the last one reached is the nearest to the deadline.
	slices.SortFunc(due, func(a, b record.Seconds) int { return int(b - a) })
	return reminderPlan{ok: true, send: due[len(due)-1], passed: due[:len(due)-1], next: now.Add(reminderGap)}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// stillToDecide are who may still decide req and have not: its assignee
// when it has one, otherwise everyone the roles name with its role or a
// higher one, and whom its escalations name; but not the requester where
// the rule forbids self-approval, nor whom a delegate decided on behalf of.
func stillToDecide(roles *policy.Roles, req *record.ApprovalRequest, g *record.Gate, decisions []record.DecisionRecord, escalations []record.EscalationRecord) []string {
	decided := decidedOn(req.ID, decisions)
	may := roles.Members(req.Role)
	if g.Assignee != "" {
		may = []string{g.Assignee}
	}
	may = append(slices.Clone(may), escalatedPeople(roles, req.ID, escalations)...)
	may = mayStillFill(roles, g, req.ID, decisions, escalations, may)
	var out []string
	for _, id := range may {
		if decided[id] || (id == req.RequesterID && !req.SelfApproval) || slices.Contains(out, id) {
			continue
		}
		out = append(out, id)
	}
	return out
}

// mergeRemind merges a rule's remind offsets into the gate's, longest
// first, each once.
func mergeRemind(have, more []record.Seconds) []record.Seconds {
	if len(more) == 0 {
		return have
	}
	out := append(slices.Clone(have), more...)
	slices.SortFunc(out, func(a, b record.Seconds) int { return int(b - a) })
	return slices.Compact(out)
}

// remindWithin keeps the offsets shorter than the merged approval's expiry
// (a stricter rule may have shortened it), and none without an approval.
func remindWithin(offsets []record.Seconds, a *record.ApprovalSpec) []record.Seconds {
	if a == nil {
		return nil
	}
	var out []record.Seconds
	for _, d := range offsets {
		if d < a.Expires {
			out = append(out, d)
		}
	}
	return out
}
