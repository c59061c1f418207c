package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/slack-go/slack"

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
// doing it twice changes nothing.
type Dispatcher struct {
	Store   workflow.Store
	Engine  *workflow.Engine
	Slack   Poster
	Channel string
	Render  Renderer
	Now     func() time.Time
	Logger  *slog.Logger
	// ClaimFor is how long a claimed row is left to its claimer before another
	// may take it (a replica that died mid-delivery).
	ClaimFor time.Duration
}

// DeliverDue delivers up to limit due rows and returns how many were delivered.
func (d *Dispatcher) DeliverDue(ctx context.Context, limit int) (int, error) {
	now := d.now()
	var due []*workflow.OutboxMessage
	err := d.Store.View(ctx, func(ctx context.Context, tx workflow.Tx) error {
		var err error
		due, err = tx.DueOutbox(ctx, now, limit)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("read the outbox: %w", err)
	}
	delivered := 0
	var errs []error
	for _, m := range due {
		if m.Kind != KindPost && m.Kind != KindUpdate {
			continue // another dispatcher's kind
		}
		ok, err := d.deliver(ctx, m)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			delivered++
		}
	}
	return delivered, errors.Join(errs...)
}

func (d *Dispatcher) now() time.Time {
	if d.Now != nil {
		return d.Now().UTC().Truncate(time.Millisecond)
	}
	return time.Now().UTC().Truncate(time.Millisecond)
}

func (d *Dispatcher) log() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// deliver claims, sends and records one row. A row another replica claimed first
// is skipped without error.
func (d *Dispatcher) deliver(ctx context.Context, m *workflow.OutboxMessage) (bool, error) {
	claim := d.ClaimFor
	if claim <= 0 {
		claim = time.Minute
	}
	m.Attempts++
	m.NextAttempt = d.now().Add(claim)
	if err := d.Store.Update(ctx, func(ctx context.Context, tx workflow.Tx) error { return tx.UpdateOutbox(ctx, m) }); err != nil {
		if errors.Is(err, workflow.ErrConflict) {
			return false, nil
		}
		return false, fmt.Errorf("claim outbox row %d: %w", m.ID, err)
	}
	sendErr := d.send(ctx, m)
	now := d.now()
	if sendErr == nil {
		m.DeliveredAt, m.LastError = now, ""
	} else {
		wait, permanent := retryAfter(sendErr, m.Attempts)
		m.NextAttempt, m.LastError = now.Add(wait), sendErr.Error()
		level := slog.LevelWarn
		if permanent {
			level = slog.LevelError
		}
		d.log().Log(ctx, level, "slack delivery failed", "outbox_id", m.ID, "kind", m.Kind, "run_id", m.RunID,
			"attempt", m.Attempts, "retry_in", wait.String(), "error", sendErr.Error())
	}
	if err := d.Store.Update(ctx, func(ctx context.Context, tx workflow.Tx) error { return tx.UpdateOutbox(ctx, m) }); err != nil {
		return false, fmt.Errorf("record delivery of outbox row %d: %w", m.ID, err)
	}
	return sendErr == nil, nil
}

func (d *Dispatcher) send(ctx context.Context, m *workflow.OutboxMessage) error {
	var p OutboxPayload
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return fmt.Errorf("decode outbox row %d: %w", m.ID, err)
	}
	v, err := d.Engine.Get(ctx, p.RunID)
	if err != nil {
		return fmt.Errorf("load run %s: %w", p.RunID, err)
	}
	if m.Kind == KindPost {
		for _, r := range v.Requests {
			if r.ID == p.RequestID && r.MessageTS == "" {
				return d.post(ctx, v, r)
			}
		}
		// Posted already (a redelivery after a crash): bring it up to date instead.
	}
	for _, r := range v.Requests {
		if r.MessageTS == "" {
			continue // not posted yet: its post will show the current state
		}
		blocks, text := d.Render(v, r)
		if err := d.Slack.UpdateMessage(ctx, r.Channel, r.MessageTS, blocks, text); err != nil {
			return err
		}
	}
	return nil
}

// post posts a request's message and records where it went, so later changes
// rewrite that message.
func (d *Dispatcher) post(ctx context.Context, v *workflow.RunView, r workflow.RequestView) error {
	blocks, text := d.Render(v, r)
	ch, ts, err := d.Slack.PostMessage(ctx, d.Channel, blocks, text)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err = d.Store.Update(ctx, func(ctx context.Context, tx workflow.Tx) error {
			req, err := tx.Request(ctx, r.ID)
			if err != nil {
				return err
			}
			req.Channel, req.MessageTS = ch, ts
			return tx.UpdateRequest(ctx, req)
		})
		// The request may have been decided in the meantime; read it again.
		if !errors.Is(err, workflow.ErrConflict) || attempt == 5 {
			break
		}
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
		blocks, text := d.Render(now, r)
		return d.Slack.UpdateMessage(ctx, ch, ts, blocks, text)
	}
	return nil
}

// NewRenderer renders a run's messages with RenderRun, except the message of a
// request that an edit replaced by a newer one: that gets a short note, since
// its buttons would otherwise act on the new request.
func NewRenderer(specs ActionSpecs, roles *workflow.Roles, groups map[string]string, now func() time.Time) Renderer {
	return func(v *workflow.RunView, r workflow.RequestView) ([]slack.Block, string) {
		if v.Gate != nil && v.Gate.RequestID != "" && v.Gate.RequestID != r.ID {
			text := fmt.Sprintf("Run %s: this request was replaced after an edit; see the newer message.", v.ID)
			return []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", text, false, false), nil, nil)}, text
		}
		rc := RenderContext{Roles: roles, Redact: Redactor(specs), Now: now(), UserGroups: groups}
		return RenderRun(v, rc), FallbackText(v)
	}
}
