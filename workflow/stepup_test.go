package workflow_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// stepUpHarness is a harness whose large refunds need one team lead,
// confirmed on the web after a sign-in within 5m.
func stepUpHarness(t *testing.T, count int) *harness {
	t.Helper()
	h := newHarness(t)
	p, err := policy.New("rev-1", []policy.Rule{
		{Name: "large-refund", When: `action.name == "request_refund" && double(action.args.amount) > 50.0`, Risk: "high",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: count, Expires: record.Seconds(72 * 3600), Edit: true, StepUp: 300}},
		{Name: "everything-else", When: "true", Risk: "low"},
	}, h.roles)
	if err != nil {
		t.Fatal(err)
	}
	h.open(p)
	return h
}

func refusedCode(err error) string {
	var r *record.RefusedError
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

// TestStepUpApprovalCountsOnlyOnTheWebAfterAFreshSignIn: on a step-up
// rule an approval from Slack or the CLI is recorded as unconfirmed and
// the run keeps waiting; the same person's web approval with a fresh
// sign-in approves it; a stale or unknown sign-in is refused and changes
// nothing; a rejection needs no step-up.
func TestStepUpApprovalCountsOnlyOnTheWebAfterAFreshSignIn(t *testing.T) {
	lead := record.Person{ID: "U0LEAD0001"}
	for _, tc := range []struct {
		name    string
		first   workflow.DecideInput // tried first: its refusal code, the run still waiting
		ago     time.Duration        // first's sign-in this long before now (0: unknown)
		code    string
		event   record.Event // the event it records ("" none but refused)
		then    record.Via   // then the same person approves via this ("" none), signed in thenAgo before
		thenAgo time.Duration
		status  record.Status // after then
		message string
	}{
		{name: "slack then web", first: workflow.DecideInput{Via: record.ViaSlack}, code: record.CodeConfirmOnWeb, event: record.EventApprovalUnconfirmed,
			then: record.ViaWeb, thenAgo: time.Minute, status: record.StatusExecuting, message: "does not count until you confirm it on the run's page"},
		{name: "cli", first: workflow.DecideInput{Via: record.ViaCLI}, code: record.CodeConfirmOnWeb, event: record.EventApprovalUnconfirmed, message: "via cli is recorded"},
		{name: "web, sign-in too old", first: workflow.DecideInput{Via: record.ViaWeb}, ago: 6 * time.Minute, code: record.CodeSignInAgain, event: record.EventRefused,
			then: record.ViaWeb, thenAgo: 10 * time.Second, status: record.StatusExecuting, message: "sign in again to confirm: your sign-in is older than 5m"},
		{name: "web, sign-in unknown", first: workflow.DecideInput{Via: record.ViaWeb}, code: record.CodeSignInAgain, event: record.EventRefused, message: "sign in again to confirm"},
		{name: "edit from slack", first: workflow.DecideInput{Via: record.ViaSlack, Edit: []byte(`{"payment_id":"PAY-1","amount":100}`)}, code: record.CodeConfirmOnWeb, event: record.EventRefused, message: "edit and approve on the run's page"},
		{name: "reject from slack", first: workflow.DecideInput{Via: record.ViaSlack, Verdict: record.VerdictReject, Reason: "no"}, code: "", status: record.StatusRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := stepUpHarness(t, 1)
			run := h.submit(refund("PAY-1", 119))
			in := tc.first
			in.RunID, in.Approver = run.ID, lead
			if in.Verdict == "" {
				in.Verdict = record.VerdictApprove
			}
			in.AuthTime = authAgo(h, tc.ago)
			before := h.events(run.ID, tc.event)
			got, err := h.engine.Decide(ctx, in)
			if tc.code == "" {
				if err != nil || got.Status != tc.status {
					t.Fatalf("decide: %v, %v; want %s", got, err, tc.status)
				}
				return
			}
			if refusedCode(err) != tc.code || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("decide: %v; want %s saying %q", err, tc.code, tc.message)
			}
			v := h.get(run.ID)
			if v.Status != record.StatusWaitingApproval || len(v.Decisions) != 0 {
				t.Fatalf("after the refusal: %s with %d decisions; want waiting with none", v.Status, len(v.Decisions))
			}
			if n := h.events(run.ID, tc.event); n != before+1 {
				t.Fatalf("%s events: %d, want %d", tc.event, n, before+1)
			}
			if tc.event == record.EventApprovalUnconfirmed {
				if len(v.Unconfirmed) != 1 || v.Unconfirmed[0].By != lead.ID || v.Unconfirmed[0].Via != in.Via {
					t.Fatalf("unconfirmed: %+v, want one by %s via %s", v.Unconfirmed, lead.ID, in.Via)
				}
				// A second click records nothing more.
				if _, err := h.engine.Decide(ctx, in); refusedCode(err) != tc.code {
					t.Fatalf("second click: %v", err)
				}
				if n := h.events(run.ID, tc.event); n != before+1 {
					t.Fatalf("a second click recorded another %s", tc.event)
				}
			}
			if tc.then == "" {
				return
			}
			got, err = h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: lead, Verdict: record.VerdictApprove, Via: tc.then, AuthTime: authAgo(h, tc.thenAgo)})
			if err != nil || got.Status != tc.status {
				t.Fatalf("confirm: %v, %v; want %s", got, err, tc.status)
			}
			v = h.get(run.ID)
			if len(v.Unconfirmed) != 0 || len(v.Decisions) != 1 || v.Decisions[0].Via != record.ViaWeb {
				t.Fatalf("after the confirmation: unconfirmed %+v, decisions %+v", v.Unconfirmed, v.Decisions)
			}
		})
	}
}

// authAgo is a sign-in ago before the harness's now (zero for 0).
func authAgo(h *harness, ago time.Duration) time.Time {
	if ago == 0 {
		return time.Time{}
	}
	return h.clock.Now().Add(-ago)
}

// TestStepUpEachApprovalOfAQuorumIsConfirmedAndTheDeadlineHolds: with a
// quorum of two, each approver's Slack approval waits for their own
// confirmation (one confirmed is one approval, not two); a confirmation
// after the deadline is refused and the run expires.
func TestStepUpEachApprovalOfAQuorumIsConfirmedAndTheDeadlineHolds(t *testing.T) {
	h := stepUpHarness(t, 2)
	run := h.submit(refund("PAY-1", 119))
	decide := func(who string, via record.Via) error {
		_, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: who}, Verdict: record.VerdictApprove, Via: via, AuthTime: h.clock.Now()})
		return err
	}
	for _, who := range []string{"U0LEAD0001", "U0LEAD0002"} {
		if err := decide(who, record.ViaSlack); refusedCode(err) != record.CodeConfirmOnWeb {
			t.Fatalf("%s in Slack: %v", who, err)
		}
	}
	if err := decide("U0LEAD0001", record.ViaWeb); err != nil {
		t.Fatal(err)
	}
	if v := h.get(run.ID); v.Status != record.StatusWaitingApproval || len(v.Unconfirmed) != 1 || v.Unconfirmed[0].By != "U0LEAD0002" {
		t.Fatalf("one of two confirmed: %s, unconfirmed %+v; want waiting for U0LEAD0002", v.Status, v.Unconfirmed)
	}
	h.clock.Advance(73 * time.Hour)
	if err := decide("U0LEAD0002", record.ViaWeb); refusedCode(err) != record.CodeExpired {
		t.Fatalf("confirmation after the deadline: %v, want expired", err)
	}
	if v := h.get(run.ID); v.Status != record.StatusExpired {
		t.Fatalf("after a late confirmation: %s, want expired", v.Status)
	}
}

// TestStepUpRuleCannotBeForced: a forced approval would skip the fresh
// sign-in, so policy refuses a step-up rule with a break_glass, and the
// engine refuses to force a gate that asks for one.
func TestStepUpRuleCannotBeForced(t *testing.T) {
	h := newHarness(t)
	_, err := policy.New("rev-1", []policy.Rule{
		{Name: "large-refund", When: "true", Risk: "high",
			Approval:   &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: 3600, StepUp: 300},
			BreakGlass: managersForce},
	}, h.roles)
	if err == nil || !strings.Contains(err.Error(), "cannot be forced") {
		t.Fatalf("policy with step_up and break_glass: %v", err)
	}
}
