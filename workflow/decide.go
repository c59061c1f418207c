package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
	"github.com/signoff-dev/signoff/workflow/internal/seal"
)

// decider admits a person's decision on a waiting run: it checks the
// request and fingerprint the decision names, who decides (role, no
// self-approval, deadline), records the vote and, when quorum is reached or
// someone rejects, moves the run on. An edit is checked as a new proposal.
// Its dependencies are explicit; it holds no run between calls.
type decider struct {
	runs   *runtx.Runs
	gates  *gatekeeper
	store  storage.Store
	in     *seal.Sealer
	policy *policy.Policy
	roles  *policy.Roles
	fail   func(string)
	// windows says whether an approved run executes or waits for its window.
	windows *scheduler
}

// DecideInput is one person's decision on a waiting run, from any channel.
type DecideInput struct {
	RunID string
	// RequestID and Fingerprint are what the approver was shown (a Slack button
	// carries both). Empty means "the current request", as on the CLI after `show`.
	RequestID   string
	Fingerprint string
	Approver    record.Person
	Verdict     record.Verdict
	Reason      string
	// Edit, when set, replaces the arguments of action EditIndex (0-based) before
	// approving: they are validated, checked, re-fingerprinted and run through
	// policy again.
	Edit          json.RawMessage
	EditIndex     int
	Via           record.Via
	PayloadDigest string
	// deputy is what delegations to Approver let them do (delegate.go).
	deputy *deputy
	// Force approves at once, whatever the quorum, when the approver holds
	// the role of the rule's break_glass; Reason is then the justification
	// (required). See forcer.
	Force bool
	// AuthTime is when the approver last proved who they are: the web
	// console's sign-in. An approval of a step-up rule counts only with
	// Via web and an AuthTime recent enough (see stepup.go).
	AuthTime time.Time
	// Claim, when set, is the request that carried the decision (a signed
	// Slack request, see Replays) with the answer it gets. It is claimed in
	// the transaction that records the decision, or the refusal, so that the
	// request costs one commit; a copy of a request claimed before decides
	// nothing and gets a *ReplayedError.
	Claim *record.SeenRequest
	// claim is Claim's progress through one Decide.
	claim *claim
}

// Decide records a decision by compare-and-set. It refuses (changing nothing but
// the audit log) a person without the role, a requester approving their own
// action where the rule forbids it, a stale fingerprint, a run that is no longer
// waiting, and a decision after the deadline (which ends the run as expired).
// A decision that completes the quorum leaves the run executing (call Resume to
// run the actions), or scheduled when its execution window is closed.
func (e *Engine) Decide(ctx context.Context, in DecideInput) (*record.Run, error) {
	if in.Claim == nil {
		return e.decide(ctx, in)
	}
	in.claim = &claim{req: in.Claim}
	run, err := e.decide(ctx, in)
	var replayed *ReplayedError
	if in.claim.committed || errors.As(err, &replayed) {
		return run, err
	}
	// Nothing Decide wrote took the claim (an internal failure, an integrity
	// problem, a forced approval): it is taken alone, so that a copy is
	// answered as this request was and decides nothing.
	if cerr := e.Replays().claimAlone(ctx, in.claim); cerr != nil {
		return nil, errors.Join(err, cerr)
	}
	return run, err
}

func (e *Engine) decide(ctx context.Context, in DecideInput) (*record.Run, error) {
	if in.Force {
		return e.forces.force(ctx, e, in)
	}
	actor := in.Approver.ID
	if err := validateDecision(in); err != nil {
		return nil, e.refuse(ctx, in, err)
	}
	role, hasRole, err := e.dir.RoleOf(ctx, actor)
	if err != nil {
		return nil, fmt.Errorf("resolve role of %s: %w", actor, err)
	}
	var edit *preparedEdit
	if len(in.Edit) > 0 {
		if edit, err = e.decisions.prepareEdit(ctx, in); err != nil {
			var r *record.RefusedError
			if errors.As(err, &r) {
				return nil, e.refuse(ctx, in, r)
			}
			return nil, err
		}
	}
	// The chain and its seals are verified before the write, so that the
	// write transaction (shared by concurrent Updates) only checks that the
	// run is unchanged since. A run that fails here is loaded again inside,
	// which names its problem as before.
	var pre *runtx.Loaded
	if err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		// Reserve: the decision's events follow the head read here.
		l, err := e.runs.LoadOnce(ctx, tx, in.RunID, storage.RunParts{Requests: true, Decisions: true, Reserve: true})
		if err == nil {
			// Read from the store as it stands: as good as a committed write.
			l.MarkStored()
			pre = l
			if l.State.Gate != nil {
				// Outside the write, which only has to look it up (an error
				// is met again inside, where it is reported).
				_, _ = e.runs.Fingerprint(l, l.State.Gate.Risk, e.policy.Revision())
			}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("decide run %s: %w", in.RunID, err)
	}
	if e.decisions.needsDeputy(pre, in, role, hasRole) {
		if in.deputy, err = e.delegations.deputyOf(ctx, actor); err != nil {
			return nil, fmt.Errorf("find delegations to %s: %w", actor, err)
		}
	}
	// Once: every writer of a run locks its row before it reads the rest
	// (SQLite has one writer), and where a message was posted is a record of
	// its own, so a decision loses a compare-and-set only to something that
	// should not happen; that is a conflict to report, not to retry.
	var run *record.Run
	var unconfirmed *record.RefusedError
	err = e.decisions.decideOnce(ctx, in, role, hasRole, edit, pre, true, &run, &unconfirmed)
	if errors.Is(err, storage.ErrConflict) && pre != nil {
		// The run was written between the read and the write, which decided
		// on the run as read: decide on it as it now stands, read under its
		// lock, as any writer that finds it changed does.
		run, unconfirmed = nil, nil
		err = e.decisions.decideOnce(ctx, in, role, hasRole, edit, nil, false, &run, &unconfirmed)
	}
	if err == nil && unconfirmed != nil {
		// Recorded as its own event: not a refusal to audit again.
		e.fail("after-unconfirmed-commit")
		e.log.Info("approval waits for its confirmation on the web", "run_id", in.RunID, "approver", actor, "via", string(in.Via))
		return nil, unconfirmed
	}
	var r *record.RefusedError
	var ie *IntegrityError
	var replayed *ReplayedError
	switch {
	case errors.As(err, &replayed):
		e.log.Info("decision not taken again: its request was claimed before", "run_id", in.RunID, "approver", actor, "via", string(in.Via))
		return nil, replayed
	case errors.As(err, &r):
		if r.Code == record.CodeExpired {
			if xerr := e.decisions.expire(ctx, in.RunID, actor); xerr != nil {
				return nil, errors.Join(r, xerr)
			}
		}
		return nil, e.refuse(ctx, in, r)
	case errors.As(err, &ie):
		if aerr := e.runs.Attention(ctx, in.RunID, ie.Error()); aerr != nil {
			return nil, errors.Join(err, aerr)
		}
		return nil, &record.RefusedError{Code: record.CodeIntegrity, RunID: in.RunID, Msg: "stored state failed its integrity check; the run needs attention: " + ie.Problem}
	case err != nil:
		return nil, fmt.Errorf("decide run %s: %w", in.RunID, err)
	}
	e.fail("after-decision-commit")
	e.log.Info("decision recorded", "run_id", run.ID, "approver", actor, "verdict", string(in.Verdict), "via", string(in.Via), "status", string(run.Status))
	return run, nil
}

// decideOnce admits and records the decision in one transaction. With
// trust, it decides on pre as read, without reading the run again: the
// write's compare-and-set on the run's version is what proves nobody wrote
// the run since, and a run written since fails it with storage.ErrConflict.
// Otherwise the run is read under its lock first (LoadHeld).
func (dc *decider) decideOnce(ctx context.Context, in DecideInput, role string, hasRole bool, edit *preparedEdit, pre *runtx.Loaded, trust bool, out **record.Run, unconfirmed **record.RefusedError) error {
	parts := storage.RunParts{Requests: true, Decisions: true}
	var written *runtx.Loaded
	err := dc.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		written = nil
		// The claim comes first: a copy of the request decides nothing.
		if err := in.claim.take(ctx, tx); err != nil {
			return err
		}
		var l *runtx.Loaded
		if trust {
			l = dc.runs.Trust(pre, parts)
		}
		if l == nil {
			var err error
			if l, err = dc.runs.LoadHeld(ctx, tx, in.RunID, pre, parts); err != nil {
				return err
			}
		}
		req, decs, err := dc.admit(ctx, tx, l, in, role, hasRole)
		if err != nil {
			return err
		}
		if err := in.deputy.confirm(ctx, tx, dc.in, dc.runs.Now(), l.Run.ID); err != nil {
			return err
		}
		if done, err := dc.stepUp(ctx, tx, l, req, in, in.deputy.roleOr(role), edit != nil, unconfirmed); done || err != nil {
			return err
		}
		if edit != nil {
			err = dc.applyEdit(ctx, tx, l, req, in, role, edit)
		} else {
			err = dc.apply(ctx, tx, l, req, decs, in, in.deputy.roleOr(role))
		}
		if err != nil {
			return err
		}
		*out = l.Run
		written = l
		dc.fail("before-decision-commit")
		return nil
	})
	in.claim.commit(err)
	if err == nil && *unconfirmed == nil {
		// An approval hands the run on to a worker, here as a rule.
		dc.runs.HandOn(written)
	}
	return err
}

func validateDecision(in DecideInput) *record.RefusedError {
	switch {
	case in.Approver.ID == "":
		return refused(record.CodeInvalidInput, in.RunID, "who decides is required")
	case in.RunID == "":
		return refused(record.CodeInvalidInput, "", "a run id is required")
	case in.Verdict != record.VerdictApprove && in.Verdict != record.VerdictReject:
		return refused(record.CodeInvalidInput, in.RunID, "unknown decision %q (approve or reject)", in.Verdict)
	case in.Verdict == record.VerdictReject && in.Reason == "":
		return refused(record.CodeInvalidInput, in.RunID, "a rejection needs a reason")
	case len(in.Edit) > 0 && in.Verdict != record.VerdictApprove:
		return refused(record.CodeInvalidInput, in.RunID, "only an approval can carry edited arguments")
	case in.Via == "":
		return refused(record.CodeInvalidInput, in.RunID, "the channel of the decision (via) is required")
	}
	if field := badText(map[string]string{"run id": in.RunID, "who": in.Approver.ID, "name": in.Approver.Name, "reason": in.Reason,
		"request id": in.RequestID, "fingerprint": in.Fingerprint, "via": string(in.Via)}); field != "" {
		return refused(record.CodeInvalidInput, in.RunID, "the %s must be valid UTF-8 text without NUL characters", field)
	}
	if bad := checkLines([]lineField{{"who", in.Approver.ID, true}, {"name", in.Approver.Name, false}}); bad != nil {
		bad.RunID = in.RunID
		return bad
	}
	return nil
}

// requestOf is approval request id: from what was loaded with the run when
// it is there, else read (a request of another run, named by a stale button,
// or a run loaded without its requests).
func (dc *decider) requestOf(ctx context.Context, tx storage.Tx, l *runtx.Loaded, id string) (*record.ApprovalRequest, error) {
	if l.Read.Requests {
		for _, r := range l.More.Requests {
			if r.ID == id {
				return r, nil
			}
		}
	}
	return tx.Request(ctx, id)
}

// admit checks everything a decision must satisfy and returns the request it
// decides. It is the one check of a decision, wherever it comes from: a
// refusal carries what admit found (see RefusedError), so that nobody needs
// to check again or read the run again to say why.
// It also returns the run's decisions as it read them.
func (dc *decider) admit(ctx context.Context, tx storage.Tx, l *runtx.Loaded, in DecideInput, role string, hasRole bool) (_ *record.ApprovalRequest, decs []*record.Decision, err error) {
	var req *record.ApprovalRequest
	defer func() { describeRefusal(err, l.Run, req) }()
	if req, err = dc.requestDecided(ctx, tx, l, in); err != nil {
		return req, nil, err
	}
	if err := dc.checkDecider(l, req, in, role, hasRole); err != nil {
		return nil, nil, err
	}
	if err := dc.checkFingerprint(l, req, in); err != nil {
		return nil, nil, err
	}
	if len(in.Edit) > 0 && !req.Edit {
		return nil, nil, refused(record.CodeEditNotAllowed, l.Run.ID, "rule %s does not allow editing the arguments", req.Rule)
	}
	if decs, err = dc.priorDecisions(ctx, tx, l, req, in); err != nil {
		return nil, nil, err
	}
	// A place is filled as the one the decision is made for: the delegator,
	// with their role, when it is made on their behalf.
	as := in
	if from := in.deputy.onBehalfOf(); from != "" {
		as.Approver, role, hasRole = record.Person{ID: from}, in.deputy.roleOr(role), true
	}
	if err := dc.checkOpenLeaf(l, req, as, role, hasRole); err != nil {
		return nil, nil, err
	}
	return req, decs, nil
}

// describeRefusal adds to a refused decision what the engine found: the
// run's status and, unless the request named is another run's, the
// request's status and fingerprint.
func describeRefusal(err error, run *record.Run, req *record.ApprovalRequest) {
	var r *record.RefusedError
	if !errors.As(err, &r) {
		return
	}
	r.RunStatus = run.Status
	if req != nil && r.Button != record.ButtonOtherRun {
		if r.RequestStatus == "" {
			r.RequestStatus = req.Status
		}
		if r.Fingerprint == "" {
			r.Fingerprint = req.Fingerprint
		}
	}
}

// requestDecided is the approval request a decision acts on: the one a
// button names (checked by buttonRequest), or the one the run waits on,
// which must still be pending.
func (dc *decider) requestDecided(ctx context.Context, tx storage.Tx, l *runtx.Loaded, in DecideInput) (*record.ApprovalRequest, error) {
	id := l.Run.ID
	if in.RequestID != "" {
		return dc.buttonRequest(ctx, tx, l, in)
	}
	if l.State.Gate == nil || l.State.Gate.RequestID == "" {
		return nil, refused(record.CodeNotWaiting, id, "the run is %s and waits for no approval", l.Run.Status)
	}
	req, err := dc.requestOf(ctx, tx, l, l.State.Gate.RequestID)
	if err != nil {
		return nil, fmt.Errorf("load approval request of run %s: %w", id, err)
	}
	if req.Status != record.RequestPending {
		return req, alreadyDecided(id, req.Status, req.DecidedBy, req.DecidedAt)
	}
	if l.Run.Status != record.StatusWaitingApproval {
		return req, refused(record.CodeNotWaiting, id, "the run is %s", l.Run.Status)
	}
	return req, nil
}

// checkDecider refuses a decision made after the deadline, or by someone
// who may not decide: no role, too low a role, not the assignee (nor above
// the role), or the requester when the rule forbids approving one's own.
func (dc *decider) checkDecider(l *runtx.Loaded, req *record.ApprovalRequest, in DecideInput, role string, hasRole bool) error {
	id := l.Run.ID
	if !dc.runs.Now().Before(req.Deadline) {
		return refused(record.CodeExpired, id, "the deadline passed at %s; the run has expired", req.Deadline.Format(time.RFC3339))
	}
	// An escalation widens who may decide, never narrows it: whoever the
	// rule lets in still is; the self-approval ban below holds for all.
	if err := dc.mayDecide(l, req, in, role, hasRole); err != nil {
		if err := dc.onBehalf(l, req, in, err); err != nil {
			return err
		}
	}
	if in.Approver.ID == req.RequesterID && !req.SelfApproval {
		return refused(record.CodeSelfApproval, id, "%s asked for this action and rule %s forbids approving one's own request", in.Approver.ID, req.Rule)
	}
	return nil
}

// mayDecide refuses someone the request does not let decide in their own
// right: by its composite requirement, or by its role and assignee, either
// widened by an escalation.
func (dc *decider) mayDecide(l *runtx.Loaded, req *record.ApprovalRequest, in DecideInput, role string, hasRole bool) error {
	if r := requirementOf(l.State.Gate); r != nil {
		return dc.checkLeaf(l, r, req, in, role, hasRole)
	}
	if err := dc.checkRole(l, req, in, role, hasRole); err != nil && !escalatedTo(dc.roles, l.State.Escalations, req.ID, in.Approver.ID, role, hasRole) {
		return err
	}
	return nil
}

// checkRole refuses someone the rule does not let decide: no role, too low
// a role, or not the assignee (nor above the role).
func (dc *decider) checkRole(l *runtx.Loaded, req *record.ApprovalRequest, in DecideInput, role string, hasRole bool) error {
	id := l.Run.ID
	if !hasRole {
		return refused(record.CodeNoRole, id, "%s holds no role; this needs %s or above", in.Approver.ID, req.Role)
	}
	if !dc.roles.AtLeast(role, req.Role) {
		return refused(record.CodeNoRole, id, "%s is %s; this needs %s or above", in.Approver.ID, role, req.Role)
	}
	if a := l.State.Gate.Assignee; a != "" && a != in.Approver.ID && !dc.roles.Above(role, req.Role) {
		return refused(record.CodeNoRole, id, "the request is assigned to %s; only they or someone above %s may decide", a, req.Role)
	}
	return nil
}

// checkFingerprint refuses a decision on a proposal that no longer matches
// the fingerprint approval was requested for, or that names another one.
func (dc *decider) checkFingerprint(l *runtx.Loaded, req *record.ApprovalRequest, in DecideInput) error {
	id := l.Run.ID
	fp, err := dc.runs.Fingerprint(l, req.Risk, dc.policy.Revision())
	if err != nil {
		return &IntegrityError{RunID: id, Problem: err.Error()}
	}
	if fp != req.Fingerprint {
		if dc.policy.Revision() != req.PolicyRevision {
			return refused(record.CodeStaleFingerprint, id, "the policy changed since approval was requested (revision %s, now %s): this request can no longer be approved; fork the run for a new one", req.PolicyRevision, dc.policy.Revision())
		}
		return refused(record.CodeStaleFingerprint, id, "the stored proposal no longer matches the fingerprint %s that approval was requested for", policy.ShortFingerprint(req.Fingerprint))
	}
	if in.Fingerprint != "" {
		switch ok, short := policy.FingerprintGiven(in.Fingerprint, req.Fingerprint); {
		case short:
			return refused(record.CodeStaleFingerprint, id, "the fingerprint %s is too short to bind an approval: give at least its first %d characters, as `signoff show` prints them", in.Fingerprint, policy.ShortFingerprintLen)
		case !ok:
			given, current := policy.DistinctFingerprints(strings.ToLower(strings.TrimSpace(in.Fingerprint)), req.Fingerprint)
			return refused(record.CodeStaleFingerprint, id, "the fingerprint you approved (%s) is not the current one (%s)", given, current)
		}
	}
	return nil
}

// priorDecisions are the run's decisions, as read with it or read now, with
// their seals checked; a second vote of the same person is refused.
func (dc *decider) priorDecisions(ctx context.Context, tx storage.Tx, l *runtx.Loaded, req *record.ApprovalRequest, in DecideInput) ([]*record.Decision, error) {
	id := l.Run.ID
	decs := l.More.Decisions
	if !l.Read.Decisions {
		var err error
		if decs, err = tx.Decisions(ctx, id); err != nil {
			return nil, fmt.Errorf("load decisions of run %s: %w", id, err)
		}
	}
	if err := dc.in.CheckRun(ctx, tx, id, nil, []*record.ApprovalRequest{req}, decs, nil); err != nil {
		return nil, err
	}
	for _, d := range decs {
		if d.RequestID == req.ID && (d.ApproverID == in.Approver.ID || voter(d) == in.deputy.principal(in.Approver.ID)) {
			r := refused(record.CodeAlreadyVoted, id, "%s already decided (%s at %s)", d.ApproverID, d.Verdict, d.At.Format(time.RFC3339))
			r.By, r.At = d.ApproverID, d.At
			return nil, r
		}
	}
	return decs, nil
}

// buttonRequest checks a decision that names its request and fingerprint (a
// Slack button) with checkButton, on the request as stored. It returns the
// request.
func (dc *decider) buttonRequest(ctx context.Context, tx storage.Tx, l *runtx.Loaded, in DecideInput) (*record.ApprovalRequest, error) {
	id := l.Run.ID
	req, err := dc.requestOf(ctx, tx, l, in.RequestID)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("load approval request %s of run %s: %w", in.RequestID, id, err)
	}
	gate := ""
	if l.State.Gate != nil {
		gate = l.State.Gate.RequestID
	}
	var named *buttonRequest
	if req != nil {
		named = &buttonRequest{ID: req.ID, RunID: req.RunID, Status: req.Status, Fingerprint: req.Fingerprint, DecidedBy: req.DecidedBy, DecidedAt: req.DecidedAt}
	}
	if r := checkButton(id, l.Run.Status, gate, "", in.RequestID, in.Fingerprint, named); r != nil {
		return req, r
	}
	return req, nil
}

// buttonRequest is what checking a button needs of the request it names.
type buttonRequest struct {
	ID, RunID, Fingerprint string
	Status                 record.RequestStatus
	DecidedBy              string
	DecidedAt              time.Time
}

// checkButton is the check of a button (a request id and a fingerprint) on
// the run it names, in the order a person reading that message needs: is it
// this run's request (req nil: none with that id), for this fingerprint,
// still the current one, still pending, on a run whose state is sound
// (problem "") and still waiting. Decide and CheckButton both use it.
func checkButton(runID string, status record.Status, gateRequest, problem, requestID, fingerprint string, req *buttonRequest) *record.RefusedError {
	button := func(p record.ButtonProblem, format string, args ...any) *record.RefusedError {
		r := refused(record.CodeStaleFingerprint, runID, format, args...)
		r.Button, r.RunStatus = p, status
		if req != nil {
			r.RequestStatus, r.Fingerprint = req.Status, req.Fingerprint
		}
		return r
	}
	switch {
	case req == nil || req.RunID != runID:
		r := button(record.ButtonOtherRun, "approval request %s is not one of this run's", requestID)
		r.RequestStatus, r.Fingerprint = "", ""
		return r
	case fingerprint != req.Fingerprint:
		given, current := policy.DistinctFingerprints(fingerprint, req.Fingerprint)
		return button(record.ButtonFingerprint, "the fingerprint you approved (%s) is not the current one (%s)", given, current)
	case req.Status == record.RequestSuperseded:
		return button(record.ButtonSuperseded, "this approval request was replaced by a newer one after an edit; decide on the current message")
	case req.Status != record.RequestPending:
		r := alreadyDecided(runID, req.Status, req.DecidedBy, req.DecidedAt)
		r.RunStatus, r.Fingerprint = status, req.Fingerprint
		return r
	case problem != "":
		r := refused(record.CodeIntegrity, runID, "stored state failed its integrity check; the run needs attention: %s", problem)
		r.RunStatus = status
		return r
	case status != record.StatusWaitingApproval:
		r := refused(record.CodeNotWaiting, runID, "the run is %s", status)
		r.RunStatus, r.RequestStatus, r.Fingerprint = status, req.Status, req.Fingerprint
		return r
	case gateRequest != req.ID:
		return button(record.ButtonReplaced, "this approval request was replaced by a newer one (%s); decide on the current message", gateRequest)
	}
	return nil
}

// CheckButton is Decide's check of a button (a request id and a
// fingerprint, as a Slack button carries them) on a run as Get showed it:
// the same refusal Decide would give for those reasons, or nil. A form that
// a button opens is checked with it, so that a stale button opens none;
// the decision the form submits is checked again by Decide.
func CheckButton(v *RunView, requestID, fingerprint string) error {
	var named *buttonRequest
	for _, r := range v.Requests {
		if r.ID == requestID {
			named = &buttonRequest{ID: r.ID, RunID: v.ID, Fingerprint: r.Fingerprint, Status: r.Status, DecidedBy: r.DecidedBy}
			if r.DecidedAt != nil {
				named.DecidedAt = *r.DecidedAt
			}
		}
	}
	gate := ""
	if v.Gate != nil {
		gate = v.Gate.RequestID
	}
	if r := checkButton(v.ID, v.Status, gate, v.Problem, requestID, fingerprint, named); r != nil {
		return r
	}
	return nil
}

// alreadyDecided refuses a decision on a request that is no longer pending,
// naming who decided it and when.
func alreadyDecided(runID string, status record.RequestStatus, by string, at time.Time) *record.RefusedError {
	r := refused(record.CodeAlreadyDecided, runID, "already %s", status)
	r.RequestStatus = status
	if by != "" {
		r.By, r.At = by, at
		r.Msg = fmt.Sprintf("already %s by %s at %s", status, by, at.Format(time.RFC3339))
	}
	return r
}

// apply records an approve or reject on req and moves the run when it is
// decided. decs are the run's decisions before this one, as admit read them
// in this transaction.
func (dc *decider) apply(ctx context.Context, tx storage.Tx, l *runtx.Loaded, req *record.ApprovalRequest, decs []*record.Decision, in DecideInput, role string) error {
	now := dc.runs.Now()
	d := &record.Decision{
		RequestID: req.ID, RunID: l.Run.ID, ApproverID: in.Approver.ID, ApproverName: in.Approver.Name,
		Role: role, Verdict: in.Verdict, Reason: in.Reason, Via: in.Via, PayloadDigest: in.PayloadDigest, At: now,
		OnBehalfOf: in.deputy.onBehalfOf(),
	}
	noteDecision(l, d)
	confirmed(l.State, req.ID, in.Approver.ID)
	from := l.Run.Status
	var sched *scheduling
	if in.Verdict == record.VerdictReject {
		req.Status = record.RequestRejected
		l.Run.Status = record.StatusRejected
		l.Run.Reason = fmt.Sprintf("rejected by %s: %s", in.Approver.ID, in.Reason)
	} else {
		// This approval and the distinct ones before it: admit refused an
		// approver who decided already.
		n := 1
		for _, d := range decs {
			if d.RequestID == req.ID && d.Verdict == record.VerdictApprove {
				n++
			}
		}
		if r := requirementOf(l.State.Gate); (r == nil && n >= req.Count) || (r != nil && dc.compositeMet(l, r, req.ID)) {
			req.Status = record.RequestApproved
			sched = dc.windows.approve(l)
		}
	}
	if req.Status != record.RequestPending {
		req.DecidedBy, req.DecidedAt = in.Approver.ID, now
	}
	detail := map[string]string{
		"verdict": string(in.Verdict), "reason": in.Reason, "via": string(in.Via), "role": role, "request_id": req.ID,
	}
	if d.OnBehalfOf != "" {
		detail["on_behalf_of"] = d.OnBehalfOf
	}
	// The request row is written even when the quorum is not reached yet: the
	// compare-and-set on it is what serialises concurrent deciders. It and
	// the decision travel with the transition.
	err := dc.runs.SaveWith(ctx, tx, l, from, record.EventDecided, in.Approver.ID, detail, req, runtx.Also{Decided: req, Decision: d, Then: sched.then()})
	if we, ok := errors.AsType[*runtx.WriteError](err); ok {
		return alreadyVoted(l, d, we)
	}
	return err
}

func (dc *decider) insertDecision(ctx context.Context, tx storage.Tx, l *runtx.Loaded, d *record.Decision) error {
	if err := tx.InsertDecision(ctx, d); err != nil {
		return alreadyVoted(l, d, fmt.Errorf("insert decision on run %s: %w", l.Run.ID, err))
	}
	noteDecision(l, d)
	return nil
}

// alreadyVoted is the refusal of a decision whose write found the
// approver's decision on the request stored (ErrDuplicate), or err as it is.
func alreadyVoted(l *runtx.Loaded, d *record.Decision, err error) error {
	if errors.Is(err, storage.ErrDuplicate) {
		return refused(record.CodeAlreadyVoted, l.Run.ID, "%s already decided this request", d.ApproverID)
	}
	return err
}

// noteDecision records d in the run's state, which the transition's
// checkpoint holds.
func noteDecision(l *runtx.Loaded, d *record.Decision) {
	l.State.Decisions = append(l.State.Decisions, record.DecisionRecord{
		RequestID: d.RequestID, By: d.ApproverID, Role: d.Role, Verdict: d.Verdict, Reason: d.Reason,
		Edited: len(d.EditedArgs) > 0, Via: d.Via, At: d.At, OnBehalfOf: d.OnBehalfOf,
	})
}

// preparedEdit is an edit validated and checked before the decision's transaction,
// since checks read the target and must not run inside it.
type preparedEdit struct {
	version int64
	actions []record.Action
	checks  []record.Check
	gate    *record.Gate
	edited  json.RawMessage
}

func (dc *decider) prepareEdit(ctx context.Context, in DecideInput) (*preparedEdit, error) {
	l, err := dc.runs.View(ctx, in.RunID)
	if err != nil {
		return nil, err
	}
	if in.EditIndex < 0 || in.EditIndex >= len(l.State.Actions) {
		return nil, refused(record.CodeInvalidInput, in.RunID, "the run has no action %d to edit", in.EditIndex+1)
	}
	actions := append([]record.Action(nil), l.State.Actions...)
	actions[in.EditIndex] = record.Action{Name: actions[in.EditIndex].Name, Args: in.Edit}
	normal, _, err := dc.gates.normalise(actions, nil)
	if err != nil {
		return nil, refused(record.CodeInvalidInput, in.RunID, "the edited arguments are invalid: %v", err)
	}
	checks := dc.gates.runChecks(ctx, normal)
	for _, c := range checks {
		if !c.OK {
			return nil, refused(record.CodeInvalidInput, in.RunID, "the edited arguments fail a check (%s): %s", c.Name, c.Error)
		}
	}
	next := *l.State
	next.Actions = normal
	gate, err := dc.gates.gate(ctx, &next)
	if err != nil {
		return nil, refused(record.CodeInvalidInput, in.RunID, "policy could not decide on the edited arguments: %v", err)
	}
	return &preparedEdit{version: l.Run.Version, actions: normal, checks: checks, gate: gate, edited: normal[in.EditIndex].Args}, nil
}

// applyEdit replaces the proposal with the edited one: the old request is
// superseded, policy's new outcome applies, and the editor's approval counts for
// the new fingerprint when they qualify for it.
func (dc *decider) applyEdit(ctx context.Context, tx storage.Tx, l *runtx.Loaded, req *record.ApprovalRequest, in DecideInput, role string, p *preparedEdit) error {
	if l.Run.Version != p.version {
		return refused(record.CodeStaleFingerprint, l.Run.ID, "the run changed while the edit was being checked; look again and retry")
	}
	now := dc.runs.Now()
	d := &record.Decision{
		RequestID: req.ID, RunID: l.Run.ID, ApproverID: in.Approver.ID, ApproverName: in.Approver.Name,
		Role: role, Verdict: record.VerdictApprove, Reason: in.Reason, EditedArgs: p.edited, Via: in.Via,
		PayloadDigest: in.PayloadDigest, At: now,
	}
	if err := dc.insertDecision(ctx, tx, l, d); err != nil {
		return err
	}
	req.Status, req.DecidedBy, req.DecidedAt = record.RequestSuperseded, in.Approver.ID, now
	if err := tx.UpdateRequest(ctx, req); err != nil {
		return fmt.Errorf("update approval request %s: %w", req.ID, err)
	}
	// The fingerprint binds the run id, so the gate computed for the edited copy applies as is.
	l.State.Actions, l.State.Checks, l.State.Gate = p.actions, p.checks, p.gate
	l.Run.Fingerprint = p.gate.Fingerprint
	from := l.Run.Status
	var next *record.ApprovalRequest
	var sched *scheduling
	if p.gate.Approval == nil {
		l.Run.Deadline = time.Time{}
		sched = dc.windows.approve(l)
	} else {
		next = dc.gates.newRequest(l, p.gate)
		l.Run.Deadline = next.Deadline
		if err := tx.InsertRequest(ctx, next); err != nil {
			return fmt.Errorf("insert approval request of run %s: %w", l.Run.ID, err)
		}
		qualifies, alone := dc.editorCounts(p.gate, next, in, role)
		if qualifies {
			d2 := *d
			d2.ID, d2.RequestID, d2.EditedArgs = 0, next.ID, nil
			if err := dc.insertDecision(ctx, tx, l, &d2); err != nil {
				return err
			}
			if alone {
				next.Status, next.DecidedBy, next.DecidedAt = record.RequestApproved, in.Approver.ID, now
				if err := tx.UpdateRequest(ctx, next); err != nil {
					return fmt.Errorf("update approval request %s: %w", next.ID, err)
				}
				sched = dc.windows.approve(l)
			}
		}
	}
	return dc.runs.SaveWith(ctx, tx, l, from, record.EventEdited, in.Approver.ID, map[string]any{
		"index": in.EditIndex, "args": json.RawMessage(p.edited), "fingerprint": p.gate.Fingerprint,
		"status": l.Run.Status, "via": in.Via,
	}, next, runtx.Also{Then: sched.then()})
}

// Cancel ends a run that has not started executing. The requester may cancel, and
// so may anyone holding the role its approval needs.
func (e *Engine) Cancel(ctx context.Context, id string, by record.Person, reason string) (*record.Run, error) {
	if by.ID == "" || reason == "" {
		return nil, e.runs.Refuse(ctx, by.ID, refused(record.CodeInvalidInput, id, "cancel needs who and a reason"))
	}
	if field := badText(map[string]string{"run id": id, "who": by.ID, "reason": reason}); field != "" {
		return nil, e.runs.Refuse(ctx, by.ID, refused(record.CodeInvalidInput, id, "the %s must be valid UTF-8 text without NUL characters", field))
	}
	role, hasRole, err := e.dir.RoleOf(ctx, by.ID)
	if err != nil {
		return nil, fmt.Errorf("resolve role of %s: %w", by.ID, err)
	}
	var run *record.Run
	err = e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		l, err := e.runs.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		if l.Run.Status == record.StatusNeedsAttention {
			// What it sent may have run: "cancelled" would say it did not.
			return refused(record.CodeNotCancellable, id, "the run needs attention and what it sent may have run, so it cannot be cancelled: look at the target, then resolve it (signoff resolve)")
		}
		if l.Run.Status != record.StatusRunning && l.Run.Status != record.StatusWaitingApproval && l.Run.Status != record.StatusScheduled {
			return refused(record.CodeNotCancellable, id, "the run is %s and cannot be cancelled", l.Run.Status)
		}
		// Without a gate yet, cancelling someone else's run takes a role above
		// the lowest (the lowest is where agents sit).
		need := ""
		if names := e.roles.Names(); len(names) > 1 {
			need = names[1]
		}
		if l.State.Gate != nil && l.State.Gate.Approval != nil {
			need = l.State.Gate.Approval.Role
		}
		allowed := by.ID == l.State.Requester.ID || (hasRole && (need == "" || e.roles.AtLeast(role, need)))
		if !allowed {
			return refused(record.CodeNoRole, id, "only the requester or someone with role %s or above may cancel", need)
		}
		var req *record.ApprovalRequest
		if l.State.Gate != nil && l.State.Gate.RequestID != "" {
			if req, err = tx.Request(ctx, l.State.Gate.RequestID); err != nil {
				return fmt.Errorf("load approval request of run %s: %w", id, err)
			}
			if req.Status == record.RequestPending {
				req.Status, req.DecidedBy, req.DecidedAt = record.RequestCancelled, by.ID, e.now()
				if err := tx.UpdateRequest(ctx, req); err != nil {
					return fmt.Errorf("update approval request %s: %w", req.ID, err)
				}
			}
		}
		from := l.Run.Status
		l.Run.Status, l.Run.Reason = record.StatusCancelled, fmt.Sprintf("cancelled by %s: %s", by.ID, reason)
		if err := e.runs.Save(ctx, tx, l, from, record.EventCancelled, by.ID, map[string]string{"reason": reason}, req); err != nil {
			return err
		}
		run = l.Run
		return nil
	})
	return run, e.decisions.outcome(ctx, id, by.ID, err)
}

// outcome turns the error of a run-changing transaction into what the caller sees:
// refusals are audited, integrity problems put the run in needs_attention.
func (dc *decider) outcome(ctx context.Context, id, actor string, err error) error {
	var r *record.RefusedError
	var ie *IntegrityError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &r):
		return dc.runs.Refuse(ctx, actor, r)
	case errors.As(err, &ie):
		if aerr := dc.runs.Attention(ctx, id, ie.Error()); aerr != nil {
			return errors.Join(err, aerr)
		}
		return err
	}
	return fmt.Errorf("run %s: %w", id, err)
}

// expire ends a waiting run whose deadline has passed.
func (dc *decider) expire(ctx context.Context, id, actor string) error {
	err := dc.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		l, err := dc.runs.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		if l.Run.Status != record.StatusWaitingApproval || dc.runs.Now().Before(l.Run.Deadline) {
			return nil
		}
		req, err := tx.Request(ctx, l.State.Gate.RequestID)
		if err != nil {
			return fmt.Errorf("load approval request of run %s: %w", id, err)
		}
		if req.Status == record.RequestPending {
			req.Status, req.DecidedAt = record.RequestExpired, dc.runs.Now()
			if err := tx.UpdateRequest(ctx, req); err != nil {
				return fmt.Errorf("update approval request %s: %w", req.ID, err)
			}
		}
		l.Run.Status = record.StatusExpired
		l.Run.Reason = "no decision before the deadline " + l.Run.Deadline.Format(time.RFC3339)
		return dc.runs.Save(ctx, tx, l, record.StatusWaitingApproval, record.EventExpired, actor, map[string]string{"deadline": l.Run.Deadline.Format(time.RFC3339)}, req)
	})
	var ie *IntegrityError
	if errors.As(err, &ie) {
		return dc.runs.Attention(ctx, id, ie.Error())
	}
	if err != nil {
		return fmt.Errorf("expire run %s: %w", id, err)
	}
	return nil
}

// ExpireDue ends every waiting run whose deadline has passed and returns how many it ended.
func (e *Engine) ExpireDue(ctx context.Context) (int, error) {
	var runs []*record.Run
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		runs, err = tx.ListRuns(ctx, storage.RunFilter{Statuses: []record.Status{record.StatusWaitingApproval}, DeadlineBefore: e.now().Add(time.Millisecond)})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("list runs past their deadline: %w", err)
	}
	n := 0
	var errs []error
	for _, r := range runs {
		// One run that cannot be expired must not hold up the others.
		if err := e.decisions.expire(ctx, r.ID, "signoff"); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
