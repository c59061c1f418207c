package bot

import (
	"context"
	stdjson "encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/labstack/echo/v4"
	"github.com/slack-go/slack/socketmode"
)

// maxSocketAck is under Socket Mode's 20 KB limit for an ack, which Slack
// drops silently when it is over.
const maxSocketAck = 19 << 10

// socketWorkers bounds the events handled at once, so a slow Slack call in
// one handler does not hold up every other click's ack.
const socketWorkers = 16

// RunSocketMode connects to Slack over Socket Mode and serves interactions and
// slash commands through the same handlers as HTTP, until ctx ends or the
// connection fails for good. The WebSocket is authenticated by the app-level
// token, so there are no signatures; the app and organisation checks still
// apply, and an envelope delivered twice is handled once (by its envelope id).
func RunSocketMode(ctx context.Context, client *socketmode.Client, s *Server) error {
	run, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.serveSocket(run, client.Events, client.AckCtx)
	}()
	err := client.RunContext(run)
	cancel()
	<-served
	if ctx.Err() != nil {
		return nil // asked to stop
	}
	return fmt.Errorf("socket mode: %w", err)
}

// socketAck acknowledges one envelope with an optional payload.
type socketAck func(ctx context.Context, envelopeID string, payload any) error

// serveSocket handles events until ctx ends or events closes, then waits for
// the handlers in flight.
func (s *Server) serveSocket(ctx context.Context, events <-chan socketmode.Event, ack socketAck) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, socketWorkers)
	for {
		var evt socketmode.Event
		var ok bool
		select {
		case <-ctx.Done():
			return
		case evt, ok = <-events:
			if !ok {
				return
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			s.socketEvent(ctx, evt, ack)
		})
	}
}

// socketEvent answers one event: requests from Slack are acked (with the
// handler's answer when the envelope accepts one); the client's own events
// are logged.
func (s *Server) socketEvent(ctx context.Context, evt socketmode.Event, ack socketAck) {
	id, payload, handled := s.routeSocket(ctx, evt)
	if !handled {
		return
	}
	if err := ack(ctx, id, payload); err != nil {
		s.log.Warn("socket mode ack failed", "envelope_id", id, "err", err)
	}
}

// routeSocket turns an event into the envelope to ack and the ack's payload.
// handled is false for events that need no ack.
func (s *Server) routeSocket(ctx context.Context, evt socketmode.Event) (envelopeID string, payload any, handled bool) {
	req := evt.Request
	switch evt.Type {
	case socketmode.EventTypeInteractive, socketmode.EventTypeSlashCommand, socketmode.EventTypeEventsAPI:
		if req == nil || req.EnvelopeID == "" {
			s.log.Warn("socket mode event without an envelope", "type", string(evt.Type))
			return "", nil, false
		}
	case socketmode.EventTypeConnectionError, socketmode.EventTypeInvalidAuth, socketmode.EventTypeIncomingError, socketmode.EventTypeErrorBadMessage, socketmode.EventTypeErrorWriteFailed:
		s.log.Warn("socket mode", "event", string(evt.Type), "detail", fmt.Sprint(evt.Data))
		return "", nil, false
	default:
		s.log.Debug("socket mode", "event", string(evt.Type))
		return "", nil, false
	}
	if evt.Type == socketmode.EventTypeEventsAPI {
		// signoff subscribes to none; ack so Slack does not retry.
		return req.EnvelopeID, nil, true
	}
	if s.seen == nil {
		return req.EnvelopeID, s.socketAnswer(ctx, evt), true
	}
	// An envelope Slack delivers again (to this connection or another
	// replica's) is handled once, like a signed request sent twice.
	now := s.clock.Now()
	first, claimed, err := s.claim(ctx, &record.SeenRequest{Digest: socketDigest(req.EnvelopeID), CreatedAt: now, ExpiresAt: now.Add(socketReplayWindow)})
	log := s.log.With("kind", string(evt.Type), "envelope_id", req.EnvelopeID, "retry_attempt", req.RetryAttempt)
	switch {
	case err != nil:
		// Nothing was handled; acked, or Slack shows the person a timeout.
		log.Error("socket mode request refused", "err", err)
		return req.EnvelopeID, nil, true
	case !claimed && first.Answered():
		log.Warn("socket mode envelope delivered again: acked as the first time", "first_at", first.CreatedAt)
		if len(first.Body) == 0 {
			return req.EnvelopeID, nil, true
		}
		return req.EnvelopeID, stdjson.RawMessage(first.Body), true
	case !claimed:
		// The first delivery is still being handled (or its process died):
		// left unacked, so that this copy changes nothing and Slack may
		// deliver it again; see copyAnswer for a click lost that way.
		log.Warn("socket mode envelope delivered again while the first has no answer: not acked", "first_at", first.CreatedAt)
		return "", nil, false
	}
	payload = s.socketAnswer(ctx, evt)
	a := answer{status: http.StatusOK}
	if payload != nil {
		b, err := stdjson.Marshal(payload) // as the client will send it
		if err != nil {
			log.Error("encode a socket mode ack", "err", err)
			return req.EnvelopeID, nil, true
		}
		a.contentType, a.body = echo.MIMEApplicationJSON, b
	}
	s.recordAnswer(ctx, log, first, a)
	return req.EnvelopeID, payload, true
}

// socketAnswer handles an interaction or a slash command and returns the
// ack's payload (nil for none).
func (s *Server) socketAnswer(ctx context.Context, evt socketmode.Event) any {
	req := evt.Request
	var resp Response
	var err error
	switch evt.Type {
	case socketmode.EventTypeInteractive:
		resp, err = s.HandleInteraction(ctx, req.Payload)
	case socketmode.EventTypeSlashCommand:
		var form url.Values
		if form, err = commandValues(req.Payload); err == nil {
			resp, err = s.HandleCommand(ctx, form)
		}
	}
	if err != nil {
		// Slack still needs the ack, or it shows the person a timeout.
		level := s.log.Warn
		if statusOf(err) >= 500 {
			level = s.log.Error
		}
		level("socket mode request refused", "type", string(evt.Type), "envelope_id", req.EnvelopeID, "err", err)
		return nil
	}
	if resp.Body == nil || !req.AcceptsResponsePayload {
		return nil
	}
	return fitAck(resp.Body)
}

// fitAck keeps an ack payload under Socket Mode's size limit: a reply too
// long to send becomes a short note saying so.
func fitAck(body any) any {
	b, err := json.Marshal(body)
	if err == nil && len(b) < maxSocketAck {
		return body
	}
	if r, ok := body.(*commandReply); ok {
		return &commandReply{ResponseType: r.ResponseType, Text: cutText(r.Text, 2000) + "\n(The full answer is too long for Socket Mode; `signoff show` has it.)"}
	}
	return nil
}

// commandValues turns a slash command's Socket Mode payload (a JSON object
// of the same fields as the HTTP form) into form values, strictly.
func commandValues(payload []byte) (url.Values, error) {
	if len(payload) > MaxPayload {
		return nil, fmt.Errorf("%w: payload of %d bytes", ErrTooLarge, len(payload))
	}
	var fields map[string]any
	if err := json.Unmarshal(payload, &fields); err != nil {
		return nil, fmt.Errorf("%w: slash command payload: %v", ErrMalformed, err)
	}
	form := url.Values{}
	for k, v := range fields {
		switch v := v.(type) {
		case string:
			form.Set(k, v)
		case bool:
			form.Set(k, strconv.FormatBool(v))
		case nil:
		default:
			// Fields signoff reads are strings; others (none today) are skipped.
		}
	}
	return form, nil
}
