package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
	"github.com/signoff-dev/signoff/workflow/internal/seal"
)

// maxDelegation is how long a delegation may last at most, counted from
// when it is made: one that is forgotten ends by itself.
const maxDelegation = 90 * 24 * time.Hour

// slackUserID is what a Slack user id looks like (as the config's).
var slackUserID = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)

// delegations is who may decide on whose behalf: it makes and revokes
// delegations, and finds those a decider may act under. A delegation is not
// transitive: its delegate acts with the delegator's own role, never with
// what others delegated to the delegator.
type delegations struct {
	runs  *runtx.Runs
	store storage.Store
	in    *seal.Sealer
	dir   Directory
	roles *policy.Roles
	log   *slog.Logger
	fail  func(string)
}

// Delegate records that d.To may decide, until d.Until, what d.From may.
// d.From must hold a role; d.To is a Slack user id or a person of the
// config; Until is in the future and at most maxDelegation away. CreatedBy
// is who asks ("" means d.From). ID, CreatedAt and the revocation are set
// by the engine.
func (e *Engine) Delegate(ctx context.Context, d record.Delegation) (*record.Delegation, error) {
	return e.delegations.delegate(ctx, d)
}

// RevokeDelegation ends a delegation before its time. Its delegator, its
// delegate or whoever made it may revoke it; revoking one that is revoked
// or over already is refused.
func (e *Engine) RevokeDelegation(ctx context.Context, id, by string) (*record.Delegation, error) {
	return e.delegations.revoke(ctx, id, by)
}

// Delegations lists the delegations from or to who (everyone's when who is
// ""), oldest first: those that hold now, or every one when all is set. A
// delegation whose seal fails is an IntegrityError.
func (e *Engine) Delegations(ctx context.Context, who string, all bool) ([]*record.Delegation, error) {
	return e.delegations.list(ctx, who, all)
}

func (dl *delegations) delegate(ctx context.Context, d record.Delegation) (*record.Delegation, error) {
	if d.CreatedBy == "" {
		d.CreatedBy = d.From
	}
	actor := d.CreatedBy
	if r := dl.validate(ctx, &d); r != nil {
		return nil, dl.runs.Refuse(ctx, actor, r)
	}
	now := dl.runs.Now()
	d.ID, d.CreatedAt, d.RevokedAt, d.RevokedBy, d.Version = dl.runs.NewID("dlg_"), now, time.Time{}, "", 0
	d.Until = d.Until.UTC().Truncate(time.Millisecond)
	err := dl.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		if err := tx.InsertDelegation(ctx, &d); err != nil {
			return err
		}
		return dl.runs.Audit(ctx, tx, "", actor, record.EventDelegated, map[string]string{
			"delegation_id": d.ID, "from": d.From, "to": d.To, "until": d.Until.Format(time.RFC3339), "reason": d.Reason,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("delegate from %s to %s: %w", d.From, d.To, err)
	}
	dl.fail("after-delegate")
	dl.log.Info("delegation recorded", "delegation_id", d.ID, "from", d.From, "to", d.To, "until", d.Until)
	return &d, nil
}

// validate refuses a delegation that is malformed, to oneself, from
// someone without a role, to someone unknown, or of a bad length.
func (dl *delegations) validate(ctx context.Context, d *record.Delegation) *record.RefusedError {
	switch {
	case d.From == "" || d.To == "":
		return refused(record.CodeInvalidInput, "", "a delegation needs whom it is from and whom it is to")
	case d.Until.IsZero():
		return refused(record.CodeInvalidInput, "", "a delegation needs when it ends")
	}
	if field := badText(map[string]string{"from": d.From, "to": d.To, "reason": d.Reason, "who": d.CreatedBy}); field != "" {
		return refused(record.CodeInvalidInput, "", "the %s must be valid UTF-8 text without NUL characters", field)
	}
	if bad := checkLines([]lineField{{"from", d.From, true}, {"to", d.To, true}, {"who", d.CreatedBy, true}, {"reason", d.Reason, false}}); bad != nil {
		return bad
	}
	now := dl.runs.Now()
	switch {
	case d.From == d.To:
		return refused(record.CodeInvalidInput, "", "%s cannot delegate to themselves", d.From)
	case !d.Until.After(now):
		return refused(record.CodeInvalidInput, "", "the delegation would end at %s, which is not in the future", d.Until.UTC().Format(time.RFC3339))
	case d.Until.After(now.Add(maxDelegation)):
		return refused(record.CodeInvalidInput, "", "a delegation lasts at most %d days (until %s at the latest)", int(maxDelegation/(24*time.Hour)), now.Add(maxDelegation).Format(time.RFC3339))
	}
	if _, ok, err := dl.dir.RoleOf(ctx, d.From); err != nil || !ok {
		if err != nil {
			return refused(record.CodeInvalidInput, "", "the role of %s could not be resolved: %v", d.From, err)
		}
		return refused(record.CodeNoRole, "", "%s holds no role, so has nothing to delegate", d.From)
	}
	if !slackUserID.MatchString(d.To) {
		if _, ok, err := dl.dir.RoleOf(ctx, d.To); err != nil || !ok {
			return refused(record.CodeInvalidInput, "", "%s is neither a Slack user id nor a person of the config", d.To)
		}
	}
	return nil
}

func (dl *delegations) revoke(ctx context.Context, id, by string) (*record.Delegation, error) {
	if id == "" || by == "" {
		return nil, dl.runs.Refuse(ctx, by, refused(record.CodeInvalidInput, "", "revoking needs the delegation's id and who revokes it"))
	}
	if field := badText(map[string]string{"delegation id": id, "who": by}); field != "" {
		return nil, dl.runs.Refuse(ctx, by, refused(record.CodeInvalidInput, "", "the %s must be valid UTF-8 text without NUL characters", field))
	}
	var out *record.Delegation
	err := dl.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		d, err := tx.Delegation(ctx, id)
		if errors.Is(err, storage.ErrNotFound) {
			return refused(record.CodeInvalidInput, "", "no delegation %s", id)
		}
		if err != nil {
			return err
		}
		if err := dl.in.CheckDelegations(ctx, tx, []*record.Delegation{d}); err != nil {
			return err
		}
		now := dl.runs.Now()
		switch {
		case by != d.From && by != d.To && by != d.CreatedBy:
			return refused(record.CodeNoRole, "", "only %s, %s or who made delegation %s may revoke it", d.From, d.To, id)
		case !d.RevokedAt.IsZero():
			return refused(record.CodeInvalidInput, "", "delegation %s was revoked already, by %s at %s", id, d.RevokedBy, d.RevokedAt.Format(time.RFC3339))
		case !d.ActiveAt(now):
			return refused(record.CodeInvalidInput, "", "delegation %s ended at %s", id, d.Until.Format(time.RFC3339))
		}
		d.RevokedAt, d.RevokedBy = now, by
		if err := tx.UpdateDelegation(ctx, d); err != nil {
			return err
		}
		out = d
		return dl.runs.Audit(ctx, tx, "", by, record.EventDelegationRevoked, map[string]string{
			"delegation_id": d.ID, "from": d.From, "to": d.To,
		})
	})
	var r *record.RefusedError
	if errors.As(err, &r) {
		return nil, dl.runs.Refuse(ctx, by, r)
	}
	if err != nil {
		return nil, fmt.Errorf("revoke delegation %s: %w", id, err)
	}
	dl.log.Info("delegation revoked", "delegation_id", id, "by", by)
	return out, nil
}

func (dl *delegations) list(ctx context.Context, who string, all bool) ([]*record.Delegation, error) {
	var ds []*record.Delegation
	err := dl.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		every, err := tx.Delegations(ctx, "")
		if err != nil {
			return err
		}
		if err := dl.in.CheckDelegations(ctx, tx, every); err != nil {
			return err
		}
		now := dl.runs.Now()
		for _, d := range every {
			if (who == "" || d.From == who || d.To == who) && (all || d.ActiveAt(now)) {
				ds = append(ds, d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list delegations: %w", err)
	}
	return ds, nil
}

// deputy is what delegations let one decider do on one decision: the
// delegations to them that hold, each with its delegator's role, and,
// once the decider chose one (decider.onBehalf), the one the decision is
// made under. nil is a decider with none.
type deputy struct {
	offers []offer
	as     *offer
}

// offer is one delegation a decider may act under, with the role its
// delegator holds.
type offer struct {
	d    *record.Delegation
	role string
}

// deputyOf finds the delegations to who that hold now and whose delegator
// holds a role. One whose seal fails is skipped (and logged): an edited
// row lets nobody in.
func (dl *delegations) deputyOf(ctx context.Context, who string) (*deputy, error) {
	var ds []*record.Delegation
	err := dl.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		all, err := tx.Delegations(ctx, who)
		if err != nil {
			return err
		}
		now := dl.runs.Now()
		for _, d := range all {
			if !d.ActiveAt(now) {
				continue
			}
			if err := dl.in.CheckDelegations(ctx, tx, []*record.Delegation{d}); err != nil {
				dl.log.Warn("delegation failed its integrity check; ignored", "delegation_id", d.ID, "err", err)
				continue
			}
			ds = append(ds, d)
		}
		return nil
	})
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	dp := &deputy{}
	for _, d := range ds {
		role, ok, err := dl.dir.RoleOf(ctx, d.From)
		if err != nil {
			return nil, fmt.Errorf("resolve role of %s: %w", d.From, err)
		}
		if ok {
			dp.offers = append(dp.offers, offer{d: d, role: role})
		}
	}
	return dp, nil
}

// confirm checks, in the decision's transaction, that the delegation the
// decision is made under still holds: one revoked since it was found lets
// nobody in.
func (dp *deputy) confirm(ctx context.Context, tx storage.Tx, in *seal.Sealer, now time.Time, runID string) error {
	if dp == nil || dp.as == nil {
		return nil
	}
	d, err := tx.Delegation(ctx, dp.as.d.ID)
	if err != nil {
		return fmt.Errorf("load delegation %s: %w", dp.as.d.ID, err)
	}
	if err := in.CheckDelegations(ctx, tx, []*record.Delegation{d}); err != nil || !d.ActiveAt(now) {
		return refused(record.CodeNoRole, runID, "the delegation from %s to %s no longer holds", d.From, d.To)
	}
	return nil
}

// onBehalfOf is whom the decision is made on behalf of, or "".
func (dp *deputy) onBehalfOf() string {
	if dp == nil || dp.as == nil {
		return ""
	}
	return dp.as.d.From
}

// principal is who a decision counts as: the delegator when made on their
// behalf, else the decider.
func (dp *deputy) principal(decider string) string {
	if from := dp.onBehalfOf(); from != "" {
		return from
	}
	return decider
}

// roleOr is the role a decision is made with: the delegator's, or own.
func (dp *deputy) roleOr(own string) string {
	if dp == nil || dp.as == nil {
		return own
	}
	return dp.as.role
}

// voter is who a stored decision counts as.
func voter(d *record.Decision) string {
	if d.OnBehalfOf != "" {
		return d.OnBehalfOf
	}
	return d.ApproverID
}

// needsDeputy says whether a decision may need a delegation: unless the
// run as read before the decision shows that the decider may decide in
// their own right, the delegations to them are looked up (a decision
// that needs none reads none).
func (dc *decider) needsDeputy(pre *runtx.Loaded, in DecideInput, role string, hasRole bool) bool {
	if pre == nil || pre.State.Gate == nil || pre.State.Gate.Approval == nil {
		return true
	}
	req := &record.ApprovalRequest{ID: pre.State.Gate.RequestID, Role: pre.State.Gate.Approval.Role}
	return dc.mayDecide(pre, req, in, role, hasRole) != nil
}

// onBehalf is checkDecider's last chance for someone who may not decide in
// their own right (own is why): the first delegation to them whose
// delegator may decide, taken as the one the decision is made under. A
// delegation never lets anyone approve their own request: neither the
// delegate nor the delegator may be the requester, whatever the rule says.
func (dc *decider) onBehalf(l *runtx.Loaded, req *record.ApprovalRequest, in DecideInput, own error) error {
	dp := in.deputy
	if dp == nil {
		return own
	}
	for i := range dp.offers {
		o := &dp.offers[i]
		as := in
		as.Approver = record.Person{ID: o.d.From}
		if dc.mayDecide(l, req, as, o.role, true) != nil {
			continue
		}
		if in.Approver.ID == req.RequesterID || o.d.From == req.RequesterID {
			return refused(record.CodeSelfApproval, l.Run.ID, "%s asked for this action: a delegation never lets anyone approve their own request (%s on behalf of %s)", req.RequesterID, in.Approver.ID, o.d.From)
		}
		if len(in.Edit) > 0 {
			return refused(record.CodeEditNotAllowed, l.Run.ID, "arguments are edited in one's own right: on behalf of %s, approve or reject", o.d.From)
		}
		dp.as = o
		return nil
	}
	return own
}

// verify adds to rep every delegation whose seal fails, when seals could be
// checked.
func (dl *delegations) verify(ctx context.Context, tx storage.Tx, rep *VerifyReport) error {
	if !dl.in.Keyed() || rep.Unverified || rep.KeyNotGiven != "" {
		return nil
	}
	ds, err := tx.Delegations(ctx, "")
	if err != nil {
		return fmt.Errorf("list delegations: %w", err)
	}
	for _, d := range ds {
		err := dl.in.CheckDelegations(ctx, tx, []*record.Delegation{d})
		var ie *record.IntegrityError
		switch {
		case errors.As(err, &ie):
			rep.Damaged = append(rep.Damaged, ie)
		case err != nil:
			return err
		}
	}
	return nil
}
