package bot_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// remindConfig is the example of docs/configuration.md, "Reminders before
// the deadline": the doc shows the config these tests run.
func remindConfig(t *testing.T) *config.Config {
	t.Helper()
	return docConfig(t, "Reminders before the deadline")
}

// threadReplies are the replies fake Slack holds in the thread of ts.
func threadReplies(fs *fakeslack.Server, ts string) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range fs.Messages() {
		if m.ThreadTS == ts {
			out = append(out, m)
		}
	}
	return out
}

// A reminder is a reply in the approval message's thread that mentions
// only who may still decide; it is sent once, a restarted dispatcher sends
// it no more, and one whose request was decided before its delivery is
// dropped.
func TestAReminderRepliesInTheThreadMentioningWhoMayStillDecide(t *testing.T) {
	ctx := context.Background()
	cfg := remindConfig(t)
	h := newDispatchHarnessFor(t, cfg, bot.Outbox{})
	run := h.submitAs(t, "agent:resolver", false)
	if run.Status != record.StatusWaitingApproval {
		t.Fatalf("submitted: %s", run.Status)
	}
	h.deliver(t)
	approval := h.slack.Messages()[0]
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)

	h.clock.now = h.clock.now.Add(48 * time.Hour)
	if n, err := h.engine.RemindDue(ctx); err != nil || n != 1 {
		t.Fatalf("reminded %d, %v", n, err)
	}
	h.deliver(t)
	replies := threadReplies(h.slack, approval.TS)
	if len(replies) != 1 || replies[0].Channel != approval.Channel {
		t.Fatalf("replies in the thread %+v", replies)
	}
	body := unescapeJSON(replies[0].Blocks)
	if !strings.Contains(body, "<@U0LEAD0002>") || !strings.Contains(body, "<@U0MGR00001>") || strings.Contains(body, "U0LEAD0001") || !strings.Contains(body, run.ID) {
		t.Fatalf("the reminder should mention the two who have not decided, not who approved: %s", body)
	}

	again := &bot.Dispatcher{Engine: h.engine, Slack: bot.NewAPI("xoxb-test", h.slack.URL(), 5*time.Second), Channel: "C0APPROVALS", Clock: h.clock, Render: testRender}
	if n, err := again.DeliverDue(ctx, 0); err != nil || n != 0 {
		t.Fatalf("after a restart: delivered %d, %v", n, err)
	}

	h.clock.now = h.clock.now.Add(23 * time.Hour)
	if n, err := h.engine.RemindDue(ctx); err != nil || n != 1 {
		t.Fatalf("reminded %d, %v", n, err)
	}
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0002"}, Verdict: record.VerdictReject, Reason: "not a double charge", Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	if replies := threadReplies(h.slack, approval.TS); len(replies) != 1 {
		t.Fatalf("a reminder of a decided request was sent: %+v", replies)
	}
}

// RenderReminder mentions Slack users, shows other ids inert, and says
// when the deadline is.
func TestRenderReminder(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	v := &workflow.RunView{ID: "run_1"}
	r := workflow.RequestView{ID: "req_1", Deadline: now.Add(time.Hour)}
	blocks, text := bot.RenderReminder(v, r, record.ReminderRecord{Before: 3600, At: now, Mention: []string{"U0LEAD0002", "<!channel>"}}, now)
	b, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	body := unescapeJSON(string(b))
	if !strings.Contains(body, "<@U0LEAD0002>") || strings.Contains(body, "<!channel>") || !strings.Contains(body, "in 1h") {
		t.Fatalf("reminder %s", body)
	}
	if !strings.Contains(text, "run_1") || !strings.Contains(text, "2026-12-01 10:00 UTC") {
		t.Fatalf("fallback %q", text)
	}
}

// unescapeJSON undoes encoding/json's escapes of <, > and &.
func unescapeJSON(s string) string {
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(s)
}
