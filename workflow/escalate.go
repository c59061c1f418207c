package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// escalator widens who may decide a pending request as time passes since it
// was made (the gate's Escalate), and moves its deadline when a step says
// so. Each escalation is a transition of its own (EventEscalated, sealed and
// audited with the steps recorded in the state), written compare-and-set:
// two servers sweeping at once escalate once, and a restart applies the
// steps that fell due while it was down in one transition, each once.
type escalator struct {
	runs    *runtx.Runs
	store   storage.Store
	fail    func(string)
	log     *slog.Logger
	maxLife time.Duration
	// deputies names the delegates of the users a step names.
	deputies *deputyFinder
	// some is whether some rule escalates: without one there is no sweep.
	some bool

	sweep
}

func newEscalator(e *Engine) *escalator {
	some := false
	for _, r := range e.policy.Rules() {
		some = some || len(r.Escalate) > 0
	}
	return &escalator{runs: e.runs, store: e.store, fail: e.fail, log: e.log, maxLife: e.maxLife, deputies: &deputyFinder{in: e.in}, some: some}
}

// EscalateDue applies every escalation step that is due: for each waiting
// run whose pending request was made at least a step's After ago and has not
// had it, it records the step (who may decide from then on, and the deadline
// moved by its extend, within the request's lifetime). Steps that fell due
// together are applied in order in one transition. It returns how many runs
// it escalated.
func (e *Engine) EscalateDue(ctx context.Context) (int, error) {
	return e.escalations.due(ctx)
}

func (es *escalator) due(ctx context.Context) (int, error) {
	if !es.some {
		return 0, nil
	}
	now := es.runs.Now()
	runs, err := listRuns(ctx, es.store, storage.RunFilter{Statuses: []record.Status{record.StatusWaitingApproval}})
	if err != nil {
		return 0, fmt.Errorf("list waiting runs: %w", err)
	}
	return es.over(ctx, runs, now, es.escalate)
}

// escalate records the steps due of run id, if any are, in one transaction
// with its checkpoint and audit event, and reports whether it did.
func (es *escalator) escalate(ctx context.Context, id string) (bool, error) {
	done := false
	err := es.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		done = false
		l, err := es.runs.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		g, now := l.State.Gate, es.runs.Now()
		if l.Run.Status != record.StatusWaitingApproval || g == nil || g.RequestID == "" || len(g.Escalate) == 0 || !now.Before(l.Run.Deadline) {
			es.remember(id, now.Add(time.Hour)) // nothing to escalate now
			return nil
		}
		req, err := tx.Request(ctx, g.RequestID)
		if err != nil {
			return fmt.Errorf("load approval request of run %s: %w", id, err)
		}
		if req.Status != record.RequestPending {
			es.remember(id, now.Add(time.Hour))
			return nil
		}
		steps, next := dueSteps(g.Escalate, req, l.State.Escalations, now)
		if len(steps) == 0 {
			es.remember(id, next)
			return nil
		}
		deps, err := es.deputies.find(ctx, tx, now)
		if err != nil {
			return err
		}
		detail := es.apply(l, req, steps, deps, now)
		if err := tx.UpdateRequest(ctx, req); err != nil {
			return fmt.Errorf("update approval request %s: %w", req.ID, err)
		}
		if err := es.runs.Save(ctx, tx, l, record.StatusWaitingApproval, record.EventEscalated, "signoff", detail, req); err != nil {
			return err
		}
		done = true
		return nil
	})
	var ie *IntegrityError
	if errors.As(err, &ie) {
		return false, es.runs.Attention(ctx, id, ie.Error())
	}
	if err != nil {
		return false, fmt.Errorf("escalate run %s: %w", id, err)
	}
	if done {
		es.log.Info("run escalated", "run_id", id)
		es.fail("after-escalate")
	}
	return done, nil
}

// apply records the steps (indexes into the gate's Escalate, in order) and
// moves the deadline by their extends, never past the request's lifetime,
// and returns the audit detail. Each step names the delegates (deps) of
// the users it names, to be told with them.
func (es *escalator) apply(l *runtx.Loaded, req *record.ApprovalRequest, steps []int, deps map[string][]string, now time.Time) map[string]string {
	g := l.State.Gate
	var roles, users, idx []string
	for _, i := range steps {
		s := g.Escalate[i]
		rec := record.EscalationRecord{RequestID: req.ID, Step: i, At: now, Role: s.Role, Users: slices.Clone(s.Users)}
		decided := decidedOn(req.ID, l.State.Decisions)
		for _, u := range s.Users {
			for _, to := range deputiesFor(deps, u, req, decided) {
				rec.Deputies = append(rec.Deputies, record.Deputy{To: to, OnBehalfOf: u})
			}
		}
		if s.Extend > 0 {
			deadline := req.Deadline.Add(s.Extend.Duration())
			if limit := req.CreatedAt.Add(es.maxLife); deadline.After(limit) {
				deadline = limit
			}
			if deadline.After(req.Deadline) {
				rec.Extended = record.Seconds(deadline.Sub(req.Deadline) / time.Second)
				req.Deadline, l.Run.Deadline = deadline, deadline
				d := deadline
				g.Deadline = &d
				rec.Deadline = &d
			}
		}
		l.State.Escalations = append(l.State.Escalations, rec)
		idx = append(idx, strconv.Itoa(i))
		if s.Role != "" {
			roles = append(roles, s.Role)
		}
		users = append(users, s.Users...)
	}
	return map[string]string{"steps": strings.Join(idx, ","), "roles": strings.Join(roles, ","), "users": strings.Join(users, ","),
		"deadline": req.Deadline.Format(time.RFC3339)}
}

// dueSteps are the indexes of the steps due at now of req that it has not
// had, in order, and the earliest time a later one falls due.
func dueSteps(steps []record.EscalationStep, req *record.ApprovalRequest, done []record.EscalationRecord, now time.Time) ([]int, time.Time) {
	had := map[int]bool{}
	for _, r := range done {
		if r.RequestID == req.ID {
			had[r.Step] = true
		}
	}
	var due []int
	next := now.Add(time.Hour)
	for i, s := range steps {
		if had[i] {
			continue
		}
		at := req.CreatedAt.Add(s.After.Duration())
		if at.After(now) {
			next = minTime(next, at)
			continue
		}
		due = append(due, i)
	}
	return due, next
}

// escalatedTo reports whether the escalations of req let this person decide:
// they hold an escalated role or one above it, or are an escalated user.
func escalatedTo(roles *policy.Roles, escalations []record.EscalationRecord, reqID, who, role string, hasRole bool) bool {
	for _, e := range escalations {
		if e.RequestID != reqID {
			continue
		}
		if e.Role != "" && hasRole && roles.AtLeast(role, e.Role) {
			return true
		}
		if slices.Contains(e.Users, who) {
			return true
		}
	}
	return false
}

// escalateWithin keeps the steps sooner than the merged approval's expiry,
// and none without an approval.
func escalateWithin(steps []record.EscalationStep, a *record.ApprovalSpec) []record.EscalationStep {
	if a == nil {
		return nil
	}
	var out []record.EscalationStep
	for _, s := range steps {
		if s.After < a.Expires {
			out = append(out, s)
		}
	}
	return out
}

// escalatedPeople are the members of the roles (and those above) and the
// users that the escalations of request reqID name, in order.
func escalatedPeople(roles *policy.Roles, reqID string, escalations []record.EscalationRecord) []string {
	var out []string
	for _, e := range escalations {
		if e.RequestID != reqID {
			continue
		}
		if e.Role != "" {
			out = append(out, roles.Members(e.Role)...)
		}
		out = append(out, e.Users...)
	}
	return out
}
