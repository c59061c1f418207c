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

// escalateConfig is the example of docs/configuration.md, "Escalation".
func escalateConfig(t *testing.T) *config.Config {
	t.Helper()
	return docConfig(t, "Escalation")
}

// An escalation replies in the approval message's thread naming who may
// now decide and the new deadline, and the living message shows it; it is
// sent once, and dropped once the request is decided.
func TestAnEscalationRepliesInTheThreadAndShowsInTheMessage(t *testing.T) {
	ctx := context.Background()
	h := newDispatchHarnessFor(t, escalateConfig(t), bot.Outbox{})
	run := h.submitAs(t, "agent:resolver", false)
	h.deliver(t)
	approval := h.slack.Messages()[0]

	h.clock.now = h.clock.now.Add(4 * time.Hour)
	if n, err := h.engine.EscalateDue(ctx); err != nil || n != 1 {
		t.Fatalf("escalated %d, %v", n, err)
	}
	h.deliver(t)
	replies := threadReplies(h.slack, approval.TS)
	if len(replies) != 1 {
		t.Fatalf("replies in the thread %+v", replies)
	}
	body := unescapeJSON(replies[0].Blocks)
	if !strings.Contains(body, "*team_lead* or above") || !strings.Contains(body, "moved 4h0m0s later") || !strings.Contains(body, run.ID) {
		t.Fatalf("escalation reply %s", body)
	}
	v, err := h.engine.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(bot.RenderRun(v, bot.RenderContext{Now: h.clock.now}))
	if err != nil {
		t.Fatal(err)
	}
	if living := unescapeJSON(string(b)); !strings.Contains(living, "Escalated: also *team_lead* or above") {
		t.Fatalf("the approval message does not show the escalation: %s", living)
	}
	again := &bot.Dispatcher{Engine: h.engine, Slack: bot.NewAPI("xoxb-test", h.slack.URL(), 5*time.Second), Channel: "C0APPROVALS", Clock: h.clock, Render: testRender}
	if n, err := again.DeliverDue(ctx, 0); err != nil || n != 0 {
		t.Fatalf("after a restart: delivered %d, %v", n, err)
	}

	h.clock.now = h.clock.now.Add(4 * time.Hour)
	if n, err := h.engine.EscalateDue(ctx); err != nil || n != 1 {
		t.Fatalf("escalated %d, %v", n, err)
	}
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0OUT00001"}, Verdict: record.VerdictReject, Reason: "no", Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	if replies := threadReplies(h.slack, approval.TS); len(replies) != 1 {
		t.Fatalf("an escalation of a decided request was sent: %+v", replies)
	}
}

// RenderEscalation mentions Slack users, shows other ids inert, and says
// the new deadline when a step extended it.
func TestRenderEscalation(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	v := &workflow.RunView{ID: "run_1"}
	r := workflow.RequestView{ID: "req_1", Deadline: now.Add(2 * time.Hour)}
	blocks, text := bot.RenderEscalation(v, r, []record.EscalationRecord{{RequestID: "req_1", Role: "manager", Extended: 3600}, {RequestID: "req_1", Users: []string{"U0BOSS0001", "<!channel>"}}}, now)
	b, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	body := unescapeJSON(string(b))
	if !strings.Contains(body, "<@U0BOSS0001>") || strings.Contains(body, "<!channel>") || !strings.Contains(body, "*manager* or above") || !strings.Contains(body, "in 2h") {
		t.Fatalf("escalation %s", body)
	}
	if !strings.Contains(text, "run_1") || !strings.Contains(text, "2026-12-01 11:00 UTC") {
		t.Fatalf("fallback %q", text)
	}
}

// An escalation to a user says who may decide on their behalf, with them.
func TestRenderEscalationNamesTheDelegates(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	v := &workflow.RunView{ID: "run_1"}
	r := workflow.RequestView{ID: "req_1", Deadline: now.Add(2 * time.Hour)}
	step := record.EscalationRecord{RequestID: "req_1", Users: []string{"U0BOSS0001", "U0BOSS0002"},
		Deputies: []record.Deputy{{To: "U0DEPUTY01", OnBehalfOf: "U0BOSS0001"}, {To: "<!here>", OnBehalfOf: "U0BOSS0001"}}}
	blocks, _ := bot.RenderEscalation(v, r, []record.EscalationRecord{step}, now)
	b, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	body := unescapeJSON(string(b))
	if !strings.Contains(body, "<@U0BOSS0001> (or <@U0DEPUTY01>, ") || !strings.Contains(body, " on their behalf), <@U0BOSS0002>") || strings.Contains(body, "<!here>") {
		t.Fatalf("escalation %s", body)
	}
}
