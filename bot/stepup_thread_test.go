package bot_test

import (
	"context"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/fixtures"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// stepUpSection is the example of docs/configuration.md these tests run.
const stepUpSection = "Confirming approvals on the web"

// TestAnUnconfirmedApprovalRepliesInTheThread: the approval message's
// thread is told who approved in Slack, why it does not count yet and where
// to confirm; a second click by the same person queues no second reply.
func TestAnUnconfirmedApprovalRepliesInTheThread(t *testing.T) {
	ctx := context.Background()
	cfg := docConfig(t, stepUpSection)
	h := newDispatchHarnessFor(t, cfg, bot.Outbox{})
	h.disp.ConsoleURL = cfg.UI.BaseURL
	h.disp.Render = bot.NewRenderer(h.engine, h.engine.Roles(), nil, "", cfg.UI.BaseURL, h.clock)
	body, err := fixtures.Proposal("refund-double-charge")
	if err != nil {
		t.Fatal(err)
	}
	p, err := workflow.ParseProposal(body)
	if err != nil {
		t.Fatal(err)
	}
	run, err := h.engine.Submit(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	approval := h.slack.Messages()[0]
	link := "<https://signoff.example.com/ui/runs/" + run.ID + "|"
	if said := unescapeJSON(approval.Blocks); !strings.Contains(said, link) || !strings.Contains(said, "count only once confirmed on the web console after a sign-in within 5m") {
		t.Fatalf("the approval message does not say where to confirm: %s", said)
	}
	for range 2 {
		_, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: record.ViaSlack})
		if !record.IsRefused(err, record.CodeConfirmOnWeb) {
			t.Fatalf("a Slack approval: %v", err)
		}
		h.deliver(t)
	}
	replies := threadReplies(h.slack, approval.TS)
	if len(replies) != 1 {
		t.Fatalf("%d thread replies, want one: %+v", len(replies), replies)
	}
	said := replies[0].Text + unescapeJSON(replies[0].Blocks)
	for _, want := range []string{"<@U0LEAD0001> approved via slack", "needs confirming on the web", "within 5m", link} {
		if !strings.Contains(said, want) {
			t.Fatalf("the reply does not say %q: %+v", want, replies[0])
		}
	}
	// Confirmed on the page: the run goes on, and the message no longer
	// asks anyone to confirm.
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: record.ViaWeb, AuthTime: h.clock.Now()}); err != nil {
		t.Fatalf("the approval on the web: %v", err)
	}
	h.deliver(t)
	for _, m := range h.slack.Messages() {
		if m.TS != approval.TS {
			continue
		}
		if m.Updates == 0 || !strings.Contains(unescapeJSON(m.Blocks), "*Approved* by <@U0LEAD0001>") {
			t.Fatalf("the message was not rewritten for the approval: %+v", m)
		}
		if strings.Contains(unescapeJSON(m.Blocks), "count only once confirmed") {
			t.Fatalf("the decided message still asks to confirm: %s", m.Blocks)
		}
	}
}
