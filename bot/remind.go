package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// ThreadPoster replies in a message's thread (*API has it). A dispatcher
// whose Slack lacks it cannot deliver reminders.
type ThreadPoster interface {
	PostReply(ctx context.Context, channel, threadTS string, blocks []slack.Block, text string) (string, string, error)
}

// sendReminder replies in the thread of the request's approval message with
// one of the run's reminders. A reminder whose request was decided (or whose
// run stopped waiting) by the time it is delivered is dropped: nobody is
// reminded of what is done.
func (d *Dispatcher) sendReminder(ctx context.Context, m *record.OutboxMessage) error {
	var p OutboxPayload
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return fmt.Errorf("read reminder row %d of run %s: %w", m.ID, m.RunID, err)
	}
	v, err := d.Engine.Get(ctx, m.RunID)
	if err != nil {
		return fmt.Errorf("load run %s: %w", m.RunID, err)
	}
	if p.Reminder == nil || *p.Reminder < 0 || *p.Reminder >= len(v.Reminders) {
		return fmt.Errorf("read reminder row %d of run %s: no such reminder", m.ID, m.RunID)
	}
	rem := v.Reminders[*p.Reminder]
	sent, ch, ts, thread, err := d.replyWhilePending(ctx, m, v, p.RequestID, "reminder", func(r workflow.RequestView) ([]slack.Block, string) {
		return RenderReminder(v, r, rem, d.now())
	})
	if err != nil || !sent {
		return err
	}
	d.log().Info("slack reminder sent", "run_id", v.ID, "channel", ch, "ts", ts, "thread_ts", thread, "before", rem.Before.Duration().String(), "mentions", len(rem.Mention))
	return nil
}

// RenderReminder is the reply that reminds who may still decide a request
// that its deadline is near: it mentions only them, and says when the
// deadline is.
func RenderReminder(v *workflow.RunView, r workflow.RequestView, rem record.ReminderRecord, now time.Time) ([]slack.Block, string) {
	who := make([]string, 0, len(rem.Mention))
	for _, id := range rem.Mention {
		who = append(who, mdMention(id, ""))
	}
	lead := ":alarm_clock: Reminder"
	if len(who) > 0 {
		lead += " for " + strings.Join(who, ", ")
	}
	lines := []string{
		lead + ": this request still waits for a decision.",
		"The deadline is " + untilText(now, r.Deadline) + " (" + slackDate(r.Deadline) + "); without a decision by then, nothing runs.",
		"Run " + mdCode(v.ID, 100),
	}
	text := cutLines(lines, MaxSectionText, func(k int) string { return fmt.Sprintf("…and %d more lines", k) })
	plain := "Reminder: run " + v.ID + " still waits for a decision; the deadline is " + r.Deadline.UTC().Format("2006-01-02 15:04 UTC") + "."
	return []slack.Block{bkSection(text)}, plain
}
