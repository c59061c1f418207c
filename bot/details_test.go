package bot_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// The approval message's thread tells the details, each once and in order:
// the evidence and checks at submit, the decision with its reason (inert),
// the execution attempt, the receipt and the outcome, the last ones after
// the request was decided. A detail whose message is not posted yet waits
// for it, and a restarted dispatcher sends none again.
func TestDetailsReplyInTheThreadOnceEachInOrder(t *testing.T) {
	ctx := context.Background()
	h := newDispatchHarnessFor(t, config.Default(), bot.Outbox{Details: true})
	h.slack.FailNext("chat.postMessage", http.StatusInternalServerError, "")
	run := h.submitRefund(t)
	if n, _ := h.disp.DeliverDue(ctx, 0); n != 0 {
		t.Fatalf("delivered %d while Slack failed the post", n)
	}
	if len(h.slack.Messages()) != 0 {
		t.Fatalf("a detail was posted before its message: %+v", h.slack.Messages())
	}
	h.clock.now = h.clock.now.Add(time.Minute)
	h.deliver(t)
	msgs := h.slack.Messages()
	if len(msgs) != 2 || msgs[0].ThreadTS != "" {
		t.Fatalf("want the approval message and the submit detail: %+v", msgs)
	}
	approval := msgs[0]

	reason := "<!channel> *checked* the ledger"
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Reason: reason, Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)

	replies := threadReplies(h.slack, approval.TS)
	want := []string{"*Evidence*", ":white_check_mark: *Approved* by <@U0LEAD0001>", ":gear: Calling action 1", ":receipt: Action 1", "*Outcome*: done"}
	if len(replies) != len(want) {
		t.Fatalf("%d replies in the thread, want %d: %+v", len(replies), len(want), replies)
	}
	for i, r := range replies {
		body := unescapeJSON(r.Blocks)
		if r.Channel != approval.Channel || !strings.Contains(body, want[i]) {
			t.Errorf("reply %d should say %q: %s", i, want[i], body)
		}
	}
	decision := unescapeJSON(replies[1].Blocks)
	if strings.Contains(decision, "<!channel>") || !strings.Contains(decision, "`&lt;!channel&gt; *checked* the ledger`") {
		t.Errorf("the reason is not shown inert: %s", decision)
	}
	if top := len(h.slack.Messages()) - len(replies); top != 1 {
		t.Errorf("%d messages outside the thread, want the approval message alone", top)
	}

	again := &bot.Dispatcher{Engine: h.engine, Slack: bot.NewAPI("xoxb-test", h.slack.URL(), 5*time.Second), Channel: "C0APPROVALS", Clock: h.clock, Render: testRender}
	if n, err := again.DeliverDue(ctx, 0); err != nil || n != 0 {
		t.Fatalf("after a restart: delivered %d, %v", n, err)
	}
	if n := len(threadReplies(h.slack, approval.TS)); n != len(want) {
		t.Fatalf("after a restart %d replies, want %d", n, len(want))
	}
}

// Without Details, the thread holds no detail replies.
func TestNoDetailsWithoutTheOption(t *testing.T) {
	h := newDispatchHarness(t)
	h.submitRefund(t)
	h.deliver(t)
	if msgs := h.slack.Messages(); len(msgs) != 1 {
		t.Fatalf("messages %+v", msgs)
	}
}

// An edit replies in the thread of the message it was made on, saying what
// it changed, field by field, from the run's history.
func TestAnEditRepliesWithWhatItChanged(t *testing.T) {
	ctx := context.Background()
	h := newDispatchHarnessFor(t, config.Default(), bot.Outbox{Details: true})
	run := h.submitRefund(t)
	h.deliver(t)
	approval := h.slack.Posts()[0]
	edit := json.RawMessage(`{"order_id":"LK-507862","payment_id":"PAY-507862-2","amount":60,"currency":"CAD","reason_code":"RFD-DOUBLE"}`)
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove,
		Reason: "only the lamp", Via: "slack", Edit: edit}); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	replies := h.slack.Replies(approval.TS)
	if len(replies) < 2 {
		t.Fatalf("replies %+v", replies)
	}
	body := unescapeJSON(replies[1].Blocks)
	for _, want := range []string{":pencil2: *Edited* by <@U0LEAD0001>", "`only the lamp`", "`request_refund.amount`: `119` → `60`"} {
		if !strings.Contains(body, want) {
			t.Errorf("the edit's reply does not say %q: %s", want, body)
		}
	}
}

// A reply that Slack refuses for a while holds back the replies queued
// after it, and none is posted twice: the thread reads in order.
func TestAFailedDetailHoldsBackTheLaterOnes(t *testing.T) {
	ctx := context.Background()
	h := newDispatchHarnessFor(t, config.Default(), bot.Outbox{Details: true})
	run := h.submitRefund(t)
	h.deliver(t)
	approval := h.slack.Posts()[0]
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	h.slack.FailNext("chat.postMessage", http.StatusTooManyRequests, "30")
	h.deliver(t)
	if replies := h.slack.Replies(approval.TS); len(replies) != 1 {
		t.Fatalf("while the decision's reply waits, %d replies: %+v", len(replies), replies)
	}
	h.clock.now = h.clock.now.Add(31 * time.Second)
	h.deliver(t)
	replies := h.slack.Replies(approval.TS)
	want := []string{"*Evidence*", "*Approved*", ":gear: Calling", ":receipt:", "*Outcome*"}
	if len(replies) != len(want) {
		t.Fatalf("%d replies, want %d", len(replies), len(want))
	}
	for i, r := range replies {
		if !strings.Contains(r.Blocks, want[i]) {
			t.Errorf("reply %d should say %q: %s", i, want[i], r.Blocks)
		}
	}
}
