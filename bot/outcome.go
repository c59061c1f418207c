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

// Permalinker links a posted message (*API has it). A dispatcher whose Slack
// has it links the outcome messages to the approval message.
type Permalinker interface {
	Permalink(ctx context.Context, channel, ts string) (string, error)
}

// sendOutcome posts one outcome message: to the requester's direct messages
// (a post to a user id) or to a notify: recipient. It is sent once; a failed
// call is retried as every row is, so it is sent at least once.
func (d *Dispatcher) sendOutcome(ctx context.Context, m *record.OutboxMessage) error {
	var p OutboxPayload
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return fmt.Errorf("read outcome row %d of run %s: %w", m.ID, m.RunID, err)
	}
	if p.To == "" {
		return fmt.Errorf("read outcome row %d of run %s: no recipient", m.ID, m.RunID)
	}
	v, err := d.Engine.Get(ctx, m.RunID)
	if err != nil {
		return fmt.Errorf("load run %s: %w", m.RunID, err)
	}
	link, err := d.approvalLink(ctx, v)
	if err != nil {
		return err
	}
	blocks, text := RenderOutcome(v, OutcomeNote{Outcome: p.Outcome, ToRequester: m.Kind == KindOutcomeDM, Link: link, Now: d.now()})
	ch, ts, err := d.postOnce(ctx, m, p.To, "", blocks, text)
	if err != nil {
		return err
	}
	d.log().Info("slack outcome sent", "run_id", v.ID, "kind", string(m.Kind), "to", p.To, "channel", ch, "ts", ts, "outcome", string(p.Outcome))
	return nil
}

// approvalLink is the link to the run's approval message: the current
// request's, or the last one posted; "" when none was posted or the
// dispatcher's Slack cannot link.
func (d *Dispatcher) approvalLink(ctx context.Context, v *workflow.RunView) (string, error) {
	pl, ok := d.Slack.(Permalinker)
	if !ok {
		return "", nil
	}
	var posted *workflow.RequestView
	for i := range v.Requests {
		r := &v.Requests[i]
		if r.MessageTS == "" {
			continue
		}
		if posted == nil || v.Gate != nil && r.ID == v.Gate.RequestID {
			posted = r
		}
	}
	if posted == nil {
		return "", nil
	}
	return pl.Permalink(ctx, posted.Channel, posted.MessageTS)
}

// OutcomeTarget is the Slack channel or user an outcome row goes to; "" for
// a row of another kind, or one that cannot be read.
func OutcomeTarget(m *record.OutboxMessage) string {
	if m.Kind != KindOutcomeDM && m.Kind != KindOutcomeNotify {
		return ""
	}
	var p OutboxPayload
	if json.Unmarshal(m.Payload, &p) != nil {
		return ""
	}
	return p.To
}

// OutcomeNote is what an outcome message says besides the run.
type OutcomeNote struct {
	Outcome     record.Status // the status the message announces ("": the run's)
	ToRequester bool          // a direct message to the requester
	Link        string        // the approval message's permalink, "" for none
	Now         time.Time
}

// RenderOutcome is the message that tells someone how a run ended: the
// outcome, who decided and why, the run's id and a link to the approval
// message. What the agent wrote is shown inert, as in the approval message.
func RenderOutcome(v *workflow.RunView, n OutcomeNote) ([]slack.Block, string) {
	shown := *v
	if n.Outcome != "" {
		shown.Status = n.Outcome
	}
	intro := ":bell: A run you are notified of has an outcome."
	if n.ToRequester {
		intro = ":envelope: Your request has an outcome."
	}
	lines := []string{intro, "*" + mdEscape(headline(&shown, time.Time{})) + "*"}
	lines = append(lines, decisionLines(&shown)...)
	if s := stateLine(&shown, RenderContext{Now: n.Now}); s != "" {
		lines = append(lines, s)
	}
	if !n.ToRequester {
		lines = append(lines, "Requested by "+personText(v.Requester)+".")
	}
	if n.Link != "" {
		lines = append(lines, "<"+linkEscape.Replace(n.Link)+"|See the approval message>")
	}
	lines = append(lines, "Run "+mdCode(v.ID, 100))
	text := cutLines(lines, MaxSectionText, func(k int) string { return fmt.Sprintf("…and %d more lines", k) })
	return []slack.Block{bkSection(text)}, FallbackText(&shown)
}

// linkEscape keeps a URL from ending the <url|text> link it is put in.
var linkEscape = strings.NewReplacer("&", "&amp;", "<", "%3C", ">", "%3E", "|", "%7C")
