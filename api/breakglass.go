package api

import (
	"context"
	"strings"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// ForceRun is a break-glass approval by the token's requester: the
// engine's own Decide with Force, so the rule's break_glass role, the
// fingerprint, the deadline and the ban on forcing one's own request hold
// as in Slack and on the command line.
func (h *handlers) ForceRun(ctx context.Context, req ForceRunRequestObject) (ForceRunResponseObject, error) {
	tok := tokenOf(echoContext(ctx))
	switch {
	case strings.TrimSpace(req.Body.Fingerprint) == "":
		return nil, fieldProblem("fingerprint", "required: the run's fingerprint as you were shown it")
	case strings.TrimSpace(req.Body.Reason) == "":
		return nil, fieldProblem("reason", "required: the justification of the force")
	}
	in := workflow.DecideInput{RunID: req.Id, Approver: record.Person{ID: tok.Requester}, Verdict: record.VerdictApprove,
		Fingerprint: req.Body.Fingerprint, Reason: req.Body.Reason, Via: record.ViaAPI, Force: true}
	if _, err := h.engine.Decide(ctx, in); err != nil {
		return nil, inRun(err, req.Id)
	}
	v, err := h.engine.Get(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	return ForceRun200JSONResponse(h.shown(v)), nil
}

func (h *handlers) AcknowledgeReview(ctx context.Context, req AcknowledgeReviewRequestObject) (AcknowledgeReviewResponseObject, error) {
	tok := tokenOf(echoContext(ctx))
	note := ""
	if req.Body.Note != nil {
		note = *req.Body.Note
	}
	r, err := h.engine.AcknowledgeReview(ctx, req.Id, record.Person{ID: tok.Requester}, note)
	if err != nil {
		return nil, inRun(err, req.Id)
	}
	return AcknowledgeReview200JSONResponse(reviewOf(r)), nil
}

func (h *handlers) ListReviews(ctx context.Context, _ ListReviewsRequestObject) (ListReviewsResponseObject, error) {
	rs, err := h.engine.PendingReviews(ctx)
	if err != nil {
		return nil, err
	}
	out := ReviewList{Reviews: make([]Review, len(rs))}
	for i, r := range rs {
		out.Reviews[i] = reviewOf(r)
	}
	return ListReviews200JSONResponse(out), nil
}

func reviewOf(r *record.Review) Review {
	v := Review{RunId: r.RunID, RequestId: r.RequestID, Rule: r.Rule, Role: r.Role, ForcedBy: r.ForcedBy, Reason: r.Reason,
		Due: r.Due, Status: ReviewStatus(r.Status), CreatedAt: r.CreatedAt}
	if r.Status == record.ReviewAcknowledged {
		at, by := r.AcknowledgedAt, r.AcknowledgedBy
		v.AcknowledgedAt, v.AcknowledgedBy = &at, &by
		if r.Note != "" {
			note := r.Note
			v.Note = &note
		}
	}
	return v
}
