package bot

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack/socketmode"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// sent is one signed request as it went over the wire, to send again.
type sent struct {
	path string
	body []byte
	hdr  http.Header
}

// httpReply is an HTTP answer as a client sees it.
type httpReply struct {
	status      int
	contentType string
	retryAfter  string
	body        string
}

func (h *slackHarness) send(r sent, extra ...string) httpReply {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, h.url+r.path, bytes.NewReader(r.body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header = r.hdr.Clone()
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpReply{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Retry-After"), string(b)}
}

// signedClick and signedCommand are requests signed now, as Slack sends them.
func (h *slackHarness) signedClick(payload []byte) sent {
	body := formBody(payload)
	return sent{"/slack/interactions", body, signed(hSecret, h.clock.Now().Unix(), body)}
}

func (h *slackHarness) signedCommand(user, text string) sent {
	form := fixture(h.t, "slash_runs.form", Ref{}, user, map[string]string{"TEXT": text})
	return sent{"/slack/commands", form, signed(hSecret, h.clock.Now().Unix(), form)}
}

// everything is what a request can change that a person would notice: the
// run as `show --json` prints it, its approval requests and decisions as
// stored, the audit log, the Slack messages waiting in the outbox, the
// shop, and what was said or opened in Slack while answering.
func (h *slackHarness) everything(id string) string {
	h.t.Helper()
	var b strings.Builder
	b.WriteString(h.snapshot(id))
	err := h.eng.Store().View(h.ctx, func(ctx context.Context, tx storage.Tx) error {
		reqs, err := tx.RequestsForRun(ctx, id)
		if err != nil {
			return err
		}
		ds, err := tx.Decisions(ctx, id)
		if err != nil {
			return err
		}
		audit, err := tx.AuditEvents(ctx, storage.AuditFilter{})
		if err != nil {
			return err
		}
		out, err := tx.DueOutbox(ctx, hStart.Add(1000*time.Hour), 0)
		if err != nil {
			return err
		}
		j, _ := stdjson.Marshal([]any{reqs, ds})
		fmt.Fprintf(&b, "\n%s\naudit events: %d, outbox: %d", j, len(audit), len(out))
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	fmt.Fprintf(&b, "\nephemerals: %d, views: %d", len(h.acts.Ephemerals()), len(h.acts.Views()))
	return b.String()
}

// deadline is a waiting run's deadline.
func (h *slackHarness) deadline(id string) time.Time {
	h.t.Helper()
	v := h.get(id)
	if v.Deadline == nil {
		h.t.Fatalf("run %s has no deadline", id)
	}
	return *v.Deadline
}

// TestReplayChangesNothing: a signed request sent again, as an attacker
// replays it or as Slack retries it, gets the first answer byte for byte and
// changes nothing: not the run, not its requests or decisions, not the
// audit log, and nobody is told anything twice.
func TestReplayChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name       string
		request    func(h *slackHarness, v *workflow.RunView) sent
		wantStatus int
		wantChange bool // whether the first copy changes anything (a refusal is audited and told)
	}{
		{"approve", func(h *slackHarness, v *workflow.RunView) sent {
			return h.signedClick(fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil))
		}, http.StatusOK, true},
		{"approve by someone without the role (refused, audited, told)", func(h *slackHarness, v *workflow.RunView) sent {
			return h.signedClick(fixture(t, "block_actions_approve.json", refOf(v), nobody, nil))
		}, http.StatusOK, true},
		{"reject with a reason", func(h *slackHarness, v *workflow.RunView) sent {
			return h.signedClick(fixture(t, "view_submission_reject.json", refOf(v), leadOmar, map[string]string{"REASON": "not this one"}))
		}, http.StatusOK, true},
		{"another app's click", func(h *slackHarness, v *workflow.RunView) sent {
			p := bytes.Replace(fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil), []byte(`"api_app_id":"A0SIGNOFF1"`), []byte(`"api_app_id":"A0OTHERAPP"`), 1)
			return h.signedClick(p)
		}, http.StatusForbidden, false},
		{"/runs extend", func(h *slackHarness, v *workflow.RunView) sent {
			return h.signedCommand(leadGrace, "extend "+v.ID+" 1d")
		}, http.StatusOK, true},
		{"/runs cancel", func(h *slackHarness, v *workflow.RunView) sent {
			return h.signedCommand(leadGrace, "cancel "+v.ID+" the customer called")
		}, http.StatusOK, true},
		{"/runs show", func(h *slackHarness, v *workflow.RunView) sent {
			return h.signedCommand(leadGrace, "show "+v.ID)
		}, http.StatusOK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSlackHarness(t)
			v := h.submit("refund-double-charge", "")
			r := tc.request(h, v)
			before := h.everything(v.ID)
			first := h.send(r)
			if first.status != tc.wantStatus {
				t.Fatalf("first copy: %d %s, want %d", first.status, first.body, tc.wantStatus)
			}
			after := h.everything(v.ID)
			if changed := after != before; changed != tc.wantChange {
				t.Fatalf("the first copy changed something: %v, want %v", changed, tc.wantChange)
			}
			h.clock.Advance(time.Minute) // still inside the signature window
			for _, extra := range [][]string{nil, {HeaderRetryNum, "1"}, {HeaderRetryNum, "2", "X-Slack-Retry-Reason", "http_timeout"}} {
				if again := h.send(r, extra...); again != first {
					t.Errorf("copy with %v answered %+v, want the first answer %+v", extra, again, first)
				}
			}
			if now := h.everything(v.ID); now != after {
				t.Errorf("the copies changed something:\nafter the first %s\nafter the copies %s", after, now)
			}
		})
	}
}

// TestExtendSentThreeTimes: the attack that found this: one signed
// `/runs extend RUN 2d` sent three times moves the deadline by two days, not
// six. A second command typed by the person is a new request and counts.
func TestExtendSentThreeTimes(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	deadline := h.deadline(v.ID)
	r := h.signedCommand(leadGrace, "extend "+v.ID+" 2d")
	for i := range 3 {
		if got := h.send(r); got.status != http.StatusOK || !strings.Contains(got.body, "The deadline of run") {
			t.Fatalf("copy %d: %+v", i+1, got)
		}
	}
	if got, want := h.deadline(v.ID), deadline.Add(48*time.Hour); !got.Equal(want) {
		t.Fatalf("deadline after one extend sent three times: %v, want %v (moved once)", got, want)
	}
	if got := h.send(h.signedCommand(leadGrace, "extend "+v.ID+" 2d")); got.status != http.StatusOK {
		t.Fatalf("a second extend: %+v", got)
	}
	if got, want := h.deadline(v.ID), deadline.Add(96*time.Hour); !got.Equal(want) {
		t.Fatalf("deadline after a second, new extend: %v, want %v", got, want)
	}
}

// TestRefusedCopiesDoNotBlockTheRequest: a copy refused before its digest is
// claimed (a wrong signature over the real body and timestamp, a stale
// timestamp) leaves nothing behind that would answer for the real request.
func TestRefusedCopiesDoNotBlockTheRequest(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	r := h.signedClick(fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil))
	forged := sent{r.path, r.body, signed("not-the-secret", h.clock.Now().Unix(), r.body)}
	if got := h.send(forged); got.status != http.StatusUnauthorized {
		t.Fatalf("forged copy: %+v", got)
	}
	bad := r.hdr.Clone()
	bad.Set(HeaderSignature, strings.Repeat("v0=00", 1)+strings.Repeat("0", 62))
	if got := h.send(sent{r.path, r.body, bad}); got.status != http.StatusUnauthorized {
		t.Fatalf("copy with a mangled signature: %+v", got)
	}
	if got := h.send(r); got.status != http.StatusOK {
		t.Fatalf("the real request after forged copies: %+v", got)
	}
	if ds := h.storedDecisions(v.ID); len(ds) != 1 || ds[0].ApproverID != leadGrace {
		t.Fatalf("decisions after the real request: %+v", ds)
	}
}

// claimAsCrashed stores the claim of r as a process that died while
// handling it would have left it: claimed, never answered.
func (h *slackHarness) claimAsCrashed(digest string) {
	h.t.Helper()
	err := h.eng.Store().Update(h.ctx, func(ctx context.Context, tx storage.Tx) error {
		_, claimed, err := tx.ClaimRequest(ctx, &record.SeenRequest{Digest: digest, CreatedAt: h.clock.Now(), ExpiresAt: h.clock.Now().Add(time.Hour)})
		if err == nil && !claimed {
			err = fmt.Errorf("%s was claimed already", digest)
		}
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// TestCopyOfUnansweredRequest: while the first copy has no answer (still
// being handled, or its process died), a copy is answered 503 and changes
// nothing; the person's next click is a new request and decides.
func TestCopyOfUnansweredRequest(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	r := h.signedClick(fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil))
	h.claimAsCrashed(signedDigest(r.hdr.Get(HeaderTimestamp), r.body))
	before := h.everything(v.ID)
	got := h.send(r, HeaderRetryNum, "1")
	if got.status != http.StatusServiceUnavailable || got.retryAfter == "" {
		t.Fatalf("copy of an unanswered request: %+v, want 503 with Retry-After", got)
	}
	if h.everything(v.ID) != before {
		t.Fatal("the copy of an unanswered request changed something")
	}
	if got := h.send(h.signedClick(fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil))); got.status != http.StatusOK {
		t.Fatalf("the next click: %+v", got)
	}
	if st := h.get(v.ID).Status; st != record.StatusExecuting {
		t.Fatalf("run %s after the next click, want executing", st)
	}
}

// TestConcurrentCopies: copies of one click arriving together make one
// decision; each copy gets the first answer or, while it is not known yet,
// a 503.
func TestConcurrentCopies(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	r := h.signedClick(fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil))
	const copies = 12
	got := make([]httpReply, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() { got[i] = h.send(r) })
	}
	wg.Wait()
	ok := 0
	for i, g := range got {
		switch g.status {
		case http.StatusOK:
			ok++
		case http.StatusServiceUnavailable:
		default:
			t.Errorf("copy %d: %+v", i, g)
		}
	}
	if ok == 0 {
		t.Error("no copy got the answer")
	}
	if ds := h.storedDecisions(v.ID); len(ds) != 1 {
		t.Fatalf("%d decisions from copies of one click, want 1", len(ds))
	}
}

// TestSeenRequestsOutliveTheirWindow: a request's digest is kept as long as
// any replica may still accept the request, and the sweep forgets it after.
func TestSeenRequestsOutliveTheirWindow(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	r := h.signedCommand(leadGrace, "extend "+v.ID+" 1d")
	first := h.send(r)
	deadline := h.deadline(v.ID)
	forget := func() int {
		n, err := ForgetSeen(h.ctx, h.eng.Replays(), h.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	h.clock.Advance(MaxSkew) // the last instant the signature is accepted
	if n := forget(); n != 0 {
		t.Fatalf("the sweep forgot %d requests inside their window", n)
	}
	if got := h.send(r); got != first || !h.deadline(v.ID).Equal(deadline) {
		t.Fatalf("copy at the end of the window: %+v, deadline %v (was %v)", got, h.deadline(v.ID), deadline)
	}
	h.clock.Advance(ReplayMargin)
	if n := forget(); n != 1 {
		t.Fatalf("the sweep forgot %d requests at the end of the margin, want 1", n)
	}
	if got := h.send(r); got.status != http.StatusUnauthorized || !h.deadline(v.ID).Equal(deadline) {
		t.Fatalf("copy after the window: %+v, deadline %v (was %v)", got, h.deadline(v.ID), deadline)
	}
}

// TestSocketEnvelopeDeliveredTwice: an envelope Slack delivers again is acked
// with the first ack and changes nothing; one whose first delivery has no
// answer yet is left unacked.
func TestSocketEnvelopeDeliveredTwice(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	deadline := h.deadline(v.ID)
	env := slashEnvelope(t, leadGrace, "extend "+v.ID+" 1d")
	evt := socketmode.Event{Type: socketmode.EventTypeSlashCommand, Request: &env}
	_, firstAck, handled := h.srv.routeSocket(h.ctx, evt)
	if !handled || firstAck == nil {
		t.Fatalf("first delivery: handled %v, ack %v", handled, firstAck)
	}
	after := h.everything(v.ID)
	want, _ := stdjson.Marshal(firstAck)
	again := env
	again.RetryAttempt, again.RetryReason = 1, "timeout"
	id, ack, handled := h.srv.routeSocket(h.ctx, socketmode.Event{Type: socketmode.EventTypeSlashCommand, Request: &again})
	got, _ := stdjson.Marshal(ack)
	if !handled || id != env.EnvelopeID || string(got) != string(want) {
		t.Fatalf("second delivery: handled %v, acked %q with %s; want %s", handled, id, got, want)
	}
	if h.everything(v.ID) != after || !h.deadline(v.ID).Equal(deadline.Add(24*time.Hour)) {
		t.Fatalf("the second delivery changed something; deadline %v", h.deadline(v.ID))
	}

	click := socketEvent(t, socketmode.EventTypeInteractive, "env-crashed", fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil), false)
	h.claimAsCrashed(socketDigest("env-crashed"))
	if _, _, handled := h.srv.routeSocket(h.ctx, click); handled {
		t.Fatal("a delivery whose first copy has no answer was acked")
	}
	if h.everything(v.ID) != after {
		t.Fatal("a delivery whose first copy has no answer changed something")
	}
}

// TestAClickIsOneCommit: an Approve click, decided or refused, is one
// commit of the store: its claim, the decision (or the refusal's audit) and
// its answer together. A copy commits nothing, is answered as the first and
// tells nobody anything again. Other requests are claimed before they are
// handled and answered after, as before.
func TestAClickIsOneCommit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		request    func(h *slackHarness, v *workflow.RunView) sent
		commits    int64
		wantStatus record.Status
		told       int   // ephemeral messages after the first copy
		copyCommit int64 // a claim made alone is an Update, even when it finds a copy
	}{
		{"approve", func(h *slackHarness, v *workflow.RunView) sent {
			return h.signedClick(fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil))
		}, 1, record.StatusExecuting, 0, 0},
		{"approve by someone without the role", func(h *slackHarness, v *workflow.RunView) sent {
			return h.signedClick(fixture(t, "block_actions_approve.json", refOf(v), nobody, nil))
		}, 1, record.StatusWaitingApproval, 1, 0},
		{"/runs extend", func(h *slackHarness, v *workflow.RunView) sent {
			return h.signedCommand(leadGrace, "extend "+v.ID+" 1d")
		}, 3, record.StatusWaitingApproval, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSlackHarness(t)
			v := h.submit("refund-double-charge", "")
			r := tc.request(h, v)
			commits := h.store.Commits()
			first := h.send(r)
			if first.status != http.StatusOK {
				t.Fatalf("first copy: %+v", first)
			}
			if got := h.store.Commits() - commits; got != tc.commits {
				t.Errorf("%d commits for the first copy, want %d", got, tc.commits)
			}
			if st := h.get(v.ID).Status; st != tc.wantStatus {
				t.Errorf("run %s, want %s", st, tc.wantStatus)
			}
			if n := len(h.acts.Ephemerals()); n != tc.told {
				t.Errorf("%d ephemeral messages after the first copy, want %d", n, tc.told)
			}
			after, commits := h.everything(v.ID), h.store.Commits()
			if again := h.send(r, HeaderRetryNum, "1"); again != first {
				t.Errorf("copy answered %+v, want %+v", again, first)
			}
			if got := h.store.Commits() - commits; got != tc.copyCommit {
				t.Errorf("a copy committed %d times, want %d", got, tc.copyCommit)
			}
			if h.everything(v.ID) != after {
				t.Error("a copy changed something")
			}
		})
	}
}
