package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// firstOfLast is the index of the first escalation applied by the same
// transition as the last one (same request, same time).
func firstOfLast(es []record.EscalationRecord) int {
	i := len(es) - 1
	for i > 0 && es[i-1].RequestID == es[i].RequestID && es[i-1].At.Equal(es[i].At) {
		i--
	}
	return i
}

// sendEscalation replies in the thread of the request's approval message
// that who may decide it was widened. Like a reminder, it is dropped once
// the request is decided or the run stopped waiting.
func (d *Dispatcher) sendEscalation(ctx context.Context, m *record.OutboxMessage) error {
	var p OutboxPayload
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return fmt.Errorf("read escalation row %d of run %s: %w", m.ID, m.RunID, err)
	}
	v, err := d.Engine.Get(ctx, m.RunID)
	if err != nil {
		return fmt.Errorf("load run %s: %w", m.RunID, err)
	}
	if p.Escalation == nil || *p.Escalation < 0 || *p.Escalation >= len(v.Escalations) {
		return fmt.Errorf("read escalation row %d of run %s: no such escalation", m.ID, m.RunID)
	}
	steps := sameTransition(v.Escalations, *p.Escalation)
	sent, ch, ts, thread, err := d.replyWhilePending(ctx, m, v, p.RequestID, "escalation", func(r workflow.RequestView) ([]slack.Block, string) {
		return RenderEscalation(v, r, steps, d.now())
	})
	if err != nil || !sent {
		return err
	}
	d.log().Info("slack escalation sent", "run_id", v.ID, "channel", ch, "ts", ts, "thread_ts", thread, "steps", len(steps))
	return nil
}

// sameTransition are the escalations from i applied with it.
func sameTransition(es []record.EscalationRecord, i int) []record.EscalationRecord {
	j := i + 1
	for j < len(es) && es[j].RequestID == es[i].RequestID && es[j].At.Equal(es[i].At) {
		j++
	}
	return es[i:j]
}

// escalatedTo is who the escalations name, as Slack text: the roles (or
// above) in bold, the users mentioned.
func escalatedTo(steps []record.EscalationRecord) string {
	var who []string
	for _, s := range steps {
		if s.Role != "" {
			who = append(who, "*"+mdEscape(s.Role)+"* or above")
		}
		for i, u := range s.Users {
			if i == maxMentions {
				who = append(who, fmt.Sprintf("and %d more", len(s.Users)-maxMentions))
				break
			}
			who = append(who, mdMention(u, "")+onTheirBehalf(s.Deputies, u))
		}
	}
	return strings.Join(who, ", ")
}

// onTheirBehalf mentions the delegates of u a step named, as Slack text
// after u's mention: " (or <@B> on their behalf)"; "" when there is none.
func onTheirBehalf(deputies []record.Deputy, u string) string {
	var who []string
	for _, d := range deputies {
		if d.OnBehalfOf == u && len(who) < maxMentions {
			who = append(who, mdMention(d.To, ""))
		}
	}
	if len(who) == 0 {
		return ""
	}
	return " (or " + strings.Join(who, ", ") + " on their behalf)"
}

// mayDecideEscalated reports whether an escalation of the run's current
// request lets this person decide: an escalated role (or one above it) they
// hold, or an escalated user they are. The engine decides; this only keeps
// an early answer from refusing them.
func mayDecideEscalated(roles *policy.Roles, v *workflow.RunView, userID, role string, hasRole bool) bool {
	if v.Gate == nil {
		return false
	}
	for _, e := range v.Escalations {
		if e.RequestID != v.Gate.RequestID {
			continue
		}
		if (e.Role != "" && hasRole && roles.AtLeast(role, e.Role)) || slices.Contains(e.Users, userID) {
			return true
		}
	}
	return false
}

// escalatedLine adds to "Who may approve" who the escalations of the
// current request let decide as well.
func escalatedLine(v *workflow.RunView) string {
	if v.Gate == nil {
		return ""
	}
	var steps []record.EscalationRecord
	for _, e := range v.Escalations {
		if e.RequestID == v.Gate.RequestID {
			steps = append(steps, e)
		}
	}
	if len(steps) == 0 {
		return ""
	}
	return "\n:arrow_double_up: Escalated: also " + escalatedTo(steps)
}

// RenderEscalation is the reply that tells who may now decide a request
// too, and its new deadline when a step extended it.
func RenderEscalation(v *workflow.RunView, r workflow.RequestView, steps []record.EscalationRecord, now time.Time) ([]slack.Block, string) {
	lines := []string{":arrow_double_up: Escalated: this request still waits for a decision, and now " + escalatedTo(steps) + " may decide it too."}
	var extended record.Seconds
	for _, s := range steps {
		extended += s.Extended
	}
	if extended > 0 {
		lines = append(lines, "The deadline moved "+extended.Duration().String()+" later: "+untilText(now, r.Deadline)+" ("+slackDate(r.Deadline)+").")
	}
	lines = append(lines, "Run "+mdCode(v.ID, 100))
	text := cutLines(lines, MaxSectionText, func(k int) string { return fmt.Sprintf("…and %d more lines", k) })
	plain := "Escalated: run " + v.ID + " still waits for a decision; the deadline is " + r.Deadline.UTC().Format("2006-01-02 15:04 UTC") + "."
	return []slack.Block{bkSection(text)}, plain
}
