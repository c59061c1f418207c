package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"
	"github.com/slack-go/slack/socketmode"
)

// socketEvent is what socketmode.Client puts on its Events channel for an
// envelope from Slack.
func socketEvent(t testing.TB, typ socketmode.EventType, id string, payload []byte, accepts bool) socketmode.Event {
	t.Helper()
	return socketmode.Event{Type: typ, Request: &socketmode.Request{
		Type: string(typ), EnvelopeID: id, Payload: payload, AcceptsResponsePayload: accepts,
	}}
}

// slashEnvelope is the recorded Socket Mode envelope of /runs text.
func slashEnvelope(t testing.TB, user, text string) socketmode.Request {
	t.Helper()
	var req socketmode.Request
	if err := json.Unmarshal(fixture(t, "socketmode_slash_runs.json", Ref{}, user, map[string]string{"TEXT": text}), &req); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestSocketRouting(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	ref := refOf(v)
	slash := slashEnvelope(t, leadGrace, "pending")
	for _, tc := range []struct {
		name        string
		evt         socketmode.Event
		wantHandled bool
		wantPayload string // "" when the ack carries none
	}{
		{"hello", socketmode.Event{Type: socketmode.EventTypeHello, Request: &socketmode.Request{Type: "hello"}}, false, ""},
		{"connecting", socketmode.Event{Type: socketmode.EventTypeConnecting}, false, ""},
		{"connection error", socketmode.Event{Type: socketmode.EventTypeConnectionError, Data: "refused"}, false, ""},
		{"interactive without an envelope", socketmode.Event{Type: socketmode.EventTypeInteractive}, false, ""},
		{"events api", socketEvent(t, socketmode.EventTypeEventsAPI, "env-ev", []byte(`{}`), false), true, ""},
		{"malformed interaction", socketEvent(t, socketmode.EventTypeInteractive, "env-bad", []byte(`{"type":"block_actions","type":"x"}`), false), true, ""},
		{"another app", socketEvent(t, socketmode.EventTypeInteractive, "env-app",
			[]byte(strings.Replace(string(fixture(t, "block_actions_approve.json", ref, leadGrace, nil)), `"api_app_id":"A0SIGNOFF1"`, `"api_app_id":"A0OTHERAPP"`, 1)), false), true, ""},
		{"empty reason", socketEvent(t, socketmode.EventTypeInteractive, "env-reject",
			fixture(t, "view_submission_reject.json", ref, leadGrace, map[string]string{"REASON": ""}), true), true, `"response_action":"errors"`},
		{"slash command", socketmode.Event{Type: socketmode.EventTypeSlashCommand, Request: &slash}, true, "Waiting for approval"},
		{"slash command of another organisation", socketEvent(t, socketmode.EventTypeSlashCommand, "env-foreign",
			[]byte(strings.Replace(string(slash.Payload), `"T0SHOP0001"`, `"T0PARTNER1"`, 1)), true), true, ""},
		{"slash command with a duplicate field", socketEvent(t, socketmode.EventTypeSlashCommand, "env-dup",
			[]byte(`{"command":"/runs","user_id":"U0LEAD0001","user_id":"U0MGR00001","api_app_id":"A0SIGNOFF1","team_id":"T0SHOP0001"}`), true), true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.snapshot(v.ID)
			id, payload, handled := h.srv.routeSocket(h.ctx, tc.evt)
			if handled != tc.wantHandled {
				t.Fatalf("handled = %v, want %v", handled, tc.wantHandled)
			}
			if handled && id != tc.evt.Request.EnvelopeID {
				t.Fatalf("acked %q, want %q", id, tc.evt.Request.EnvelopeID)
			}
			got := ""
			if payload != nil {
				b, _ := json.Marshal(payload)
				got = string(b)
			}
			if tc.wantPayload == "" && got != "" || !strings.Contains(got, tc.wantPayload) {
				t.Fatalf("ack payload %s, want %q", got, tc.wantPayload)
			}
			if h.snapshot(v.ID) != before {
				t.Fatal("the run changed")
			}
		})
	}
	// And an approval over Socket Mode decides like one over HTTP.
	_, payload, handled := h.srv.routeSocket(h.ctx, socketEvent(t, socketmode.EventTypeInteractive, "env-ok", fixture(t, "block_actions_approve.json", ref, leadGrace, nil), false))
	if !handled || payload != nil {
		t.Fatalf("approve: handled %v, payload %v", handled, payload)
	}
	ds := h.storedDecisions(v.ID)
	if len(ds) != 1 || ds[0].Via != "slack" || ds[0].PayloadDigest == "" || h.get(v.ID).Status != record.StatusExecuting {
		t.Fatalf("after a Socket Mode approval: %+v", ds)
	}
}

// TestServeSocketConcurrent: clicks arriving together over one socket make
// one decision, and every envelope is acked before serveSocket returns.
func TestServeSocketConcurrent(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	events := make(chan socketmode.Event, 40)
	users := []string{leadGrace, leadOmar, manager, nobody}
	for i := range 40 {
		events <- socketEvent(t, socketmode.EventTypeInteractive, fmt.Sprintf("env-%02d", i),
			fixture(t, "block_actions_approve.json", refOf(v), users[i%len(users)], nil), false)
	}
	close(events)
	var mu sync.Mutex
	acked := map[string]int{}
	h.srv.serveSocket(h.ctx, events, func(_ context.Context, id string, payload any) error {
		mu.Lock()
		defer mu.Unlock()
		acked[id]++
		if payload != nil {
			t.Errorf("ack %s with payload %v", id, payload)
		}
		return nil
	})
	if len(acked) != 40 {
		t.Fatalf("%d envelopes acked, want 40", len(acked))
	}
	for id, n := range acked {
		if n != 1 {
			t.Errorf("%s acked %d times", id, n)
		}
	}
	if ds := h.storedDecisions(v.ID); len(ds) != 1 {
		t.Fatalf("%d decisions, want 1", len(ds))
	}
}

func TestFitAck(t *testing.T) {
	big := &commandReply{ResponseType: "ephemeral", Text: strings.Repeat("x", 30000)}
	got, ok := fitAck(big).(*commandReply)
	if !ok || len(got.Text) > 3000 || got.Blocks != nil || !strings.Contains(got.Text, "too long for Socket Mode") {
		t.Fatalf("fitAck of a long reply = %+v", got)
	}
	small := &commandReply{ResponseType: "ephemeral", Text: "ok"}
	if fitAck(small) != any(small) {
		t.Fatal("a small reply was changed")
	}
	if fitAck(slack.NewErrorsViewSubmissionResponse(map[string]string{"a": strings.Repeat("y", 30000)})) != nil {
		t.Fatal("an oversized modal answer was sent")
	}
}

// TestRunSocketModeEndToEnd connects a real socketmode.Client to slack-go's
// fake Slack on loopback, pushes a click and a slash command down the
// WebSocket, and reads the acks that come back.
func TestRunSocketModeEndToEnd(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	fake := slacktest.NewTestServer()
	fake.Start()
	defer fake.Stop()
	api := slack.New("xoxb-test", slack.OptionAPIURL(fake.GetAPIURL()), slack.OptionAppLevelToken("xapp-1-test"))
	client := socketmode.New(api, socketmode.OptionPingInterval(time.Hour))

	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- RunSocketMode(ctx, client, h.srv) }()

	envelope := func(id, typ string, payload []byte, accepts bool) string {
		b, _ := json.Marshal(map[string]any{"envelope_id": id, "type": typ, "payload": json.RawMessage(payload), "accepts_response_payload": accepts})
		return string(b)
	}
	// ackFor waits for the ack of envelope id on the WebSocket.
	ackFor := func(id string) map[string]any {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case m := <-fake.SeenFeed:
				var ack map[string]any
				if json.Unmarshal([]byte(m), &ack) == nil && ack["envelope_id"] == id {
					return ack
				}
			case <-timeout:
				t.Fatalf("no ack of %s", id)
			}
		}
	}

	fake.SendToWebsocket(envelope("env-click", "interactive", fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil), false))
	if ack := ackFor("env-click"); ack["payload"] != nil {
		t.Fatalf("click ack %v", ack)
	}
	if got := h.get(v.ID).Status; got != record.StatusExecuting {
		t.Fatalf("run %s after a Socket Mode click, want executing", got)
	}
	slash := slashEnvelope(t, leadGrace, "show "+v.ID)
	fake.SendToWebsocket(envelope(slash.EnvelopeID, "slash_commands", slash.Payload, true))
	ack := ackFor(slash.EnvelopeID)
	if b, _ := json.Marshal(ack["payload"]); !strings.Contains(string(b), "Approved, running: request_refund") {
		t.Fatalf("slash command ack %s", b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunSocketMode after cancel: %v", err)
	}
}
