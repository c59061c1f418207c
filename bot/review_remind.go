package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
)

// reviewRemindGap is the least time between two reminders of one review.
const reviewRemindGap = 4 * time.Hour

// ReviewReminderPoints are when the review of a force made at forced and
// due at due is reminded: halfway and an hour before it is due, each later
// than the force, none within reviewRemindGap of the next (the later one is
// kept), earliest first.
func ReviewReminderPoints(forced, due time.Time) []time.Time {
	candidates := []time.Time{forced.Add(due.Sub(forced) / 2), due.Add(-time.Hour)}
	var out []time.Time
	for i := len(candidates) - 1; i >= 0; i-- {
		p := candidates[i]
		if !p.After(forced) || len(out) > 0 && out[0].Sub(p) < reviewRemindGap {
			continue
		}
		out = append([]time.Time{p}, out...)
	}
	return out
}

// ReviewReminderKey is the once-key of the reminder of run id's review at
// point: queued once, whichever server or restart finds it due.
func ReviewReminderKey(runID string, point time.Time) string {
	return "review-reminder/" + runID + "/" + strconv.FormatInt(point.UnixMilli(), 10)
}

// QueueReviewReminders queues, for each review not acknowledged yet, the
// reminder of the latest of its points that has passed, once (its key); a
// point passed while a later one is due too is not sent. It returns how
// many it queued. Without an audit channel nothing is reminded.
func (d *Dispatcher) QueueReviewReminders(ctx context.Context) (int, error) {
	if d.AuditChannel == "" {
		return 0, nil
	}
	rs, err := d.Engine.PendingReviews(ctx)
	if err != nil {
		return 0, err
	}
	now, n := d.now(), 0
	for _, r := range rs {
		var due time.Time
		for _, p := range ReviewReminderPoints(r.CreatedAt, r.Due) {
			if !p.After(now) {
				due = p
			}
		}
		if due.IsZero() {
			continue
		}
		body, err := json.Marshal(OutboxPayload{RunID: r.RunID, To: d.AuditChannel})
		if err != nil {
			return n, fmt.Errorf("encode the review reminder of run %s: %w", r.RunID, err)
		}
		m := &record.OutboxMessage{RunID: ReviewReminderKey(r.RunID, due), Kind: KindReviewReminder, Payload: body, NextAttempt: now, CreatedAt: now}
		queued, err := d.Engine.Outbox().Queue(ctx, m)
		if err != nil {
			return n, err
		}
		if queued {
			n++
			d.log().Info("review reminder queued", "run_id", r.RunID, "point", due)
		}
	}
	return n, nil
}

// sendReviewReminder posts the reminder of a review in the audit channel,
// mentioning the members of its role; a review acknowledged by then is not
// reminded.
func (d *Dispatcher) sendReviewReminder(ctx context.Context, m *record.OutboxMessage) error {
	var p OutboxPayload
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return fmt.Errorf("read review reminder row %d: %w", m.ID, err)
	}
	rs, err := d.Engine.PendingReviews(ctx)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.RunID != p.RunID {
			continue
		}
		blocks, text := RenderReviewReminder(r, d.Engine.Roles(), d.now())
		ch, ts, err := d.postOnce(ctx, m, p.To, "", blocks, text)
		if err != nil {
			return err
		}
		d.log().Info("slack review reminder sent", "run_id", r.RunID, "channel", ch, "ts", ts)
		return nil
	}
	d.log().Info("slack review reminder dropped: the review was acknowledged", "run_id", p.RunID)
	return nil
}

// RenderReviewReminder reminds the review's role (its members mentioned)
// that a forced approval waits for their acknowledgement.
func RenderReviewReminder(r *record.Review, roles *policy.Roles, now time.Time) ([]slack.Block, string) {
	var who []string
	if roles != nil {
		for i, id := range roles.Members(r.Role) {
			if i == maxMentions {
				who = append(who, "…")
				break
			}
			if id != r.ForcedBy {
				who = append(who, mdMention(id, ""))
			}
		}
	}
	lead := ":alarm_clock: Review reminder"
	if len(who) > 0 {
		lead += " for " + strings.Join(who, ", ")
	}
	lines := []string{
		lead + ": the approval of run " + mdCode(r.RunID, 100) + " was forced by " + mdMention(r.ForcedBy, "") + ": " + mdEscape(cutText(r.Reason, 300)),
		"Its review by *" + mdEscape(r.Role) + "* or above is due " + slackDate(r.Due) + " (" + untilText(now, r.Due) + "): `/runs ack " + mdEscape(r.RunID) + "` or `signoff review ack`.",
	}
	text := cutLines(lines, MaxSectionText, func(k int) string { return fmt.Sprintf("…and %d more lines", k) })
	return []slack.Block{bkSection(text)}, "Review reminder: the forced approval of run " + r.RunID + " waits for its review."
}
