package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// TestStepUpConfirmationOnTheRunPage: an approval of a step-up rule given
// in Slack waits on the run's page for its confirmation; the console sends
// the sign-in's time, so a sign-in older than the rule allows is refused in
// words with a link to sign in again, and after a fresh login the same
// person's approval counts, via web.
func TestStepUpConfirmationOnTheRunPage(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "payout", `{"amount":500}`, "pay out")
	_, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: id, Approver: record.Person{ID: lead}, Verdict: record.VerdictApprove, Via: record.ViaSlack})
	if !record.IsRefused(err, record.CodeConfirmOnWeb) {
		t.Fatalf("a Slack approval of a step-up rule: %v", err)
	}
	b := h.browser(t)
	b.login(lead)
	page := b.get("/ui/runs/" + id)
	for _, want := range []string{"signed in within the last 5m", "Waiting for their confirmation here", lead + "</strong> (team_lead) approved via slack", "approval_unconfirmed"} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("the run page does not say %q:\n%s", want, page.body)
		}
	}
	h.clock.Advance(6 * time.Minute)
	p := b.decide(id, "approve", "")
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "sign in again to confirm: your sign-in is older than 5m") ||
		!strings.Contains(p.body, `/ui/login?max_age=300&amp;next=%2Fui%2Fruns%2F`+id+`&amp;prompt=login`) {
		t.Fatalf("a stale sign-in's approval: %d\n%s", p.status, p.body)
	}
	h.wantStatus(t, id, record.StatusWaitingApproval)
	b.login(lead)
	if p := b.decide(id, "approve", ""); p.status != http.StatusSeeOther {
		t.Fatalf("after a fresh login: %d\n%s", p.status, p.body)
	}
	v := h.wantStatus(t, id, record.StatusExecuting)
	if len(v.Decisions) != 1 || v.Decisions[0].Via != record.ViaWeb || len(v.Unconfirmed) != 0 {
		t.Fatalf("decisions %+v, unconfirmed %+v: want one via web and none waiting", v.Decisions, v.Unconfirmed)
	}
}
