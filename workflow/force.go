package workflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// forcer admits a forced approval (break-glass): someone of the role a
// rule's break_glass names approves the pending request at once, whatever
// its quorum, with a justification. It reuses the decider's checks of the
// request, the deadline and the fingerprint; the requester may never force
// their own, whatever the rule says of self-approval. The transition is an
// audit event of its own (policy_bypassed) and the checkpoint remembers the
// force (record.ForceRecord) with when its review is due.
type forcer struct {
	dc      *decider
	reviews *reviewer
	fail    func(string)
}

// force is Decide for an input with Force set.
func (f *forcer) force(ctx context.Context, e *Engine, in DecideInput) (*record.Run, error) {
	actor := in.Approver.ID
	if err := validateForce(in); err != nil {
		return nil, e.runs.Refuse(ctx, actor, err)
	}
	role, hasRole, err := e.dir.RoleOf(ctx, actor)
	if err != nil {
		return nil, fmt.Errorf("resolve role of %s: %w", actor, err)
	}
	var run *record.Run
	err = f.dc.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		l, err := f.dc.runs.LoadWith(ctx, tx, in.RunID, storage.RunParts{Requests: true, Decisions: true})
		if err != nil {
			return err
		}
		req, err := f.admit(ctx, tx, l, in, role, hasRole)
		if err != nil {
			return err
		}
		if err := f.apply(ctx, tx, l, req, in, role); err != nil {
			return err
		}
		run = l.Run
		return nil
	})
	var r *record.RefusedError
	if errors.As(err, &r) && r.Code == record.CodeExpired {
		if xerr := f.dc.expire(ctx, in.RunID, actor); xerr != nil {
			return nil, errors.Join(r, xerr)
		}
	}
	if err := f.dc.outcome(ctx, in.RunID, actor, err); err != nil {
		var ie *IntegrityError
		if errors.As(err, &ie) {
			return nil, &record.RefusedError{Code: record.CodeIntegrity, RunID: in.RunID, Msg: "stored state failed its integrity check; the run needs attention: " + ie.Problem}
		}
		return nil, err
	}
	f.fail("after-force-commit")
	e.log.Warn("approval forced", "run_id", run.ID, "by", actor, "role", role, "via", string(in.Via), "status", string(run.Status))
	return run, nil
}

// validateForce is validateDecision for a forced approval: an approval,
// without edited arguments, with a justification.
func validateForce(in DecideInput) *record.RefusedError {
	switch {
	case in.Verdict != "" && in.Verdict != record.VerdictApprove:
		return refused(record.CodeInvalidInput, in.RunID, "only an approval can be forced")
	case strings.TrimSpace(in.Reason) == "":
		return refused(record.CodeInvalidInput, in.RunID, "forcing an approval needs a justification (the reason)")
	case len(in.Edit) > 0:
		return refused(record.CodeInvalidInput, in.RunID, "a forced approval cannot carry edited arguments")
	}
	in.Verdict = record.VerdictApprove
	return validateDecision(in)
}

// admit checks a forced approval: the request as any decision's, the
// deadline, the rule's break_glass and its role, the requester, the
// fingerprint, and the seals of the run's decisions.
func (f *forcer) admit(ctx context.Context, tx storage.Tx, l *runtx.Loaded, in DecideInput, role string, hasRole bool) (_ *record.ApprovalRequest, err error) {
	dc := f.dc
	var req *record.ApprovalRequest
	defer func() { describeRefusal(err, l.Run, req) }()
	if req, err = dc.requestDecided(ctx, tx, l, in); err != nil {
		return req, err
	}
	id := l.Run.ID
	if !dc.runs.Now().Before(req.Deadline) {
		return req, refused(record.CodeExpired, id, "the deadline passed at %s; the run has expired", req.Deadline.Format(time.RFC3339))
	}
	bg := l.State.Gate.BreakGlass
	switch {
	case bg == nil:
		return req, refused(record.CodeNoBreakGlass, id, "rule %s has no break_glass: its approval cannot be forced", req.Rule)
	case stepUpOf(l.State.Gate) > 0:
		// A forced approval would skip the fresh sign-in the rule asks for.
		return req, refused(record.CodeConfirmOnWeb, id, "rule %s asks for approvals confirmed on the web console after a fresh sign-in: it cannot be forced", req.Rule)
	case !hasRole:
		return req, refused(record.CodeNoRole, id, "%s holds no role; forcing this needs %s or above", in.Approver.ID, bg.Role)
	case !dc.roles.AtLeast(role, bg.Role):
		return req, refused(record.CodeNoRole, id, "%s is %s; forcing this needs %s or above", in.Approver.ID, role, bg.Role)
	case in.Approver.ID == req.RequesterID:
		return req, refused(record.CodeSelfApproval, id, "%s asked for this action and may not force its approval", in.Approver.ID)
	}
	if err := dc.checkFingerprint(l, req, in); err != nil {
		return req, err
	}
	if _, err := dc.priorDecisions(ctx, tx, l, req, in); err != nil {
		return req, err
	}
	return req, nil
}

// apply approves req at once and moves the run to executing (or scheduled,
// outside its window: see scheduler.approve), remembering
// the force and when its review is due.
func (f *forcer) apply(ctx context.Context, tx storage.Tx, l *runtx.Loaded, req *record.ApprovalRequest, in DecideInput, role string) error {
	dc := f.dc
	now := dc.runs.Now()
	d := &record.Decision{
		RequestID: req.ID, RunID: l.Run.ID, ApproverID: in.Approver.ID, ApproverName: in.Approver.Name,
		Role: role, Verdict: record.VerdictApprove, Reason: in.Reason, Via: in.Via, PayloadDigest: in.PayloadDigest, At: now,
	}
	if err := dc.insertDecision(ctx, tx, l, d); err != nil {
		return err
	}
	req.Status, req.DecidedBy, req.DecidedAt = record.RequestApproved, in.Approver.ID, now
	if err := tx.UpdateRequest(ctx, req); err != nil {
		return fmt.Errorf("update approval request %s: %w", req.ID, err)
	}
	bg := l.State.Gate.BreakGlass
	fr := &record.ForceRecord{
		RequestID: req.ID, By: in.Approver.ID, Role: role, Reason: in.Reason, Via: in.Via, At: now,
		ReviewRole: bg.Review.Role, ReviewDue: now.Add(bg.Review.Within.Duration()),
	}
	l.State.Forced = fr
	if err := f.reviews.open(ctx, tx, req, fr); err != nil {
		return err
	}
	from := l.Run.Status
	sched := dc.windows.approve(l)
	return dc.runs.SaveWith(ctx, tx, l, from, record.EventPolicyBypassed, in.Approver.ID, map[string]string{
		"reason": in.Reason, "role": role, "via": string(in.Via), "request_id": req.ID,
		"break_glass_role": bg.Role, "review_role": fr.ReviewRole, "review_due": fr.ReviewDue.Format(time.RFC3339),
	}, req, runtx.Also{Then: sched.then()})
}

// mergeBreakGlass is the break_glass of a proposal whose actions matched
// several rules: only when every rule that needs approval offers one may
// the merged approval be forced, by the highest of their roles, reviewed by
// the highest of their reviewers within the shortest of their times.
func mergeBreakGlass(roles *policy.Roles, merged *record.BreakGlass, first bool, next *record.BreakGlass) *record.BreakGlass {
	if first {
		if next == nil {
			return nil
		}
		c := *next
		return &c
	}
	if merged == nil || next == nil {
		return nil
	}
	if roles.AtLeast(next.Role, merged.Role) {
		merged.Role = next.Role
	}
	if roles.AtLeast(next.Review.Role, merged.Review.Role) {
		merged.Review.Role = next.Review.Role
	}
	merged.Review.Within = min(merged.Review.Within, next.Review.Within)
	return merged
}
