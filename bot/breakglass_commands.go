package bot

import (
	"context"
	"log/slog"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// reviewKeeper is an engine that keeps the follow-up reviews of forced
// approvals (*workflow.Engine is one).
type reviewKeeper interface {
	PendingReviews(ctx context.Context) ([]*record.Review, error)
	AcknowledgeReview(ctx context.Context, id string, by record.Person, note string) (*record.Review, error)
}

var _ reviewKeeper = (*workflow.Engine)(nil)

// force is `/runs force RUN reason…`: a forced approval (break-glass) by
// who, the rest of the text its justification. The engine checks the rule's
// break_glass role, the requester, the deadline and the fingerprint.
func (s *Server) force(ctx context.Context, who record.Person, id, reason string, log *slog.Logger) Response {
	run, err := s.eng.Decide(ctx, workflow.DecideInput{RunID: id, Approver: who, Verdict: record.VerdictApprove, Reason: reason, Via: record.ViaSlack, Force: true})
	if err != nil {
		return reply(s.commandRefusal(err, log))
	}
	log.Warn("slack forced approval recorded", "run_id", id, "status", string(run.Status))
	return reply("Forced the approval of run " + mdCode(id, 100) + ". It is announced in the audit channel and its review is open; the approval message will say so.")
}

// ackReview is `/runs ack RUN [note…]`: the acknowledgement of a forced
// approval's review.
func (s *Server) ackReview(ctx context.Context, who record.Person, id, note string, log *slog.Logger) Response {
	rk, ok := s.eng.(reviewKeeper)
	if !ok {
		return reply("This signoff keeps no reviews.")
	}
	if _, err := rk.AcknowledgeReview(ctx, id, who, note); err != nil {
		return reply(s.commandRefusal(err, log))
	}
	log.Info("slack review acknowledged", "run_id", id)
	return reply("Acknowledged the review of run " + mdCode(id, 100) + ".")
}

// reviewBlocks are the pending reviews as `/runs pending` shows them, in a
// section of their own after the waiting runs; none when there are none.
func (s *Server) reviewBlocks(ctx context.Context, log *slog.Logger) []slack.Block {
	rk, ok := s.eng.(reviewKeeper)
	if !ok {
		return nil
	}
	rs, err := rk.PendingReviews(ctx)
	if err != nil {
		log.Error("list pending reviews", "err", err)
		return []slack.Block{bkSection("signoff could not list the reviews of forced approvals (an internal error).")}
	}
	if len(rs) == 0 {
		return nil
	}
	now := s.clock.Now()
	blocks := []slack.Block{slack.NewHeaderBlock(bkPlain("Forced approvals to review"))}
	for i, r := range rs {
		if i == pendingPageSize {
			blocks = append(blocks, slack.NewContextBlock("", bkMrkdwn("…and more: `signoff reviews` lists them all")))
			break
		}
		blocks = append(blocks, bkSection(reviewLine(r, now)))
	}
	return blocks
}

func reviewLine(r *record.Review, now time.Time) string {
	return "*" + mdCode(r.RunID, 100) + "* forced by " + mdMention(r.ForcedBy, "") + ": " + mdEscape(cutText(r.Reason, 300)) +
		"\nreview by *" + mdEscape(r.Role) + "* or above · due " + slackDate(r.Due) + " (" + untilText(now, r.Due) + ")"
}

// ActionAcknowledge is the action_id of the Acknowledge button on the
// announcement of a forced approval; its value is the run id.
const ActionAcknowledge = "signoff_review_ack"

// acknowledge is a click on Acknowledge: the engine checks the review's
// role and that the clicker did not force it; the clicker is told the
// outcome in an ephemeral message.
func (s *Server) acknowledge(ctx context.Context, ic *Interaction, runID string) {
	c := &click{ic: ic, who: personOf(ic.User)}
	if ic.Container != nil {
		c.channel = ic.Container.ChannelID
	}
	if c.channel == "" && ic.Channel != nil {
		c.channel = ic.Channel.ID
	}
	log := s.log.With("run_id", runID, "user_id", c.who.ID, "action_id", ActionAcknowledge)
	r := s.ackReview(ctx, c.who, runID, "", log)
	if body, ok := r.Body.(*commandReply); ok {
		s.tell(ctx, c, body.Text, log)
	}
}
