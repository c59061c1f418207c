package bot_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// An approval message whose post reached Slack but whose answer was lost
// is found on the retry, not posted again: its location is recorded, so
// the rewrites after the decision change that one message. A lookup that
// fails posts nothing: the row waits for the next.
func TestAnApprovalMessageWhoseAnswerWasLostIsPostedOnce(t *testing.T) {
	ctx := context.Background()
	h := newDispatchHarness(t)
	h.slack.LoseNext("chat.postMessage")
	run := h.submitRefund(t)
	if n := h.deliver(t); n != 0 {
		t.Fatalf("delivered %d; want the lost answer to leave the row to a retry", n)
	}
	if n := len(h.slack.Posts()); n != 1 {
		t.Fatalf("%d messages in Slack, want the one it took", n)
	}
	if md := h.slack.Posts()[0].Metadata; md["event_type"] != "signoff_outbox" {
		t.Fatalf("the post carries no outbox key: %v", md)
	}

	h.slack.FailNext("conversations.history", http.StatusInternalServerError, "")
	h.clock.now = h.clock.now.Add(time.Minute)
	if n := h.deliver(t); n != 0 || len(h.slack.Posts()) != 1 {
		t.Fatalf("delivered %d, %d messages while the lookup failed", n, len(h.slack.Posts()))
	}
	h.clock.now = h.clock.now.Add(time.Minute)
	if n := h.deliver(t); n != 1 {
		t.Fatalf("delivered %d, want the post recorded", n)
	}
	posts := h.slack.Posts()
	if len(posts) != 1 || len(h.slack.Calls("chat.postMessage")) != 1 {
		t.Fatalf("posted %d times, %d messages; want one", len(h.slack.Calls("chat.postMessage")), len(posts))
	}
	v, err := h.engine.Get(ctx, run.ID)
	if err != nil || v.Requests[0].MessageTS != posts[0].TS {
		t.Fatalf("the request records %+v, want the message %s: %v", v.Requests, posts[0].TS, err)
	}

	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	if m := h.slack.Posts(); len(m) != 1 || m[0].Updates == 0 || strings.Contains(m[0].Blocks, "signoff_approve") {
		t.Fatalf("the decision did not rewrite the one message: %+v", m)
	}
}

// A thread reply whose answer was lost is found in the thread on the
// retry: every detail is in the thread once, in order.
func TestAThreadReplyWhoseAnswerWasLostIsPostedOnce(t *testing.T) {
	ctx := context.Background()
	h := newDispatchHarnessFor(t, config.Default(), bot.Outbox{Details: true})
	run := h.submitRefund(t)
	h.deliver(t)
	approval := h.slack.Posts()[0]

	h.slack.LoseNext("chat.postMessage")
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	if n := len(threadReplies(h.slack, approval.TS)); n != 2 {
		t.Fatalf("%d replies, want the submit detail and the one Slack took", n)
	}
	h.clock.now = h.clock.now.Add(time.Minute)
	h.deliver(t)

	want := []string{"*Evidence*", ":white_check_mark: *Approved* by <@U0LEAD0001>", ":gear: Calling action 1", ":receipt: Action 1", "*Outcome*: done"}
	replies := threadReplies(h.slack, approval.TS)
	if len(replies) != len(want) {
		t.Fatalf("%d replies in the thread, want %d", len(replies), len(want))
	}
	for i, r := range replies {
		if body := unescapeJSON(r.Blocks); !strings.Contains(body, want[i]) {
			t.Errorf("reply %d should say %q: %s", i, want[i], body)
		}
	}
	if len(h.slack.Calls("conversations.replies")) == 0 {
		t.Error("the retry did not look in the thread")
	}
}

// A direct message whose answer was lost is found in the direct message
// channel (conversations.open names it) on the retry.
func TestADirectMessageWhoseAnswerWasLostIsPostedOnce(t *testing.T) {
	h := newOutcomeHarness(t)
	h.slack.LoseNext("chat.postMessage")
	run := h.submitAs(t, "agent:resolver", true)
	if run.Status == record.StatusExecuting {
		var err error
		if run, err = h.engine.Resume(context.Background(), run.ID); err != nil {
			t.Fatal(err)
		}
	}
	if run.Status != record.StatusDone {
		t.Fatalf("status %s, want done", run.Status)
	}
	if n := h.deliver(t); n != 1 {
		t.Fatalf("delivered %d, want the on-call message alone", n)
	}
	h.clock.now = h.clock.now.Add(time.Minute)
	h.deliver(t)
	got := outcomeMessages(h.slack)
	if len(got) != 2 || !strings.HasPrefix(got[0], "dm U0OWNER001: Done") || !strings.HasPrefix(got[1], "C0ONCALL01: Done") {
		t.Fatalf("told %v, want the requester once and the on-call channel", got)
	}
	if len(h.slack.Calls("conversations.open")) == 0 {
		t.Error("the retry did not open the direct message channel to look")
	}
}
