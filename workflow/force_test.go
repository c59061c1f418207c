package workflow_test

import (
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// managersForce: a manager may force the approval of a large refund, which
// needs two team leads otherwise; a team lead reviews within 24h.
var managersForce = &record.BreakGlass{Role: "manager", Review: record.BreakGlassReview{Role: "team_lead", Within: 24 * 3600}}

// forcePolicy is testPolicy whose large refunds need two team leads within
// 72h (self-approval allowed, so that only the force's own ban refuses the
// requester), with this break_glass.
func forcePolicy(t testing.TB, roles *policy.Roles, bg *record.BreakGlass) *policy.Policy {
	t.Helper()
	p, err := policy.New("rev-1", []policy.Rule{
		{Name: "large-refund", When: `action.name == "request_refund" && double(action.args.amount) > 50.0`, Risk: "high",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: 2, Expires: record.Seconds(72 * 3600), SelfApproval: true}, BreakGlass: bg},
		{Name: "everything-else", When: "true", Risk: "low"},
	}, roles)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

func forceAs(h *harness, id, who, reason string) (*record.Run, error) {
	return h.engine.Decide(ctx, workflow.DecideInput{RunID: id, Approver: record.Person{ID: who}, Verdict: record.VerdictApprove, Reason: reason, Via: "cli", Force: true})
}

// A manager forces the approval: the run executes at once without the
// quorum, once; the checkpoint remembers who, why and when the review is
// due; the audit log has policy_bypassed with the justification; the chain
// still verifies.
func TestForceApprovesAtOnceWithoutTheQuorum(t *testing.T) {
	h := newHarness(t)
	h.open(forcePolicy(t, h.roles, managersForce))
	run := h.submit(refund("PAY-1", 119))
	if _, err := h.approve(run.ID, "U0LEAD0001"); err != nil {
		t.Fatal(err)
	}
	if s := h.get(run.ID).Status; s != record.StatusWaitingApproval {
		t.Fatalf("one of two approvals: %s", s)
	}
	h.clock.Advance(time.Hour)
	got, err := forceAs(h, run.ID, "U0MGR00001", "payments are down, customer waiting")
	if err != nil {
		t.Fatalf("force: %v", err)
	}
	if got.Status != record.StatusExecuting {
		t.Fatalf("status %s after a force", got.Status)
	}
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	v := h.get(run.ID)
	if v.Status != record.StatusDone || h.target.calls != 1 {
		t.Fatalf("status %s, %d calls", v.Status, h.target.calls)
	}
	f := v.Forced
	if f == nil || f.By != "U0MGR00001" || f.Role != "manager" || f.Reason != "payments are down, customer waiting" ||
		f.ReviewRole != "team_lead" || !f.ReviewDue.Equal(f.At.Add(24*time.Hour)) {
		t.Fatalf("forced %+v", f)
	}
	evs, err := h.engine.AuditLog(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Action == record.EventPolicyBypassed {
			n++
			if e.Actor != "U0MGR00001" || !strings.Contains(string(e.Detail), `"reason":"payments are down, customer waiting"`) || e.CheckpointSeq == 0 {
				t.Fatalf("event %+v", e)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d policy_bypassed events", n)
	}
	if _, err := forceAs(h, run.ID, "U0MGR00001", "again"); !record.IsRefused(err, record.CodeAlreadyDecided) {
		t.Fatalf("a second force: %v", err)
	}
	if n, err := h.engine.Verify(ctx); err != nil || !n.OK() {
		t.Fatalf("verify %+v %v", n, err)
	}
}

// A force is refused, changing nothing but the audit log, by a lower role,
// by the requester (even where the rule allows approving one's own), on a
// stale fingerprint, without a justification, and on a rule without
// break_glass; after the deadline it is refused and the run expires.
func TestForceRefusals(t *testing.T) {
	tests := []struct {
		name      string
		bg        *record.BreakGlass
		requester string
		in        workflow.DecideInput
		advance   time.Duration
		code      string
		status    record.Status
	}{
		{"a lower role", managersForce, "", workflow.DecideInput{Approver: record.Person{ID: "U0LEAD0001"}, Reason: "urgent"}, 0, record.CodeNoRole, record.StatusWaitingApproval},
		{"the requester", managersForce, "U0MGR00001", workflow.DecideInput{Approver: record.Person{ID: "U0MGR00001"}, Reason: "urgent"}, 0, record.CodeSelfApproval, record.StatusWaitingApproval},
		{"a stale fingerprint", managersForce, "", workflow.DecideInput{Approver: record.Person{ID: "U0MGR00001"}, Reason: "urgent", Fingerprint: "0123456789abcdef0123"}, 0, record.CodeStaleFingerprint, record.StatusWaitingApproval},
		{"no justification", managersForce, "", workflow.DecideInput{Approver: record.Person{ID: "U0MGR00001"}, Reason: "  "}, 0, record.CodeInvalidInput, record.StatusWaitingApproval},
		{"a rejection", managersForce, "", workflow.DecideInput{Approver: record.Person{ID: "U0MGR00001"}, Reason: "no", Verdict: record.VerdictReject}, 0, record.CodeInvalidInput, record.StatusWaitingApproval},
		{"no break_glass", nil, "", workflow.DecideInput{Approver: record.Person{ID: "U0MGR00001"}, Reason: "urgent"}, 0, record.CodeNoBreakGlass, record.StatusWaitingApproval},
		{"after the deadline", managersForce, "", workflow.DecideInput{Approver: record.Person{ID: "U0MGR00001"}, Reason: "urgent"}, 72 * time.Hour, record.CodeExpired, record.StatusExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.open(forcePolicy(t, h.roles, tt.bg))
			p := refund("PAY-1", 119)
			if tt.requester != "" {
				p.Requester = record.Person{ID: tt.requester}
			}
			run := h.submit(p)
			h.clock.Advance(tt.advance)
			before, audits := h.snapshot(run.ID), h.auditCount(run.ID)
			in := tt.in
			in.RunID, in.Via, in.Force = run.ID, "cli", true
			if in.Verdict == "" {
				in.Verdict = record.VerdictApprove
			}
			_, err := h.engine.Decide(ctx, in)
			wantRefused(t, err, tt.code)
			v := h.get(run.ID)
			if v.Status != tt.status || v.Forced != nil || h.target.calls != 0 {
				t.Fatalf("status %s (want %s), forced %+v, %d calls", v.Status, tt.status, v.Forced, h.target.calls)
			}
			if tt.status == record.StatusWaitingApproval && (h.snapshot(run.ID) != before || h.auditCount(run.ID) != audits+1) {
				t.Fatalf("a refusal changed the run, or wrote %d audit events", h.auditCount(run.ID)-audits)
			}
		})
	}
}

// A force opens its review, listed as pending until someone of the
// review's role acknowledges it: the forcer may not, nor a lower role; a
// second acknowledge is refused; a run whose approval was not forced has
// no review.
func TestForcedRunsReviewIsAcknowledgedOnce(t *testing.T) {
	h := newHarness(t)
	h.open(forcePolicy(t, h.roles, managersForce))
	run := h.submit(refund("PAY-1", 119))
	plain := h.submit(refund("PAY-2", 119))
	if _, err := forceAs(h, run.ID, "U0MGR00001", "outage"); err != nil {
		t.Fatal(err)
	}
	pending, err := h.engine.PendingReviews(ctx)
	if err != nil || len(pending) != 1 || pending[0].RunID != run.ID || pending[0].Role != "team_lead" ||
		pending[0].ForcedBy != "U0MGR00001" || !pending[0].Due.Equal(h.clock.Now().Add(24*time.Hour).Truncate(time.Millisecond)) {
		t.Fatalf("pending %+v, %v", pending, err)
	}
	ack := func(id, who string) error {
		_, err := h.engine.AcknowledgeReview(ctx, id, record.Person{ID: who}, "looked at it")
		return err
	}
	wantRefused(t, ack(run.ID, "U0MGR00001"), record.CodeSelfApproval)
	wantRefused(t, ack(run.ID, "agent:resolver"), record.CodeNoRole)
	wantRefused(t, ack(plain.ID, "U0LEAD0001"), record.CodeNoReview)
	h.clock.Advance(time.Hour)
	if err := ack(run.ID, "U0LEAD0001"); err != nil {
		t.Fatalf("acknowledge: %v", err)
	}
	r := wantRefused(t, ack(run.ID, "U0LEAD0002"), record.CodeAlreadyDecided)
	if r.By != "U0LEAD0001" {
		t.Fatalf("refusal names %q", r.By)
	}
	if pending, err := h.engine.PendingReviews(ctx); err != nil || len(pending) != 0 {
		t.Fatalf("pending after the acknowledge %+v, %v", pending, err)
	}
	evs, err := h.engine.AuditLog(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	for _, e := range evs {
		if e.Action == record.EventReviewAcknowledged {
			acked++
			if e.Actor != "U0LEAD0001" || !strings.Contains(string(e.Detail), `"note":"looked at it"`) {
				t.Fatalf("review_acknowledged by %s: %s", e.Actor, e.Detail)
			}
		}
	}
	if acked != 1 {
		t.Fatalf("%d review_acknowledged events", acked)
	}
	if n, err := h.engine.Verify(ctx); err != nil || !n.OK() {
		t.Fatalf("verify %+v %v", n, err)
	}
}
