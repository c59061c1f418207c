package bot_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// breakGlassConfig is the example of docs/configuration.md, "Break-glass".
func breakGlassConfig(t *testing.T) *config.Config {
	t.Helper()
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Break-glass\n")
	if !ok {
		t.Fatal(`docs/configuration.md has no section "Break-glass"`)
	}
	_, block, ok := strings.Cut(sec, "```yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal(`"Break-glass" has no yaml block`)
	}
	cfg, err := config.Parse("configuration.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
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
