package bot_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// breakGlassConfig is the example of docs/configuration.md, "Break-glass".
func breakGlassConfig(t *testing.T) *config.Config {
	t.Helper()
	return docConfig(t, "Break-glass")
}

// A forced approval is announced once in the audit channel, mentioning who
// would have been asked and showing the justification inert; the approval
// message is rewritten and says who forced it and why.
func TestAForcedApprovalIsAnnouncedInTheAuditChannel(t *testing.T) {
	ctx := context.Background()
	cfg := breakGlassConfig(t)
	h := newDispatchHarnessFor(t, cfg, bot.Outbox{AuditChannel: cfg.Slack.AuditChannel})
	run := h.submitAs(t, "agent:resolver", false)
	h.deliver(t)
	approval := h.slack.Messages()[0]
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0IC000001"}, Verdict: record.VerdictApprove,
		Reason: "checkout down <!channel> *now*", Via: "slack", Force: true}); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	h.deliver(t)
	var audit []string
	for _, m := range h.slack.Messages() {
		if m.Channel == "C0AUDIT0001" {
			audit = append(audit, unescapeJSON(m.Blocks))
		}
		if m.TS == approval.TS && m.Updates == 0 {
			t.Errorf("the approval message was not rewritten after the force")
		}
	}
	if len(audit) != 1 {
		t.Fatalf("%d announcements in the audit channel: %q", len(audit), audit)
	}
	body := audit[0]
	for _, want := range []string{"Approval forced", "<@U0IC000001>", "incident_commander", run.ID, "<@U0LEAD0001>", "<@U0LEAD0002>", "*security* or above"} {
		if !strings.Contains(body, want) {
			t.Errorf("announcement lacks %q: %s", want, body)
		}
	}
	if strings.Contains(body, "<!channel>") {
		t.Errorf("the justification is not inert: %s", body)
	}
	v, err := h.engine.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(bot.RenderRun(v, bot.RenderContext{Now: h.clock.now}))
	if err != nil {
		t.Fatal(err)
	}
	if living := unescapeJSON(string(b)); !strings.Contains(living, "Forced by <@U0IC000001>: checkout down") || strings.Contains(living, "<!channel>") {
		t.Fatalf("the approval message does not show the force inert: %s", living)
	}
}

// The review of a forced approval is reminded in the audit channel at its
// points (halfway, an hour before it is due), each once across a restart,
// mentioning the review's role; a reminder of a review acknowledged before
// it is delivered is dropped.
func TestAReviewIsRemindedOnceAtEachPoint(t *testing.T) {
	ctx := context.Background()
	cfg := breakGlassConfig(t)
	h := newDispatchHarnessFor(t, cfg, bot.Outbox{AuditChannel: cfg.Slack.AuditChannel})
	h.disp.AuditChannel = cfg.Slack.AuditChannel
	run := h.submitAs(t, "agent:resolver", false)
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0IC000001"}, Verdict: record.VerdictApprove,
		Reason: "outage", Via: "slack", Force: true}); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	start := h.clock.now
	queue := func(at time.Duration, want int) {
		t.Helper()
		h.clock.now = start.Add(at)
		if n, err := h.disp.QueueReviewReminders(ctx); err != nil || n != want {
			t.Fatalf("at %s: queued %d, %v; want %d", at, n, err, want)
		}
	}
	reminders := func() []string {
		var out []string
		for _, m := range h.slack.Messages() {
			if b := unescapeJSON(m.Blocks); m.Channel == "C0AUDIT0001" && strings.Contains(b, "Review reminder") {
				out = append(out, b)
			}
		}
		return out
	}
	queue(12*time.Hour-time.Millisecond, 0)
	queue(12*time.Hour, 1)
	queue(12*time.Hour+time.Minute, 0)
	h.deliver(t)
	if got := reminders(); len(got) != 1 || !strings.Contains(got[0], "<@U0SEC00001>") || !strings.Contains(got[0], run.ID) || strings.Contains(got[0], "<@U0IC000001>,") {
		t.Fatalf("reminders %q", got)
	}
	again := &bot.Dispatcher{Engine: h.engine, Slack: bot.NewAPI("xoxb-test", h.slack.URL(), 5*time.Second), Channel: "C0APPROVALS", AuditChannel: "C0AUDIT0001", Clock: h.clock, Render: testRender}
	h.clock.now = start.Add(13 * time.Hour)
	if n, err := again.QueueReviewReminders(ctx); err != nil || n != 0 {
		t.Fatalf("after a restart: queued %d, %v", n, err)
	}
	queue(23*time.Hour, 1)
	if _, err := h.engine.AcknowledgeReview(ctx, run.ID, record.Person{ID: "U0SEC00001"}, ""); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	if got := reminders(); len(got) != 1 {
		t.Fatalf("a reminder of an acknowledged review was sent: %q", got)
	}
	queue(30*time.Hour, 0)
}

func TestReviewReminderPoints(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		within time.Duration
		want   []time.Duration
	}{
		{24 * time.Hour, []time.Duration{12 * time.Hour, 23 * time.Hour}},
		{4 * time.Hour, []time.Duration{3 * time.Hour}},
		{30 * time.Minute, []time.Duration{15 * time.Minute}},
	} {
		got := bot.ReviewReminderPoints(at, at.Add(tc.within))
		if len(got) != len(tc.want) {
			t.Fatalf("within %s: %v, want %v", tc.within, got, tc.want)
		}
		for i := range got {
			if got[i].Sub(at) != tc.want[i] {
				t.Fatalf("within %s: %v, want %v", tc.within, got, tc.want)
			}
		}
	}
}
