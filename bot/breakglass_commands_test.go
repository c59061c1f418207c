package bot

import (
	"net/http"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/record"
)

// forceConfig is the built-in config whose large refunds a manager may
// force, reviewed by a team lead within 24h.
func forceConfig(t testing.TB) *config.Config {
	t.Helper()
	const approval = "approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}"
	y := strings.Replace(string(config.DefaultYAML()), approval, approval+"\n      break_glass: {role: manager, review: {role: team_lead, within: 24h}}", 1)
	cfg, err := config.Parse("signoff.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRunsForceAndAck: `/runs force RUN reason…`, a recorded slash command
// signed as Slack signs it, forces the approval for a manager and is
// refused to a team lead; `/runs pending` then shows the review in a
// section of its own until `/runs ack` by a team lead (never the forcer).
func TestRunsForceAndAck(t *testing.T) {
	h := newSlackHarnessWith(t, forceConfig(t))
	v := h.submit("refund-double-charge", "")
	say := func(user, text, want string) {
		t.Helper()
		status, r := h.runsCommand(user, text)
		if status != http.StatusOK {
			t.Fatalf("%s: status %d", text, status)
		}
		if got := replyText(r); !strings.Contains(got, want) {
			t.Fatalf("%s: reply %q, want %q", text, got, want)
		}
	}
	say(leadGrace, "force "+v.ID, "Not enough arguments")
	say(leadGrace, "force "+v.ID+" it is urgent", "Nothing changed: U0LEAD0001 is team_lead; forcing this needs manager or above")
	if got := h.get(v.ID); got.Status != record.StatusWaitingApproval || got.Forced != nil {
		t.Fatalf("a refused force changed the run: %s %+v", got.Status, got.Forced)
	}
	say(manager, "force "+v.ID+" checkout &lt;down&gt; <!channel>", "Forced the approval of run")
	got := h.get(v.ID)
	if got.Status == record.StatusWaitingApproval || got.Forced == nil || got.Forced.By != manager || got.Forced.Reason != "checkout <down> <!channel>" || got.Forced.Via != "slack" {
		t.Fatalf("after the force: %s %+v", got.Status, got.Forced)
	}
	status, r := h.runsCommand(leadGrace, "pending")
	if status != http.StatusOK {
		t.Fatalf("pending: %d", status)
	}
	body := replyText(r)
	if !strings.Contains(body, "Forced approvals to review") || !strings.Contains(body, v.ID) || strings.Contains(body, "<!channel>") {
		t.Fatalf("pending does not show the review, inert: %s", body)
	}
	say(manager, "ack "+v.ID, "Nothing changed: U0MGR00001 forced this approval and may not acknowledge its review")
	say(leadGrace, "ack "+v.ID+" checked with payments", "Acknowledged the review of run")
	_, r = h.runsCommand(leadGrace, "pending")
	if body := replyText(r); strings.Contains(body, "Forced approvals to review") {
		t.Fatalf("pending still shows the review: %s", body)
	}
	say(leadGrace, "ack "+v.ID, "Nothing changed: the review was acknowledged by U0LEAD0001")
}

// TestAcknowledgeButton: a click on Acknowledge, the recorded block_actions
// payload signed as Slack signs it, acknowledges the review for a team
// lead; the forcer's click is refused and told in an ephemeral message.
func TestAcknowledgeButton(t *testing.T) {
	h := newSlackHarnessWith(t, forceConfig(t))
	v := h.submit("refund-double-charge", "")
	if status, r := h.runsCommand(manager, "force "+v.ID+" checkout is down"); status != http.StatusOK || !strings.Contains(replyText(r), "Forced") {
		t.Fatalf("force: %d %q", status, replyText(r))
	}
	click := func(user string) string {
		t.Helper()
		told := len(h.acts.Ephemerals())
		if status, _ := h.click(fixture(t, "block_actions_review_ack.json", Ref{RunID: v.ID}, user, nil)); status != http.StatusOK {
			t.Fatalf("click: status %d", status)
		}
		eph := h.acts.Ephemerals()[told:]
		if len(eph) != 1 || eph[0].Channel != "C0AUDIT0001" || eph[0].User != user {
			t.Fatalf("told %+v", eph)
		}
		return eph[0].Text
	}
	if got := click(manager); !strings.Contains(got, "may not acknowledge its review") {
		t.Fatalf("the forcer's click: %q", got)
	}
	if got := click(leadGrace); !strings.Contains(got, "Acknowledged the review of run") {
		t.Fatalf("a team lead's click: %q", got)
	}
	if got := click(leadGrace); !strings.Contains(got, "the review was acknowledged by U0LEAD0001") {
		t.Fatalf("a second click: %q", got)
	}
}
