package bot

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
)

const deputy = "U0DEPUTY01"

// TestRunsDelegate: /runs delegate, through the recorded slash command
// form, signed, from a team lead: the person mentioned may then approve on
// the team lead's behalf by a click, and the message's decision says so;
// /runs delegations lists it to both. Every answer is ephemeral.
func TestRunsDelegate(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	status, r := h.runsCommand(leadGrace, "delegate <@U0DEPUTY01|dee> until 2026-12-24 covering my leave")
	if status != http.StatusOK || r.ResponseType != "ephemeral" || !strings.Contains(replyText(r), "<@U0DEPUTY01> may decide on your behalf") {
		t.Fatalf("delegate: %d %q %q", status, r.ResponseType, replyText(r))
	}
	ds, err := h.eng.Delegations(h.ctx, deputy, false)
	if err != nil || len(ds) != 1 || ds[0].From != leadGrace || ds[0].Reason != "covering my leave" ||
		!ds[0].Until.Equal(time.Date(2026, 12, 25, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("delegations %+v, %v", ds, err)
	}
	for _, who := range []string{leadGrace, deputy} {
		if _, r := h.runsCommand(who, "delegations"); !strings.Contains(replyText(r), "<@U0DEPUTY01> may decide on behalf of <@U0LEAD0001>") || r.ResponseType != "ephemeral" {
			t.Errorf("delegations to %s: %q", who, replyText(r))
		}
	}
	if _, r := h.runsCommand(manager, "delegations"); !strings.Contains(replyText(r), "No delegation") {
		t.Errorf("delegations of someone else: %q", replyText(r))
	}
	if status, _ := h.click(fixture(t, "block_actions_approve.json", refOf(v), deputy, nil)); status != http.StatusOK {
		t.Fatalf("click: %d", status)
	}
	a := h.get(v.ID)
	if a.Status == record.StatusWaitingApproval || len(a.Decisions) != 1 || a.Decisions[0].OnBehalfOf != leadGrace {
		t.Fatalf("after the delegate's click: %s %+v", a.Status, a.Decisions)
	}
	if got := strings.Join(decisionLines(a), "\n"); !strings.Contains(got, "*Approved* by <@U0DEPUTY01> on behalf of <@U0LEAD0001> (team_lead)") {
		t.Errorf("the message says %q", got)
	}
}

// Bad delegate commands change nothing and say why.
func TestRunsDelegateRefused(t *testing.T) {
	for _, tc := range []struct{ name, user, text, want string }{
		{"no until", leadGrace, "delegate <@U0DEPUTY01> 2026-12-24", "Say whom and until when"},
		{"a name, not a mention", leadGrace, "delegate @dee until 2026-12-24", "Say whom and until when"},
		{"not a date", leadGrace, "delegate <@U0DEPUTY01> until tomorrow", "not a date"},
		{"to oneself", leadGrace, "delegate <@U0LEAD0001> until 2026-12-24", "cannot delegate to themselves"},
		{"no role to delegate", nobody, "delegate <@U0DEPUTY01> until 2026-12-24", "holds no role"},
		{"in the past", leadGrace, "delegate <@U0DEPUTY01> until 2026-11-01", "not in the future"},
		{"too long", leadGrace, "delegate <@U0DEPUTY01> until 2027-06-01", "at most 90 days"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSlackHarness(t)
			status, r := h.runsCommand(tc.user, tc.text)
			if status != http.StatusOK || !strings.Contains(replyText(r), tc.want) {
				t.Fatalf("%d %q, want %q", status, replyText(r), tc.want)
			}
			if ds, err := h.eng.Delegations(h.ctx, "", true); err != nil || len(ds) != 0 {
				t.Fatalf("stored %+v, %v", ds, err)
			}
		})
	}
}

// FuzzParseDelegate: whatever the text, a parsed delegation names one
// Slack user and a time; anything else is refused with an error.
func FuzzParseDelegate(f *testing.F) {
	for _, s := range []string{
		"delegate <@U0DEPUTY01|dee> until 2026-12-24 covering", "delegate U0DEPUTY01 until 2026-12-24T18:00:00Z",
		"delegate <@U0DEPUTY01> until", "delegate <@U0DEP|x|y> until 2026-12-24", "DELEGATE <@W0ABC> UNTIL 2026-02-30",
		"delegate <@U0DEPUTY01>> until 2026-12-24", "delegate \u00a0<@U0DEPUTY01> until 2026-12-24 &lt;b&gt;",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		a, err := parseDelegate(text)
		if err != nil {
			if a != (delegateArgs{}) {
				t.Fatalf("an error with a result: %+v", a)
			}
			if !errors.Is(err, errDelegateUsage) && !strings.Contains(err.Error(), "not a date") {
				t.Fatalf("an error of another kind: %v", err)
			}
			return
		}
		if !slackUserID.MatchString(a.to.ID) || a.until.IsZero() || a.until.Location() != time.UTC {
			t.Fatalf("parsed %q as %+v", text, a)
		}
	})
}

// TestRecordedDelegateCommand replays /runs delegate as Slack sends it,
// signed: the escaped mention names the delegate, the text's &lt; and &gt;
// are read back, and the answer is ephemeral.
func TestRecordedDelegateCommand(t *testing.T) {
	h := newSlackHarness(t)
	status, body := h.command(fixture(t, "slash_runs_delegate.form", Ref{}, leadGrace, nil))
	if status != http.StatusOK || !strings.Contains(body, `"response_type":"ephemeral"`) || !strings.Contains(body, "may decide on your behalf") {
		t.Fatalf("%d %s", status, body)
	}
	ds, err := h.eng.Delegations(h.ctx, "", false)
	if err != nil || len(ds) != 1 || ds[0].From != leadGrace || ds[0].To != deputy || ds[0].Reason != "covering my leave <back Jan>" {
		t.Fatalf("delegations %+v, %v", ds, err)
	}
	// The same bytes signed with another secret change nothing.
	form := fixture(t, "slash_runs_delegate.form", Ref{}, leadGrace, nil)
	if status, _ := h.post("/slack/commands", form, signed("another secret", h.clock.Now().Unix(), form)); status != http.StatusUnauthorized {
		t.Fatalf("a badly signed command: %d", status)
	}
	if ds, _ := h.eng.Delegations(h.ctx, "", true); len(ds) != 1 {
		t.Fatalf("%d delegations after a badly signed command", len(ds))
	}
}

// TestRecordedUndelegateCommand replays /runs undelegate ID as Slack sends
// it, signed, from the delegator: the delegation ends, the answer is
// ephemeral and says so; the same bytes signed otherwise change nothing.
func TestRecordedUndelegateCommand(t *testing.T) {
	h := newSlackHarness(t)
	d, err := h.eng.Delegate(h.ctx, record.Delegation{From: leadGrace, To: deputy, Until: h.clock.Now().Add(72 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"DELEGATION_ID": d.ID}
	form := fixture(t, "slash_runs_undelegate.form", Ref{}, leadGrace, vars)
	if status, _ := h.post("/slack/commands", form, signed("another secret", h.clock.Now().Unix(), form)); status != http.StatusUnauthorized {
		t.Fatalf("a badly signed command: %d", status)
	}
	if ds, _ := h.eng.Delegations(h.ctx, deputy, false); len(ds) != 1 {
		t.Fatalf("%d delegations hold after a badly signed command", len(ds))
	}
	status, body := h.command(fixture(t, "slash_runs_undelegate.form", Ref{}, leadGrace, vars))
	if status != http.StatusOK || !strings.Contains(body, `"response_type":"ephemeral"`) || !strings.Contains(body, "no longer decides on behalf of") {
		t.Fatalf("%d %s", status, body)
	}
	all, err := h.eng.Delegations(h.ctx, "", true)
	if err != nil || len(all) != 1 || all[0].RevokedBy != leadGrace || all[0].RevokedAt.IsZero() {
		t.Fatalf("delegations %+v, %v", all, err)
	}
	if ds, _ := h.eng.Delegations(h.ctx, deputy, false); len(ds) != 0 {
		t.Fatalf("a revoked delegation still holds: %+v", ds)
	}
}

// TestRunsUndelegate: either form revokes for the delegator; someone the
// delegation is not about, an unknown id, one revoked already and a
// command without its id are refused, saying why, and leave it as it was.
func TestRunsUndelegate(t *testing.T) {
	for _, tc := range []struct {
		name, user, text, want string
		revoked                bool
	}{
		{"undelegate by the delegator", leadGrace, "undelegate ID", "Revoked delegation", true},
		{"delegate revoke by the delegate", deputy, "delegate revoke ID", "Revoked delegation", true},
		{"by someone else", manager, "undelegate ID", "may revoke it", false},
		{"an unknown id", leadGrace, "undelegate dlg_nope", "no delegation dlg_nope", false},
		{"no id", leadGrace, "undelegate", "Say which delegation", false},
		{"two ids", leadGrace, "delegate revoke ID ID", "Say which delegation", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSlackHarness(t)
			d, err := h.eng.Delegate(h.ctx, record.Delegation{From: leadGrace, To: deputy, Until: h.clock.Now().Add(72 * time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			status, r := h.runsCommand(tc.user, strings.ReplaceAll(tc.text, "ID", d.ID))
			if status != http.StatusOK || r.ResponseType != "ephemeral" || !strings.Contains(replyText(r), tc.want) {
				t.Fatalf("%d %q, want %q", status, replyText(r), tc.want)
			}
			ds, err := h.eng.Delegations(h.ctx, deputy, false)
			if err != nil || (len(ds) == 0) != tc.revoked {
				t.Fatalf("holding after: %+v, %v (want revoked %v)", ds, err, tc.revoked)
			}
		})
	}
	h := newSlackHarness(t)
	d, err := h.eng.Delegate(h.ctx, record.Delegation{From: leadGrace, To: deputy, Until: h.clock.Now().Add(72 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	h.runsCommand(leadGrace, "undelegate "+d.ID)
	if _, r := h.runsCommand(leadGrace, "undelegate "+d.ID); !strings.Contains(replyText(r), "revoked already") {
		t.Fatalf("a second revoke: %q", replyText(r))
	}
}
