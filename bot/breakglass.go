package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// breakGlassMessages queues the announcement of a forced approval: one
// message in the audit channel that mentions everyone who would have been
// asked (the members of the approval's role and above), so that one post
// reaches them all and the channel keeps the record. The approval message
// itself is rewritten (updateEvents) and shows who forced it.
func (o Outbox) breakGlassMessages(t *workflow.Transition) ([]*record.OutboxMessage, error) {
	if t.Event != record.EventPolicyBypassed || o.AuditChannel == "" || t.State == nil || t.State.Forced == nil {
		return nil, nil
	}
	m, err := message(t.Run, KindBreakGlass, OutboxPayload{RunID: t.Run.ID, RequestID: t.State.Forced.RequestID, To: o.AuditChannel})
	if err != nil {
		return nil, err
	}
	return []*record.OutboxMessage{m}, nil
}

// sendBreakGlass posts the announcement of a forced approval to the audit
// channel. It is sent once whatever became of the run since: a force is
// announced even if the run has ended by then.
func (d *Dispatcher) sendBreakGlass(ctx context.Context, m *record.OutboxMessage) error {
	var p OutboxPayload
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return fmt.Errorf("read break-glass row %d of run %s: %w", m.ID, m.RunID, err)
	}
	if p.To == "" {
		return fmt.Errorf("read break-glass row %d of run %s: no channel", m.ID, m.RunID)
	}
	v, err := d.Engine.Get(ctx, m.RunID)
	if err != nil {
		return fmt.Errorf("load run %s: %w", m.RunID, err)
	}
	if v.Forced == nil {
		return fmt.Errorf("read break-glass row %d of run %s: the run's approval was not forced", m.ID, m.RunID)
	}
	blocks, text := RenderBreakGlass(v, d.Engine.Roles())
	ch, ts, err := d.postOnce(ctx, m, p.To, "", blocks, text)
	if err != nil {
		return err
	}
	d.log().Info("slack break-glass announced", "run_id", v.ID, "channel", ch, "ts", ts, "by", v.Forced.By)
	return nil
}

// RenderBreakGlass is the announcement of a forced approval: who forced it
// and why (their text, inert), the rule, who would have been asked, and who
// reviews it by when.
func RenderBreakGlass(v *workflow.RunView, roles *policy.Roles) ([]slack.Block, string) {
	f := v.Forced
	rule := ""
	var asked []string
	if g := v.Gate; g != nil {
		rule = g.Rule
		if g.Approval != nil && roles != nil {
			for i, id := range roles.Members(g.Approval.Role) {
				if i == maxMentions {
					asked = append(asked, "…")
					break
				}
				asked = append(asked, mdMention(id, ""))
			}
		}
	}
	lines := []string{
		":rotating_light: *Approval forced* by " + mdMention(f.By, "") + " (" + mdEscape(f.Role) + ") on run " + mdCode(v.ID, 100) + ", rule " + mdCode(rule, 200) + ", bypassing its quorum.",
		"Justification: " + mdEscape(f.Reason),
	}
	if len(asked) > 0 {
		lines = append(lines, "Would have been asked: "+strings.Join(asked, ", "))
	}
	lines = append(lines, "Review by *"+mdEscape(f.ReviewRole)+"* or above due "+slackDate(f.ReviewDue)+".")
	text := cutLines(lines, MaxSectionText, func(k int) string { return fmt.Sprintf("…and %d more lines", k) })
	ack := slack.NewButtonBlockElement(ActionAcknowledge, v.ID, bkPlain("Acknowledge the review"))
	plain := "Approval forced by " + plainText(f.By) + " on run " + v.ID + ": " + plainText(f.Reason) + " (review due " + f.ReviewDue.UTC().Format(time.RFC3339) + ")"
	return []slack.Block{bkSection(text), slack.NewActionBlock("signoff_review_"+v.ID, ack)}, plain
}

// forcedLine is what the approval message says of a forced approval.
func forcedLine(v *workflow.RunView) string {
	if v.Forced == nil {
		return ""
	}
	return ":rotating_light: Forced by " + mdMention(v.Forced.By, "") + ": " + mdEscape(v.Forced.Reason)
}
