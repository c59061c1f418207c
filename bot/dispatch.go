package bot

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// Poster is what the dispatcher needs of Slack's Web API (*API has it).
type Poster interface {
	PostMessage(ctx context.Context, channel string, blocks []slack.Block, text string) (string, string, error)
	UpdateMessage(ctx context.Context, channel, ts string, blocks []slack.Block, text string) error
}

// Renderer turns a run, as it is now, into the message of one of its requests.
type Renderer func(v *workflow.RunView, req workflow.RequestView) ([]slack.Block, string)

// Dispatcher delivers the Slack outbox: it claims due rows (a compare-and-set, so
// several replicas share the queue without delivering a row twice at once),
// renders the run as it is at delivery, calls Slack, and records the outcome.
// Failed calls are retried: after Retry-After on 429, with backoff on 5xx and
// timeouts. Delivery is at least once; a rewrite shows the current state, so
// doing it twice changes nothing, and a post carries its row's key, so a
// retry after a post that reached Slack unrecorded finds it instead of
// posting it again (postOnce).
//
// One transition queues a rewrite, and an approval that runs to the end makes
// several; the dispatcher sends each run's due rows as one call, and skips a
// rewrite whose rendering is the one it last delivered to that message. That
// memory is the process's own: after a restart (or on another replica) one
// unchanged rewrite may be sent again, which Slack shows as nothing.
type Dispatcher struct {
	// Engine shows the runs and keeps the outbox (Engine.Outbox).
	Engine  *workflow.Engine
	Slack   Poster
	Channel string
	// AuditChannel is where the reviews of forced approvals are reminded
	// ("": they are not).
	AuditChannel string
	// ConsoleURL is the web console's address (ui.base_url), for links to
	// a run's page ("": the replies say where without a link).
	ConsoleURL string
	Render     Renderer
	Clock      workflow.Clock // defaults to workflow.SystemClock
	Logger     *slog.Logger
	// ClaimFor is how long a claimed row is left to its claimer before another
	// may take it (a replica that died mid-delivery).
	ClaimFor time.Duration
	// Failpoint, when set, is called with FailAfterPost, for crash tests.
	Failpoint func(name string)

	mu      sync.Mutex
	sent    map[string][sha256.Size]byte // channel/ts → digest of the last rendering delivered
	checked map[string]time.Time         // run id → UpdatedAt of a waiting run QueueUnposted found settled
}

// maxRemembered bounds the renderings remembered; past it the memory starts
// over, which costs at most one repeated rewrite per message.
const maxRemembered = 10000

// DeliverDue delivers up to limit due rows and returns how many were delivered.
// The due rows of one run are claimed together and delivered with one
// rendering of the run as it is now.
func (d *Dispatcher) DeliverDue(ctx context.Context, limit int) (int, error) {
	now := d.now()
	// Only its own kinds: rows of another dispatcher (callbacks waiting
	// behind a failing one) must not fill the round.
	due, err := d.Engine.Outbox().List(ctx, storage.OutboxFilter{Kinds: Kinds, DueBy: now, Limit: limit})
	if err != nil {
		return 0, fmt.Errorf("read the outbox: %w", err)
	}
	var order []string
	byRun := map[string][]*record.OutboxMessage{}
	for _, m := range due {
		key := m.RunID
		switch m.Kind {
		case KindPost, KindUpdate, KindDigest:
		case KindDetail:
			key = "detail/" + m.RunID // a run's details go in order (deliverInOrder)
		case KindOutcomeDM, KindOutcomeNotify, KindReminder, KindEscalation, KindBreakGlass, KindReviewReminder, KindConfirm:
			// A message of its own: sent once, it is not sent again
			// because a rewrite of the same run failed.
			key = fmt.Sprintf("outcome/%d", m.ID)
		default:
			continue // another dispatcher's kind
		}
		if byRun[key] == nil {
			order = append(order, key)
		}
		byRun[key] = append(byRun[key], m)
	}
	delivered := 0
	var errs []error
	for _, id := range order {
		deliver := d.deliver
		if byRun[id][0].Kind == KindDetail {
			deliver = d.deliverInOrder
		}
		n, err := deliver(ctx, byRun[id])
		if err != nil {
			errs = append(errs, err)
		}
		delivered += n
	}
	return delivered, errors.Join(errs...)
}

func (d *Dispatcher) now() time.Time {
	if d.Clock != nil {
		return d.Clock.Now().UTC().Truncate(time.Millisecond)
	}
	return time.Now().UTC().Truncate(time.Millisecond)
}

func (d *Dispatcher) log() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// deliver claims one run's rows, sends them as one, and records the outcome on
// each. A row another replica claimed first is skipped without error. It
// returns how many rows were delivered.
func (d *Dispatcher) deliver(ctx context.Context, rows []*record.OutboxMessage) (int, error) {
	claim := d.ClaimFor
	if claim <= 0 {
		claim = time.Minute
	}
	outbox := d.Engine.Outbox()
	var claimed []*record.OutboxMessage
	for _, m := range rows {
		err := outbox.Claim(ctx, m, d.now().Add(claim))
		if errors.Is(err, storage.ErrConflict) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("claim outbox row %d: %w", m.ID, err)
		}
		claimed = append(claimed, m)
	}
	if len(claimed) == 0 {
		return 0, nil
	}
	sendErr := d.send(ctx, claimed)
	now := d.now()
	var errs []error
	for _, m := range claimed {
		var err error
		if sendErr == nil {
			err = outbox.Sent(ctx, m, now)
		} else {
			wait, permanent := retryAfter(sendErr, m.Attempts)
			level := slog.LevelWarn
			if permanent {
				level = slog.LevelError
			}
			d.log().Log(ctx, level, "slack delivery failed", "outbox_id", m.ID, "kind", m.Kind, "run_id", m.RunID,
				"attempt", m.Attempts, "retry_in", wait.String(), "error", sendErr.Error())
			err = outbox.Retry(ctx, m, now.Add(wait), sendErr.Error())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("record delivery of outbox row %d: %w", m.ID, err))
		}
	}
	if sendErr != nil {
		return 0, errors.Join(errs...)
	}
	return len(claimed) - len(errs), errors.Join(errs...)
}

// send delivers the claimed rows of one run: it posts the requests that wait
// for their message, then, if any row asks for it, rewrites every posted
// message of the run from its current state.
func (d *Dispatcher) send(ctx context.Context, rows []*record.OutboxMessage) error {
	if rows[0].Kind == KindDigest {
		return d.sendDigest(ctx, rows) // a digest's rows are keyed by no run but the digest (DigestKey)
	}
	if k := rows[0].Kind; k == KindOutcomeDM || k == KindOutcomeNotify {
		return d.sendOutcome(ctx, rows[0])
	}
	if rows[0].Kind == KindReminder {
		return d.sendReminder(ctx, rows[0])
	}
	if rows[0].Kind == KindEscalation {
		return d.sendEscalation(ctx, rows[0])
	}
	switch rows[0].Kind {
	case KindDetail:
		return d.sendDetail(ctx, rows[0])
	case KindBreakGlass:
		return d.sendBreakGlass(ctx, rows[0])
	case KindReviewReminder:
		return d.sendReviewReminder(ctx, rows[0])
	case KindConfirm:
		return d.sendConfirm(ctx, rows[0])
	}
	runID := rows[0].RunID
	var toPost []*record.OutboxMessage
	var ids []string
	rewrite := false
	for _, m := range rows {
		var p OutboxPayload
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			// Rewriting from the current state is right whatever the row meant,
			// and keeps one bad row from holding up the run's other rows.
			d.log().Warn("slack outbox row unreadable; rewriting the run's messages instead", "outbox_id", m.ID, "run_id", m.RunID, "error", err.Error())
			rewrite = true
			continue
		}
		if m.Kind == KindPost {
			toPost, ids = append(toPost, m), append(ids, p.RequestID)
		} else {
			rewrite = true
		}
	}
	v, err := d.Engine.Get(ctx, runID)
	if err != nil {
		return fmt.Errorf("load run %s: %w", runID, err)
	}
	posted := map[string]bool{}
	for i, id := range ids {
		r, ok := requestOf(v, id)
		switch {
		case ok && r.MessageTS == "" && !posted[id]:
			if err := d.post(ctx, v, r, toPost[i]); err != nil {
				return err
			}
			posted[id] = true
		case !posted[id]:
			// Posted already (a redelivery after a crash): bring it up to date instead.
			rewrite = true
		}
	}
	if !rewrite {
		return nil
	}
	for _, r := range v.Requests {
		if r.MessageTS == "" {
			continue // not posted yet (or just now, and brought up to date by post)
		}
		if err := d.update(ctx, v, r); err != nil {
			return err
		}
	}
	return nil
}

func requestOf(v *workflow.RunView, id string) (workflow.RequestView, bool) {
	for _, r := range v.Requests {
		if r.ID == id {
			return r, true
		}
	}
	return workflow.RequestView{}, false
}

// update rewrites a posted message, unless it would show what it shows already.
func (d *Dispatcher) update(ctx context.Context, v *workflow.RunView, r workflow.RequestView) error {
	blocks, text := d.Render(v, r)
	sum, err := renderingDigest(blocks, text)
	if err != nil {
		return fmt.Errorf("render run %s: %w", v.ID, err)
	}
	key := r.Channel + "/" + r.MessageTS
	if d.lastSent(key) == sum {
		d.log().Debug("slack message unchanged", "run_id", v.ID, "request_id", r.ID, "ts", r.MessageTS)
		return nil
	}
	if err := d.Slack.UpdateMessage(ctx, r.Channel, r.MessageTS, blocks, text); err != nil {
		return err
	}
	d.remember(key, sum)
	d.log().Info("slack message updated", "run_id", v.ID, "request_id", r.ID, "ts", r.MessageTS, "status", string(v.Status))
	return nil
}

// renderingDigest identifies a rendering: what Slack would be sent.
func renderingDigest(blocks []slack.Block, text string) ([sha256.Size]byte, error) {
	b, err := json.Marshal(struct {
		Blocks []slack.Block `json:"blocks"`
		Text   string        `json:"text"`
	}{blocks, text})
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
}

func (d *Dispatcher) lastSent(key string) [sha256.Size]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sent[key]
}

func (d *Dispatcher) remember(key string, sum [sha256.Size]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sent == nil || len(d.sent) >= maxRemembered {
		d.sent = map[string][sha256.Size]byte{}
	}
	d.sent[key] = sum
}

// post posts a request's message (row m) and records where it went, so
// later changes rewrite that message; a message an earlier attempt at m
// posted is recorded instead (postOnce).
func (d *Dispatcher) post(ctx context.Context, v *workflow.RunView, r workflow.RequestView, m *record.OutboxMessage) error {
	blocks, text := d.Render(v, r)
	ch, ts, err := d.postOnce(ctx, m, d.Channel, "", blocks, text)
	if err != nil {
		return err
	}
	d.log().Info("slack message posted", "run_id", v.ID, "request_id", r.ID, "channel", ch, "ts", ts)
	if sum, err := renderingDigest(blocks, text); err == nil {
		d.remember(ch+"/"+ts, sum)
	}
	// Where the message went is a record of its own, so recording it races
	// no decision: the request row is the engine's alone.
	loc := &record.MessageLocation{RequestID: r.ID, RunID: v.ID, Channel: ch, TS: ts, PostedAt: d.now()}
	err = d.Engine.Outbox().Posted(ctx, loc)
	if errors.Is(err, storage.ErrDuplicate) {
		// Another delivery of the post recorded its message first (a claim
		// that ran out while this one was on its way): that message is the
		// one kept up to date.
		d.log().Warn("slack message posted twice; the first stays the request's message", "run_id", v.ID, "request_id", r.ID, "channel", ch, "ts", ts)
		return nil
	}
	if err != nil {
		return fmt.Errorf("record message %s of request %s: %w", ts, r.ID, err)
	}
	// A change that committed while the message was on its way found no message
	// to rewrite; bring the new message up to date now.
	now, err := d.Engine.Get(ctx, v.ID)
	if err != nil {
		return fmt.Errorf("load run %s: %w", v.ID, err)
	}
	if !now.UpdatedAt.Equal(v.UpdatedAt) {
		r.Channel, r.MessageTS = ch, ts
		return d.update(ctx, now, r)
	}
	return nil
}

// NewRenderer renders a run's messages with RenderRun, except the message of a
// request that an edit replaced by a newer one still waiting: that gets a
// short note, since its buttons would otherwise act on the new request, which
// has a message of its own. A newer request that the edit approved at once
// gets no message (nobody is asked anything), so the old one shows the run.
// command is the slash command hints name ("" for DefaultCommand); console
// is the web console's address (ui.base_url, "" when not configured), which
// a step-up rule's message links to.
func NewRenderer(specs ActionSpecs, roles *policy.Roles, groups map[string]string, command, console string, clock workflow.Clock) Renderer {
	if clock == nil {
		clock = workflow.SystemClock{}
	}
	return func(v *workflow.RunView, r workflow.RequestView) ([]slack.Block, string) {
		if v.Gate != nil && v.Gate.RequestID != "" && v.Gate.RequestID != r.ID && requestPending(v, v.Gate.RequestID) {
			text := fmt.Sprintf("Run %s: this request was replaced after an edit; see the newer message.", v.ID)
			return []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", text, false, false), nil, nil)}, text
		}
		rc := RenderContext{Roles: roles, Redact: Redactor(specs), Now: clock.Now(), UserGroups: groups, Command: command, ConsoleURL: console}
		return RenderRun(v, rc), FallbackText(v)
	}
}

// requestPending says whether the run's request id waits for decisions.
func requestPending(v *workflow.RunView, id string) bool {
	for _, r := range v.Requests {
		if r.ID == id {
			return r.Status == record.RequestPending
		}
	}
	return false
}
