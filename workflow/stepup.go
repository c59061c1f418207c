package workflow

import (
	"context"
	"slices"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/show"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// A step-up rule (confirm: web, or step_up: {max_age: …}) lets an approval
// count only when it is given on the web console by someone who signed in
// recently. Slack, the CLI and the other channels cannot prove a fresh
// sign-in, so an approval from them is recorded as unconfirmed
// (EventApprovalUnconfirmed, with who and via) and the run keeps waiting
// until the same person confirms on the run's page. Rejections need no
// step-up. The check is the engine's, so no channel can skip it.

// stepUpOf is the step-up max age of gate's approval (0: none).
func stepUpOf(g *record.Gate) record.Seconds {
	if g == nil || g.Approval == nil {
		return 0
	}
	return g.Approval.StepUp
}

// stricterStepUp is the step-up of two merged rules: the shorter positive
// max age, since both rules must hold.
func stricterStepUp(a, b record.Seconds) record.Seconds {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// stepUp applies the rule's step-up to an admitted approval. On the web it
// refuses a sign-in older than the rule's max age; elsewhere it records the
// approval as unconfirmed (once per person and request) and sets
// *unconfirmed to the refusal the caller is told, with done true: the
// transaction commits and nothing else is decided.
func (dc *decider) stepUp(ctx context.Context, tx storage.Tx, l *runtx.Loaded, req *record.ApprovalRequest, in DecideInput, role string, edit bool, unconfirmed **record.RefusedError) (done bool, err error) {
	maxAge := stepUpOf(l.State.Gate)
	if maxAge <= 0 || in.Verdict != record.VerdictApprove {
		return false, nil
	}
	id := l.Run.ID
	if in.Via == record.ViaWeb {
		return false, checkFresh(id, dc.runs.Now(), in.AuthTime, maxAge.Duration())
	}
	if edit {
		return false, refused(record.CodeConfirmOnWeb, id, "rule %s asks for approvals on the web console after a fresh sign-in: edit and approve on the run's page", req.Rule)
	}
	*unconfirmed = refused(record.CodeConfirmOnWeb, id, "rule %s asks for approvals confirmed on the web console: your approval via %s is recorded but does not count until you confirm it on the run's page after signing in (within %s)", req.Rule, in.Via, show.Duration(maxAge.Duration()))
	(*unconfirmed).RunStatus, (*unconfirmed).RequestStatus, (*unconfirmed).Fingerprint = l.Run.Status, req.Status, req.Fingerprint
	if slices.ContainsFunc(l.State.Unconfirmed, func(u record.DecisionRecord) bool { return u.RequestID == req.ID && u.By == in.Approver.ID }) {
		return true, nil // already recorded: a second click changes nothing
	}
	now := dc.runs.Now()
	u := record.DecisionRecord{RequestID: req.ID, By: in.Approver.ID, Role: role, Verdict: record.VerdictApprove, Reason: in.Reason, Via: in.Via, At: now, OnBehalfOf: in.deputy.onBehalfOf()}
	l.State.Unconfirmed = append(l.State.Unconfirmed, u)
	detail := map[string]string{"via": string(in.Via), "role": role, "request_id": req.ID, "max_age": show.Duration(maxAge.Duration())}
	if u.OnBehalfOf != "" {
		detail["on_behalf_of"] = u.OnBehalfOf
	}
	if err := dc.runs.Save(ctx, tx, l, l.Run.Status, record.EventApprovalUnconfirmed, in.Approver.ID, detail, req); err != nil {
		return false, err
	}
	return true, nil
}

// checkFresh refuses a web approval whose sign-in (at) is unknown, in the
// future or older than maxAge at now.
func checkFresh(runID string, now, at time.Time, maxAge time.Duration) error {
	switch {
	case at.IsZero():
		return refused(record.CodeSignInAgain, runID, "sign in again to confirm: when you signed in is not known, and this rule needs a sign-in within %s", show.Duration(maxAge))
	case at.After(now.Add(time.Minute)):
		return refused(record.CodeSignInAgain, runID, "sign in again to confirm: your sign-in time %s is in the future", at.UTC().Format(time.RFC3339))
	case now.Sub(at) > maxAge:
		return refused(record.CodeSignInAgain, runID, "sign in again to confirm: your sign-in is older than %s", show.Duration(maxAge))
	}
	return nil
}

// confirmed drops by's unconfirmed approval of request: their web approval
// stands for it now.
func confirmed(s *record.State, request, by string) {
	s.Unconfirmed = slices.DeleteFunc(s.Unconfirmed, func(u record.DecisionRecord) bool { return u.RequestID == request && u.By == by })
	if len(s.Unconfirmed) == 0 {
		s.Unconfirmed = nil
	}
}
