package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/show"
	"github.com/signoff-dev/signoff/workflow"
)

// KindConfirm replies in the thread of a pending request's message when an
// approval of a step-up rule was given in Slack (or anywhere but the web
// console): it does not count until its giver confirms it on the run's page.
const KindConfirm record.OutboxKind = "slack.confirm"

// RunPageURL is the console's page of run id under base (ui.base_url), or
// "" when no base is configured.
func RunPageURL(base, id string) string {
	if base == "" {
		return ""
	}
	return base + "/runs/" + url.PathEscape(id)
}

// confirmLink is the Slack link to the run's page, or words saying where it
// is when the console's address is not configured.
func confirmLink(base, id string) string {
	if u := RunPageURL(base, id); u != "" {
		return "<" + mdLinkURL(u) + "|confirm it on the run's page>"
	}
	return "confirm it on run " + mdCode(id, 100) + "'s page in signoff's web console"
}

// mdLinkURL is u as the target of a mrkdwn link: & is escaped as Slack
// asks, and <, > and | (which would end the link or start its label) are
// percent-encoded, so the link goes exactly where the config says.
func mdLinkURL(u string) string {
	return linkMarkup.Replace(show.Inert(u))
}

var linkMarkup = strings.NewReplacer("&", "&amp;", "<", "%3C", ">", "%3E", "|", "%7C")

// stepUpOf is the step-up max age of the run's gate (0: none).
func stepUpOf(v *workflow.RunView) time.Duration {
	if v.Gate == nil || v.Gate.Approval == nil || v.Gate.Approval.StepUp <= 0 {
		return 0
	}
	return v.Gate.Approval.StepUp.Duration()
}

// stepUpText is the approval message's line of a step-up rule: a click in
// Slack is not yet an approval, where to confirm it, and why. The link is
// built from base (the config) and the run's id, never from what the
// requester wrote.
func stepUpText(v *workflow.RunView, base string) string {
	console, where := "signoff's web console", "approve or confirm on run "+mdCode(v.ID, 100)+"'s page there"
	if u := RunPageURL(base, v.ID); u != "" {
		console, where = "the web console", "<"+mdLinkURL(u)+"|approve or confirm on the run's page>"
	}
	return ":lock: Approvals of this rule count only once confirmed on " + console + " after a sign-in within " +
		mdEscape(show.Duration(stepUpOf(v))) + ", so that a Slack session alone cannot approve: " + where + "."
}

// confirmText is what the clicker is told when their approval waits for its
// confirmation on the web.
func confirmText(base, id string) string {
	return ":lock: Your approval is recorded but does not count yet: this rule asks for approvals confirmed on the web after a fresh sign-in. Sign in and " + confirmLink(base, id) + "."
}

// confirmMessages queue the thread reply of an unconfirmed approval.
func confirmMessages(t *workflow.Transition) ([]*record.OutboxMessage, error) {
	if t.Event != record.EventApprovalUnconfirmed || t.Request == nil || t.State == nil || len(t.State.Unconfirmed) == 0 {
		return nil, nil
	}
	m, err := message(t.Run, KindConfirm, OutboxPayload{RunID: t.Run.ID, RequestID: t.Request.ID})
	if err != nil {
		return nil, err
	}
	return []*record.OutboxMessage{m}, nil
}

// sendConfirm replies in the request's thread who approved and that the
// approval needs its confirmation on the run's page.
func (d *Dispatcher) sendConfirm(ctx context.Context, m *record.OutboxMessage) error {
	var p OutboxPayload
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return fmt.Errorf("read confirmation row %d of run %s: %w", m.ID, m.RunID, err)
	}
	v, err := d.Engine.Get(ctx, m.RunID)
	if err != nil {
		return fmt.Errorf("load run %s: %w", m.RunID, err)
	}
	sent, ch, ts, thread, err := d.replyWhilePending(ctx, m, v, p.RequestID, "confirmation request", func(r workflow.RequestView) ([]slack.Block, string) {
		return RenderConfirm(v, r, d.ConsoleURL)
	})
	if err != nil || !sent {
		return err
	}
	d.log().Info("slack confirmation request sent", "run_id", v.ID, "channel", ch, "ts", ts, "thread_ts", thread)
	return nil
}

// RenderConfirm is the thread reply naming who approved the request
// somewhere else than the web console and are yet to confirm there, with
// the link to the run's page and why.
func RenderConfirm(v *workflow.RunView, r workflow.RequestView, base string) ([]slack.Block, string) {
	maxAge := ""
	if v.Gate != nil && v.Gate.Approval != nil {
		maxAge = show.Duration(v.Gate.Approval.StepUp.Duration())
	}
	var lines []string
	for _, u := range v.Unconfirmed {
		if u.RequestID == r.ID {
			lines = append(lines, fmt.Sprintf(":lock: %s approved via %s: this approval needs confirming on the web before it counts.", mdMention(u.By, ""), mdEscape(string(u.Via))))
		}
	}
	lines = append(lines, "Rule "+mdCode(r.Rule, 100)+" asks for approvals given on signoff's web console after a sign-in within "+mdEscape(maxAge)+", so that a click in Slack alone cannot approve it. Sign in and "+confirmLink(base, v.ID)+".")
	text := cutLines(lines, MaxSectionText, func(k int) string { return fmt.Sprintf("…and %d more lines", k) })
	plain := "Run " + v.ID + ": an approval needs confirming on the web"
	if u := RunPageURL(base, v.ID); u != "" {
		plain += ": " + u
	}
	return []slack.Block{bkSection(text)}, plain
}
