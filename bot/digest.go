package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// digestShown caps the runs a digest lists one by one; the rest are counted
// ("and N more"), which keeps a message within Slack's 50 blocks and its
// 3,000 characters a section.
const digestShown = 20

// Digest is one channel's daily list of the runs still waiting for a
// decision, at Hour:Minute local time in Location. Its post is an outbox
// message queued under a key of the channel and the local date (Outbox.Queue),
// so it is queued once a day whatever restarts, and delivered by the
// Dispatcher like the other Slack messages.
//
// A round queues the day's digest when its time has passed on the local
// date the clock reads: a server that was down at that time queues it when
// it comes back, the same day; a day it was down past midnight gets none
// (a backlog of old lists would show what no longer waits). Nothing is queued
// when nothing waits.
type Digest struct {
	Engine       *workflow.Engine
	Channel      string
	Hour, Minute int
	Location     *time.Location
	Clock        workflow.Clock // defaults to workflow.SystemClock
	Logger       *slog.Logger

	done string // the local date this process found queued already
}

// DigestPayload is the body of a digest's outbox row: the message as it was
// rendered at the digest's time, so that a late delivery lists what waited
// then.
type DigestPayload struct {
	Channel string          `json:"channel"`
	Date    string          `json:"date"`
	Text    string          `json:"text"`
	Blocks  json.RawMessage `json:"blocks"`
}

// DigestKey is the key of a channel's digest of a local date (YYYY-MM-DD).
func DigestKey(channel, date string) string { return "digest/" + channel + "/" + date }

// NextDigest is the first time after after that the local clock of loc
// reads hour:minute. On a day the time does not exist (the clocks jump over
// it) it is the instant time.Date gives, as far past the jump as the time
// was; on a day it occurs twice it is the first.
func NextDigest(after time.Time, hour, minute int, loc *time.Location) time.Time {
	l := after.In(loc)
	at := digestOn(l.Year(), l.Month(), l.Day(), hour, minute, loc)
	if !at.After(after) {
		at = digestOn(l.Year(), l.Month(), l.Day()+1, hour, minute, loc)
	}
	return at
}

// digestOn is hour:minute on a local date of loc. time.Date picks the
// second of two instants a time occurs at in the fall; the digest wants the
// first, an hour earlier, when it reads the same.
func digestOn(y int, m time.Month, d, hour, minute int, loc *time.Location) time.Time {
	at := time.Date(y, m, d, hour, minute, 0, 0, loc)
	if earlier := at.Add(-time.Hour); earlier.Hour() == hour && earlier.Minute() == minute && earlier.Day() == at.Day() {
		return earlier
	}
	return at
}

// Due says which local date's digest is due at now: the date now reads in
// Location, once its time has passed.
func (g *Digest) Due(now time.Time) (string, bool) {
	l := now.In(g.Location)
	at := digestOn(l.Year(), l.Month(), l.Day(), g.Hour, g.Minute, g.Location)
	return l.Format(time.DateOnly), !now.Before(at)
}

// Loop runs the digest every pace (a minute is plenty: a round that is not
// due reads nothing).
func (g *Digest) Loop(pace workflow.Pace) *workflow.Loop {
	return &workflow.Loop{Name: "queue the daily digest of " + g.Channel, Pace: pace, Logger: g.log(), Round: g.Round}
}

// Round queues the day's digest if it is due and not queued yet, and says
// nothing when it is not due.
func (g *Digest) Round(ctx context.Context) error {
	now := g.now()
	date, due := g.Due(now)
	if !due || g.done == date {
		return nil
	}
	waiting, err := g.Engine.List(ctx, storage.RunFilter{Statuses: []record.Status{record.StatusWaitingApproval}})
	if err != nil {
		return fmt.Errorf("digest of %s: %w", g.Channel, err)
	}
	if len(waiting) == 0 {
		// Nothing waits: nothing is posted. A run that comes to wait later
		// today is in tomorrow's list, unless this server starts again today.
		g.done = date
		return nil
	}
	m, err := g.message(ctx, now, date, waiting)
	if err != nil {
		return err
	}
	queued, err := g.Engine.Outbox().Queue(ctx, m)
	if err != nil {
		return fmt.Errorf("digest of %s: %w", g.Channel, err)
	}
	g.done = date
	if !queued {
		// Queued before: by this server before a restart, or by a replica.
		g.log().Info("slack digest queued already", "channel", g.Channel, "date", date)
		return nil
	}
	g.log().Info("slack digest queued", "channel", g.Channel, "date", date, "waiting", len(waiting))
	return nil
}

// message renders the digest of the waiting runs (oldest first) into its
// outbox row.
func (g *Digest) message(ctx context.Context, now time.Time, date string, waiting []*record.Run) (*record.OutboxMessage, error) {
	var views []*workflow.RunView
	for _, r := range waiting[:min(len(waiting), digestShown)] {
		v, err := g.Engine.Get(ctx, r.ID)
		if err != nil {
			// A run that cannot be shown is still listed, from its row.
			v = &workflow.RunView{ID: r.ID, Status: r.Status, CreatedAt: r.CreatedAt, Problem: err.Error()}
		}
		views = append(views, v)
	}
	blocks, text := RenderDigest(views, len(waiting), now)
	body, err := json.Marshal(blocks)
	if err != nil {
		return nil, fmt.Errorf("render the digest of %s: %w", g.Channel, err)
	}
	p, err := json.Marshal(DigestPayload{Channel: g.Channel, Date: date, Text: text, Blocks: body})
	if err != nil {
		return nil, fmt.Errorf("encode the digest of %s: %w", g.Channel, err)
	}
	at := now.UTC().Truncate(time.Millisecond)
	return &record.OutboxMessage{RunID: DigestKey(g.Channel, date), Kind: KindDigest, Payload: p, NextAttempt: at, CreatedAt: at}, nil
}

// RenderDigest is the digest's message: a heading that counts the waiting
// runs (total of them), then one section per run shown, oldest first, with
// its age, rule, who may decide and a link to its approval message, and
// "and N more" for the rest.
func RenderDigest(shown []*workflow.RunView, total int, now time.Time) ([]slack.Block, string) {
	text := fmt.Sprintf("%d run(s) waiting for a decision", total)
	blocks := []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", "*"+text+"*, oldest first", false, false), nil, nil)}
	for _, v := range shown {
		blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", digestLine(v, now), false, false), nil, nil))
	}
	if more := total - len(shown); more > 0 {
		blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject("mrkdwn", fmt.Sprintf("and %d more", more), false, false)))
	}
	return blocks, text
}

// digestLine is one waiting run: a link to its message (or its id), its
// age, its rule, and who may decide. What an agent wrote (the summary) is in
// a code span, where Slack reads no markup.
func digestLine(v *workflow.RunView, now time.Time) string {
	name := mdCode(v.ID, 100)
	req := waitedOn(v)
	if req != nil && req.Channel != "" && req.MessageTS != "" {
		name = "<" + Permalink(req.Channel, req.MessageTS) + "|" + mdEscape(v.ID) + ">"
	}
	parts := []string{name, "waiting " + age(now.Sub(v.CreatedAt))}
	if v.Gate != nil && v.Gate.Rule != "" {
		parts = append(parts, "rule "+mdCode(v.Gate.Rule, 100))
	}
	if req != nil && req.Role != "" {
		parts = append(parts, fmt.Sprintf("%d × %s", max(req.Count, 1), mdEscape(req.Role)))
	}
	if v.Gate != nil && v.Gate.Assignee != "" {
		who := mdEscape(v.Gate.Assignee)
		if slackUserID.MatchString(v.Gate.Assignee) {
			who = "<@" + v.Gate.Assignee + ">"
		}
		parts = append(parts, "assigned to "+who)
	}
	line := strings.Join(parts, " · ")
	if v.Summary != "" {
		line += "\n" + mdCode(v.Summary, 300)
	}
	if v.Problem != "" {
		line += "\n_could not be shown: " + mdEscape(cutText(v.Problem, 300)) + "_"
	}
	return line
}

// waitedOn is the request the run waits on: its gate's, else its last
// pending one; nil when it has none.
func waitedOn(v *workflow.RunView) *workflow.RequestView {
	if r := currentRequest(v); r != nil {
		return r
	}
	for i := len(v.Requests) - 1; i >= 0; i-- {
		if v.Requests[i].Status == record.RequestPending {
			return &v.Requests[i]
		}
	}
	return nil
}

// Permalink is a link to a Slack message from its channel and ts, in the
// form Slack's own links take (the ts without its dot); Slack sends whoever
// follows it to their workspace.
func Permalink(channel, ts string) string {
	return "https://slack.com/archives/" + channel + "/p" + strings.ReplaceAll(ts, ".", "")
}

// age is a duration for people, to the largest two units: 3d 4h, 2h 5m, 40m.
func age(d time.Duration) string {
	if d < time.Minute {
		return "under a minute"
	}
	days, hours, mins := int(d/(24*time.Hour)), int(d/time.Hour)%24, int(d/time.Minute)%60
	switch {
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, hours)
	case hours > 0:
		return fmt.Sprintf("%dh %dm", hours, mins)
	}
	return fmt.Sprintf("%dm", mins)
}

// sendDigest posts a digest once: rows are the claimed rows of one key
// (two only if two servers queued it at once), and none is posted when a
// row of the key was delivered already.
func (d *Dispatcher) sendDigest(ctx context.Context, rows []*record.OutboxMessage) error {
	key := rows[0].RunID
	all, err := d.Engine.Outbox().Keyed(ctx, key)
	if err != nil {
		return err
	}
	for _, m := range all {
		if !m.DeliveredAt.IsZero() {
			d.log().Warn("slack digest queued twice; the first was posted", "key", key, "outbox_id", rows[0].ID)
			return nil
		}
	}
	var p DigestPayload
	if err := json.Unmarshal(rows[0].Payload, &p); err != nil {
		d.log().Error("slack digest row unreadable; dropped", "outbox_id", rows[0].ID, "key", key, "error", err.Error())
		return nil
	}
	var blocks slack.Blocks
	if err := json.Unmarshal(p.Blocks, &blocks); err != nil {
		d.log().Error("slack digest row unreadable; dropped", "outbox_id", rows[0].ID, "key", key, "error", err.Error())
		return nil
	}
	ch, ts, err := d.postOnce(ctx, rows[0], p.Channel, "", blocks.BlockSet, p.Text)
	if err != nil {
		return err
	}
	d.log().Info("slack digest posted", "channel", ch, "ts", ts, "date", p.Date)
	return nil
}

func (g *Digest) now() time.Time {
	if g.Clock != nil {
		return g.Clock.Now()
	}
	return time.Now()
}

func (g *Digest) log() *slog.Logger {
	if g.Logger != nil {
		return g.Logger
	}
	return slog.New(slog.DiscardHandler)
}
