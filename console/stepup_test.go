package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
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

// TestStepUpSignInAgainReachesTheProvider: the run page's "sign in again"
// link, through the login page, asks the identity provider for a fresh
// authentication (max_age and prompt=login), with the provider's login
// alone and beside the local login.
func TestStepUpSignInAgainReachesTheProvider(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(map[bool]string{false: "provider alone", true: "beside the local login"}[local], func(t *testing.T) {
			h, p := oidcHarness(t, nil, local)
			b := h.browser(t)
			start := "/ui/login?max_age=300&next=%2Fui%2Fruns%2Frun_x&prompt=login"
			got := b.get(start)
			toStart := got.header.Get("Location")
			if local {
				m := regexp.MustCompile(`href="(/ui/oidc/login\?[^"]+)"`).FindStringSubmatch(got.body)
				if m == nil {
					t.Fatalf("the login page offers no provider's login:\n%s", got.body)
				}
				toStart = html.UnescapeString(m[1])
			}
			toIDP := b.get(toStart)
			loc, err := url.Parse(toIDP.header.Get("Location"))
			if err != nil || !strings.HasPrefix(loc.String(), p.m.AuthorizationEndpoint()) {
				t.Fatalf("%s led to %q, then %q: want the provider", start, toStart, toIDP.header.Get("Location"))
			}
			if q := loc.Query(); q.Get("max_age") != "300" || q.Get("prompt") != "login" {
				t.Fatalf("the provider is asked with max_age %q and prompt %q, want 300 and login", q.Get("max_age"), q.Get("prompt"))
			}
		})
	}
}

// TestStepUpAfterAnOIDCLogin: a login whose provider does not say when the
// person authenticated is not taken as a fresh one (the provider may have
// reused a sign-in of hours ago): approving a step-up rule's run is refused
// with the link to sign in again, and after that login, whose token says
// it was just now, the approval counts.
func TestStepUpAfterAnOIDCLogin(t *testing.T) {
	h, p := oidcHarness(t, nil, false)
	id := h.submit(t, bot, "payout", `{"amount":500}`, "pay out")
	p.m.QueueUser(person("sub-ana", "ana@corp.example", true))
	b := h.browser(t)
	b.follow(h.srv.URL + "/ui/runs/" + id)
	got := b.decide(id, "approve", "")
	if got.status != http.StatusForbidden || !strings.Contains(got.body, "when you signed in is not known") ||
		!strings.Contains(got.body, `/ui/login?max_age=300&amp;next=%2Fui%2Fruns%2F`+id+`&amp;prompt=login`) {
		t.Fatalf("approve after a login with no auth_time: %d\n%s", got.status, got.body)
	}
	h.wantStatus(t, id, record.StatusWaitingApproval)
	fresh := person("sub-ana", "ana@corp.example", true)
	fresh.authNow = true
	p.m.QueueUser(fresh)
	if page, _ := b.follow(h.srv.URL + "/ui/login?max_age=300&next=%2Fui%2Fruns%2F" + id + "&prompt=login"); page.status != http.StatusOK {
		t.Fatalf("the fresh login: %d\n%s", page.status, page.body)
	}
	if got := b.decide(id, "approve", ""); got.status != http.StatusSeeOther {
		t.Fatalf("approve after the fresh login: %d\n%s", got.status, got.body)
	}
	v := h.wantStatus(t, id, record.StatusExecuting)
	if len(v.Decisions) != 1 || v.Decisions[0].By != lead || v.Decisions[0].Via != record.ViaWeb {
		t.Fatalf("decisions %+v, want the lead's via web", v.Decisions)
	}
}
