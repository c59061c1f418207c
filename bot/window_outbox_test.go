package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// TestApprovalOutsideTheWindowRewritesTheMessageOnce: an approval outside
// its window schedules the run in the decision's own commit, so the
// approval message is rewritten once for it, saying scheduled (never
// executing), and once more only when the run ran at the opening.
func TestApprovalOutsideTheWindowRewritesTheMessageOnce(t *testing.T) {
	const approval = "approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}"
	// The harness's clock reads Monday 09:00 UTC: the window opens at 10:00.
	y := strings.Replace(string(config.DefaultYAML()), approval, approval+`
      window: {days: sun-sat, from: "10:00", to: "11:00", tz: UTC}`, 1)
	cfg, err := config.Parse("signoff.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	h := newDispatchHarnessFor(t, cfg, bot.Outbox{})
	ctx := context.Background()
	run := h.submitRefund(t)
	h.deliver(t)
	updates := func() int {
		t.Helper()
		var ms []*record.OutboxMessage
		if err := h.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
			var err error
			ms, err = tx.OutboxForRun(ctx, run.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range ms {
			if m.Kind == bot.KindUpdate {
				n++
			}
		}
		return n
	}
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	// What a server does next: follow the run, and its workers.
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Work(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if n := updates(); n != 1 {
		t.Fatalf("%d rewrites queued for the approval, want 1", n)
	}
	h.deliver(t)
	msgs := h.slack.Messages()
	if len(msgs) != 1 || msgs[0].Updates != 1 || !strings.Contains(msgs[0].Text, string(record.StatusScheduled)) {
		t.Fatalf("after the approval: %+v", msgs)
	}
	h.clock.now = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for range 2 {
		if _, err := h.engine.Work(ctx, 10); err != nil {
			t.Fatal(err)
		}
	}
	h.deliver(t)
	if msgs := h.slack.Messages(); len(msgs) != 1 || !strings.Contains(msgs[0].Text, string(record.StatusDone)) {
		t.Fatalf("after the opening: %+v", msgs)
	}
}
