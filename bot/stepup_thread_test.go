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
	said := replies[0].Text + strings.NewReplacer(`\u003c`, "<", `\u003e`, ">").Replace(replies[0].Blocks)
	for _, want := range []string{"<@U0LEAD0001> approved via slack", "needs confirming on the web", "within 5m", "<https://signoff.example.com/ui/runs/" + run.ID + "|"} {
		if !strings.Contains(said, want) {
			t.Fatalf("the reply does not say %q: %+v", want, replies[0])
		}
	}
}
