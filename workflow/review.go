package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
	"github.com/signoff-dev/signoff/workflow/internal/seal"
)

// reviewer keeps the follow-up reviews of forced approvals: the force
// opens one (open, in the force's transaction), someone of its role or
// above other than who forced acknowledges it, once.
type reviewer struct {
	runs  *runtx.Runs
	store storage.Store
	in    *seal.Sealer
	roles *policy.Roles
	dir   Directory
	fail  func(string)
}

// open stores the review of the force fr of req, in the force's tx.
func (rv *reviewer) open(ctx context.Context, tx storage.Tx, req *record.ApprovalRequest, fr *record.ForceRecord) error {
	r := &record.Review{
		RunID: req.RunID, RequestID: req.ID, Rule: req.Rule, Role: fr.ReviewRole, ForcedBy: fr.By, Reason: fr.Reason,
		Due: fr.ReviewDue, Status: record.ReviewPending, CreatedAt: fr.At,
	}
	if err := tx.InsertReview(ctx, r); err != nil {
		return fmt.Errorf("open the review of run %s: %w", req.RunID, err)
	}
	return nil
}

// AcknowledgeReview acknowledges the follow-up review of run id's forced
// approval, by someone of the review's role or above who did not force it,
// with an optional note. It refuses (changing nothing but the audit log) a
// run without a review, one acknowledged already, the forcer and a lower
// role.
func (e *Engine) AcknowledgeReview(ctx context.Context, id string, by record.Person, note string) (*record.Review, error) {
	rv := e.reviews
	if by.ID == "" || id == "" {
		return nil, e.runs.Refuse(ctx, by.ID, refused(record.CodeInvalidInput, id, "acknowledging a review needs a run and who"))
	}
	if field := badText(map[string]string{"run id": id, "who": by.ID, "note": note}); field != "" {
		return nil, e.runs.Refuse(ctx, by.ID, refused(record.CodeInvalidInput, id, "the %s must be valid UTF-8 text without NUL characters", field))
	}
	role, hasRole, err := rv.dir.RoleOf(ctx, by.ID)
	if err != nil {
		return nil, fmt.Errorf("resolve role of %s: %w", by.ID, err)
	}
	var out *record.Review
	err = rv.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		r, err := rv.load(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := rv.admit(r, by.ID, role, hasRole); err != nil {
			return err
		}
		r.Status, r.AcknowledgedBy, r.AcknowledgedAt, r.Note = record.ReviewAcknowledged, by.ID, rv.runs.Now(), note
		if err := tx.UpdateReview(ctx, r); err != nil {
			return fmt.Errorf("acknowledge the review of run %s: %w", id, err)
		}
		out = r
		return rv.told(ctx, tx, id, by.ID, map[string]string{
			"role": role, "note": note, "forced_by": r.ForcedBy, "request_id": r.RequestID,
		})
	})
	if err := e.decisions.outcome(ctx, id, by.ID, err); err != nil {
		return nil, err
	}
	rv.fail("after-acknowledge-commit")
	e.log.Info("review acknowledged", "run_id", id, "by", by.ID, "role", role)
	return out, nil
}

func (rv *reviewer) load(ctx context.Context, tx storage.Tx, id string) (*record.Review, error) {
	r, err := tx.Review(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, refused(record.CodeNoReview, id, "run %s has no review: its approval was not forced", id)
	}
	if err != nil {
		return nil, err
	}
	if err := rv.in.CheckReview(ctx, tx, r); err != nil {
		var ie *record.IntegrityError
		if errors.As(err, &ie) {
			return nil, &IntegrityError{RunID: id, Problem: ie.Problem}
		}
		return nil, err
	}
	return r, nil
}

func (rv *reviewer) admit(r *record.Review, who, role string, hasRole bool) error {
	id := r.RunID
	switch {
	case r.Status == record.ReviewAcknowledged:
		rf := refused(record.CodeAlreadyDecided, id, "the review was acknowledged by %s at %s", r.AcknowledgedBy, r.AcknowledgedAt.Format(time.RFC3339))
		rf.By, rf.At = r.AcknowledgedBy, r.AcknowledgedAt
		return rf
	case who == r.ForcedBy:
		return refused(record.CodeSelfApproval, id, "%s forced this approval and may not acknowledge its review", who)
	case !hasRole:
		return refused(record.CodeNoRole, id, "%s holds no role; acknowledging this review needs %s or above", who, r.Role)
	case !rv.roles.AtLeast(role, r.Role):
		return refused(record.CodeNoRole, id, "%s is %s; acknowledging this review needs %s or above", who, role, r.Role)
	}
	return nil
}

// PendingReviews are the follow-up reviews not acknowledged yet, soonest
// due first, their seals checked.
func (e *Engine) PendingReviews(ctx context.Context) ([]*record.Review, error) {
	var rs []*record.Review
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		if rs, err = tx.Reviews(ctx, record.ReviewPending); err != nil {
			return err
		}
		for _, r := range rs {
			if err := e.in.CheckReview(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the pending reviews: %w", err)
	}
	return rs, nil
}

// told records the acknowledgement of run id's review in its audit log and
// tells the hooks, so that the run's agent hears of it (a callback), as of
// a transition that leaves the run as it is: no checkpoint is written, so
// a worker executing the run is not disturbed. A run whose stored state
// fails its check is only audited: nothing in it can be trusted to say
// where to call.
func (rv *reviewer) told(ctx context.Context, tx storage.Tx, id, actor string, detail map[string]string) error {
	l, err := rv.runs.Load(ctx, tx, id)
	var ie *IntegrityError
	if errors.As(err, &ie) {
		return rv.runs.Note(ctx, tx, id, actor, record.EventReviewAcknowledged, detail)
	}
	if err != nil {
		return err
	}
	return rv.runs.NoteTold(ctx, tx, l.Run, l.State, actor, record.EventReviewAcknowledged, detail)
}

// ReviewView is the follow-up review of a forced approval as a run's view
// shows it: who may acknowledge it and by when, and, once acknowledged, by
// whom, when and with what note.
type ReviewView struct {
	Role           string              `json:"role"`
	Due            time.Time           `json:"due"`
	Status         record.ReviewStatus `json:"status"`
	AcknowledgedBy string              `json:"acknowledged_by,omitempty"`
	AcknowledgedAt *time.Time          `json:"acknowledged_at,omitempty"`
	Note           string              `json:"note,omitempty"`
}

// view is the review of run id, its seal checked, in tx; nil when the run
// has none.
func (rv *reviewer) view(ctx context.Context, tx storage.Tx, id string) (*ReviewView, error) {
	r, err := tx.Review(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load the review of run %s: %w", id, err)
	}
	if err := rv.in.CheckReview(ctx, tx, r); err != nil {
		return nil, err
	}
	v := &ReviewView{Role: r.Role, Due: r.Due, Status: r.Status, AcknowledgedBy: r.AcknowledgedBy, Note: r.Note}
	if !r.AcknowledgedAt.IsZero() {
		at := r.AcknowledgedAt
		v.AcknowledgedAt = &at
	}
	return v, nil
}
