package workflow

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// gatekeeper decides what happens to a proposal: it runs the actions'
// read-only checks, asks policy which rule applies, and either lets the run
// execute or makes the approval request it waits on. Its dependencies are
// explicit; it holds no run between calls.
type gatekeeper struct {
	runs    *runtx.Runs
	policy  *policy.Policy
	roles   *policy.Roles
	dir     Directory
	actions map[string]*ActionSpec
	clock   Clock
	checkN  int
	backoff func(int) time.Duration
	// windows says whether a run that needs no approval executes now or
	// waits for its window.
	windows *scheduler
}

// propose runs the checks (read-only, in parallel, joined once) and the policy
// over a proposal and records the outcome: failed, executing, or
// waiting_approval with an approval request. from is "" for a new run.
func (gk *gatekeeper) propose(ctx context.Context, l *runtx.Loaded, from record.Status, actor string) error {
	st := l.State
	if len(st.Actions) == 0 {
		l.Run.Status, l.Run.Reason = record.StatusDone, "nothing to do: the proposal has no actions"
		return gk.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
			return gk.runs.Save(ctx, tx, l, from, record.EventFinished, actor, map[string]string{"reason": l.Run.Reason}, nil)
		})
	}
	event := record.EventSubmitted
	if from != "" {
		event = record.EventProposed
		actions, evidence, err := gk.normalise(st.Actions, st.Evidence)
		if err != nil {
			l.Run.Status, l.Run.Reason = record.StatusFailed, "invalid proposal: "+err.Error()
			return gk.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
				return gk.runs.Save(ctx, tx, l, from, record.EventFailed, actor, map[string]string{"reason": l.Run.Reason}, nil)
			})
		}
		st.Actions, st.Evidence = actions, evidence
	}
	st.Checks = gk.runChecks(ctx, st.Actions)
	for _, c := range st.Checks {
		if !c.OK {
			l.Run.Status = record.StatusFailed
			l.Run.Reason = fmt.Sprintf("check failed for action %d (%s): %s", c.Action+1, c.Name, c.Error)
			return gk.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
				return gk.runs.Save(ctx, tx, l, from, record.EventFailed, actor, map[string]string{"reason": l.Run.Reason}, nil)
			})
		}
	}
	gate, err := gk.gate(ctx, st)
	if err != nil {
		l.Run.Status, l.Run.Reason = record.StatusNeedsAttention, "policy could not decide: "+err.Error()
		return gk.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
			return gk.runs.Save(ctx, tx, l, from, record.EventNeedsAttention, actor, map[string]string{"reason": l.Run.Reason}, nil)
		})
	}
	st.Gate = gate
	l.Run.Fingerprint = gate.Fingerprint
	var req *record.ApprovalRequest
	var sched *scheduling
	if gate.Approval == nil {
		sched = gk.windows.approve(l)
	} else {
		l.Run.Status = record.StatusWaitingApproval
		l.Run.Deadline = *gate.Deadline
		req = gk.newRequest(l, gate)
	}
	return gk.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
		return gk.runs.SaveWith(ctx, tx, l, from, event, actor, map[string]any{
			"status": l.Run.Status, "rule": gate.Rule, "risk": gate.Risk, "fingerprint": gate.Fingerprint,
		}, req, runtx.Also{Then: sched.then()})
	})
}

func (gk *gatekeeper) newRequest(l *runtx.Loaded, g *record.Gate) *record.ApprovalRequest {
	return &record.ApprovalRequest{
		ID: g.RequestID, RunID: l.Run.ID, Fingerprint: g.Fingerprint, Rule: g.Rule,
		PolicyRevision: g.PolicyRevision, Risk: g.Risk, Role: g.Approval.Role, Count: g.Approval.Count,
		SelfApproval: g.Approval.SelfApproval, Edit: g.Approval.Edit, RequesterID: l.State.Requester.ID,
		Deadline: *g.Deadline, Status: record.RequestPending, CreatedAt: gk.runs.Now(),
	}
}

// gate applies policy to every action; the strictest outcome binds the proposal.
func (gk *gatekeeper) gate(ctx context.Context, st *record.State) (*record.Gate, error) {
	g, _, _, err := gk.outcomes(ctx, st)
	if err != nil {
		return nil, err
	}
	if st.ForkedFrom != nil && g.Approval == nil {
		// A fork repeats what its source proposed, under a new idempotency key:
		// it always needs a person, and fails closed to the highest role.
		names := gk.roles.Names()
		g.Approval = &record.ApprovalSpec{Role: names[len(names)-1], Count: 1, Expires: record.Seconds(72 * 3600)}
		g.Rule += " (fork of " + st.ForkedFrom.RunID + ")"
	}
	fp, err := gk.runs.FingerprintOf(st, g.Risk, g.PolicyRevision)
	if err != nil {
		return nil, err
	}
	g.Fingerprint = fp
	if g.Approval != nil {
		d := gk.runs.Now().Add(g.Approval.Expires.Duration())
		g.Deadline = &d
		g.RequestID = gk.runs.NewID("req_")
	}
	return g, nil
}

// outcomes applies policy to every action and merges the outcomes into the
// proposal's gate (rule, risk, approval and who is notified only); it also
// returns each action's outcome and the requester's role.
func (gk *gatekeeper) outcomes(ctx context.Context, st *record.State) (*record.Gate, []policy.Outcome, string, error) {
	g := &record.Gate{PolicyRevision: gk.policy.Revision(), Risk: record.RiskLow}
	var rules []string
	role, _, err := gk.dir.RoleOf(ctx, st.Requester.ID)
	if err != nil {
		return nil, nil, "", fmt.Errorf("resolve the requester's role: %w", err)
	}
	outs := make([]policy.Outcome, 0, len(st.Actions))
	for i, a := range st.Actions {
		// A state's evidence is normalise's output (Submit, propose and
		// Explain normalise a proposal before this; an edit keeps it).
		out, err := gk.policy.Evaluate(ctx, policy.Input{Action: a, Index: i, Evidence: st.Evidence, EvidenceCanonical: true,
			Requester: st.Requester, RequesterRole: role, TaskID: st.TaskID})
		if err != nil {
			return nil, nil, "", fmt.Errorf("action %d (%s): %w", i+1, a.Name, err)
		}
		outs = append(outs, out)
		for _, to := range out.Notify {
			g.Notify = appendUnique(g.Notify, to)
		}
		g.Remind = mergeRemind(g.Remind, out.Remind)
		if len(g.Escalate) == 0 {
			// The first rule that escalates says how: steps of two rules do
			// not interleave.
			g.Escalate = out.Escalate
		}
		if g.Window == nil {
			g.Window = out.Window // the first rule with a window says when
		}
		if out.Risk.Rank() > g.Risk.Rank() {
			g.Risk = out.Risk
		}
		if out.Approval == nil {
			if g.Approval == nil && len(rules) == 0 {
				g.Rule = out.Rule
			}
			continue
		}
		rules = appendUnique(rules, out.Rule)
		g.BreakGlass = mergeBreakGlass(gk.roles, g.BreakGlass, g.Approval == nil, out.BreakGlass)
		if g.Approval == nil {
			a := *out.Approval
			g.Approval = &a
			continue
		}
		merged, prev := g.Approval, *g.Approval
		if gk.roles.AtLeast(out.Approval.Role, merged.Role) {
			merged.Role = out.Approval.Role
		}
		merged.Count = max(merged.Count, out.Approval.Count)
		merged.Expires = min(merged.Expires, out.Approval.Expires)
		merged.SelfApproval = merged.SelfApproval && out.Approval.SelfApproval
		merged.Edit = merged.Edit && out.Approval.Edit
		merged.StepUp = stricterStepUp(merged.StepUp, out.Approval.StepUp)
		mergeRequirement(merged, prev, out.Approval, gk.roles)
	}
	if len(rules) > 0 {
		g.Rule = joinComma(rules)
	}
	g.Remind = remindWithin(g.Remind, g.Approval)
	g.Escalate = escalateWithin(g.Escalate, g.Approval)
	return g, outs, role, nil
}

func appendUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}

// runChecks runs every action's read-only check in parallel and joins them once.
// The goroutines write only their own slot; the results are read after Wait.
func (gk *gatekeeper) runChecks(ctx context.Context, actions []record.Action) []record.Check {
	out := make([]record.Check, len(actions))
	var wg sync.WaitGroup
	for i, a := range actions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = gk.check(ctx, i, a)
		}()
	}
	wg.Wait()
	return out
}

func (gk *gatekeeper) check(ctx context.Context, i int, a record.Action) record.Check {
	c := record.Check{Action: i, Name: a.Name}
	spec := gk.actions[a.Name]
	for c.Attempts = 1; ; c.Attempts++ {
		err := spec.Executor.Check(ctx, a)
		if err == nil {
			c.OK = true
			return c
		}
		c.Error = err.Error()
		// A check only reads, so anything but a refusal may be retried.
		if Classify(err) == ClassPermanent || c.Attempts >= gk.checkN || isCtxErr(err) {
			return c
		}
		if err := gk.clock.Sleep(ctx, gk.backoff(c.Attempts)); err != nil {
			c.Error = err.Error()
			return c
		}
	}
}
