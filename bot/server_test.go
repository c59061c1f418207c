package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/workflow"
)

// storedDecisions reads a run's decisions as stored, with what the engine
// keeps and does not show (the payload digest).
func (h *slackHarness) storedDecisions(id string) []*record.Decision {
	h.t.Helper()
	var ds []*record.Decision
	err := h.eng.Store().View(h.ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		ds, err = tx.Decisions(ctx, id)
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return ds
}

func (h *slackHarness) refunds() []demo.Change {
	h.t.Helper()
	ch, err := h.shop.Changes(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []demo.Change
	for _, c := range ch {
		if c.Kind == demo.KindRefund {
			out = append(out, c)
		}
	}
	return out
}

func TestApproveClickRunsTheActionOnce(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	body := formBody(fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil))
	status, resp := h.post("/slack/interactions", body, signed(hSecret, h.clock.Now().Unix(), body))
	if status != http.StatusOK || resp != "" {
		t.Fatalf("click: %d %q, want 200 and an empty body", status, resp)
	}
	after := h.get(v.ID)
	if after.Status != record.StatusExecuting {
		t.Fatalf("run is %s after the click, want executing (the worker runs it, not the handler)", after.Status)
	}
	if n := len(h.refunds()); n != 0 {
		t.Fatalf("%d refunds before the worker ran: the handler executed the action", n)
	}
	ds := h.storedDecisions(v.ID)
	if len(ds) != 1 || ds[0].ApproverID != leadGrace || ds[0].Via != "slack" || ds[0].Role != "team_lead" ||
		ds[0].Verdict != record.VerdictApprove || ds[0].PayloadDigest != digest(body) || ds[0].ApproverName != "grace.hopper" {
		t.Fatalf("decisions = %+v", ds)
	}
	if e := h.acts.Ephemerals(); len(e) != 0 {
		t.Errorf("ephemeral messages after a good click: %+v", e)
	}
	// The worker resumes the run from the store.
	run, err := h.eng.Resume(h.ctx, v.ID)
	if err != nil || run.Status != record.StatusDone {
		t.Fatalf("resume: %v, %v", run, err)
	}
	if r := h.refunds(); len(r) != 1 || r[0].Amount != "119.00" || r[0].PaymentID != "PAY-507862-2" {
		t.Fatalf("refunds = %+v, want one of 119.00 on PAY-507862-2", r)
	}
}

// TestClickRefusals: every refusal leaves the run and the shop as they were
// (the engine's audit log aside). A request that is itself bad gets an HTTP
// error; a person whose click cannot count gets a 200 and an ephemeral
// message saying why.
func TestClickRefusals(t *testing.T) {
	type req struct {
		body []byte
		hdr  http.Header
	}
	// signedNow is a click signed as Slack would, now.
	signedNow := func(h *slackHarness, payload []byte) req {
		body := formBody(payload)
		return req{body, signed(hSecret, h.clock.Now().Unix(), body)}
	}
	approveBy := func(h *slackHarness, ref Ref, user string) []byte {
		return fixture(t, "block_actions_approve.json", ref, user, nil)
	}
	for _, tc := range []struct {
		name       string
		requester  string                                         // "" for the proposal's agent
		prepare    func(h *slackHarness, v *workflow.RunView)     // runs before the snapshot
		request    func(h *slackHarness, v *workflow.RunView) req // the request under test
		wantStatus int
		wantTold   []string // in the ephemeral message; none expected when nil
		expires    bool     // a late decision ends the run as expired: the engine's rule
	}{
		{
			name: "missing signature",
			request: func(h *slackHarness, v *workflow.RunView) req {
				r := signedNow(h, approveBy(h, refOf(v), leadGrace))
				r.hdr.Del(HeaderSignature)
				return r
			},
			wantStatus: http.StatusUnauthorized,
		},
		{
			name: "missing timestamp",
			request: func(h *slackHarness, v *workflow.RunView) req {
				r := signedNow(h, approveBy(h, refOf(v), leadGrace))
				r.hdr.Del(HeaderTimestamp)
				return r
			},
			wantStatus: http.StatusUnauthorized,
		},
		{
			name: "forged signature",
			request: func(h *slackHarness, v *workflow.RunView) req {
				body := formBody(approveBy(h, refOf(v), leadGrace))
				return req{body, signed("not-the-secret", h.clock.Now().Unix(), body)}
			},
			wantStatus: http.StatusUnauthorized,
		},
		{
			name: "old signature",
			request: func(h *slackHarness, v *workflow.RunView) req {
				body := formBody(approveBy(h, refOf(v), leadGrace))
				return req{body, signed(hSecret, h.clock.Now().Add(-MaxSkew-time.Second).Unix(), body)}
			},
			wantStatus: http.StatusUnauthorized,
		},
		{
			name: "future signature",
			request: func(h *slackHarness, v *workflow.RunView) req {
				body := formBody(approveBy(h, refOf(v), leadGrace))
				return req{body, signed(hSecret, h.clock.Now().Add(MaxSkew+time.Second).Unix(), body)}
			},
			wantStatus: http.StatusUnauthorized,
		},
		{
			name: "body altered after signing",
			request: func(h *slackHarness, v *workflow.RunView) req {
				// Signed for someone without a role, then rewritten to a team lead.
				r := signedNow(h, approveBy(h, refOf(v), nobody))
				r.body = bytes.Replace(r.body, []byte(nobody), []byte(leadGrace), 1)
				return r
			},
			wantStatus: http.StatusUnauthorized,
		},
		{
			name: "wrong app",
			request: func(h *slackHarness, v *workflow.RunView) req {
				p := bytes.Replace(approveBy(h, refOf(v), leadGrace), []byte(`"api_app_id":"A0SIGNOFF1"`), []byte(`"api_app_id":"A0OTHERAPP"`), 1)
				return signedNow(h, p)
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "wrong workspace",
			request: func(h *slackHarness, v *workflow.RunView) req {
				p := bytes.ReplaceAll(approveBy(h, refOf(v), leadGrace), []byte(`T0SHOP0001`), []byte(`T0ELSEWHR1`))
				return signedNow(h, p)
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "user of another organisation in a shared channel",
			request: func(h *slackHarness, v *workflow.RunView) req {
				return signedNow(h, fixture(t, "block_actions_shared_channel_foreign_user.json", refOf(v), leadGrace, nil))
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "unknown run",
			request: func(h *slackHarness, v *workflow.RunView) req {
				ref := refOf(v)
				ref.RunID = "run_00000000000000000000dead"
				return signedNow(h, approveBy(h, ref, leadGrace))
			},
			wantStatus: http.StatusOK,
			wantTold:   []string{"there is no run", "run_00000000000000000000dead"},
		},
		{
			name: "stale fingerprint",
			request: func(h *slackHarness, v *workflow.RunView) req {
				ref := refOf(v)
				ref.Fingerprint = strings.Repeat("ab", 32)
				return signedNow(h, approveBy(h, ref, leadGrace))
			},
			wantStatus: http.StatusOK,
			wantTold:   []string{"abababababab", "the request is for", "current message"},
		},
		{
			name: "request of another run",
			request: func(h *slackHarness, v *workflow.RunView) req {
				other := h.submit("refund-double-charge", "")
				ref := refOf(v)
				ref.RequestID = other.Gate.RequestID
				return signedNow(h, approveBy(h, ref, leadGrace))
			},
			wantStatus: http.StatusOK,
			wantTold:   []string{"not from an approval request of run"},
		},
		{
			name: "no role",
			request: func(h *slackHarness, v *workflow.RunView) req {
				return signedNow(h, approveBy(h, refOf(v), nobody))
			},
			wantStatus: http.StatusOK,
			wantTold:   []string{nobody, "holds no role", "team_lead"},
		},
		{
			name:      "self-approval",
			requester: leadOmar,
			request: func(h *slackHarness, v *workflow.RunView) req {
				return signedNow(h, approveBy(h, refOf(v), leadOmar))
			},
			wantStatus: http.StatusOK,
			wantTold:   []string{"asked for this action", "large-refund"},
		},
		{
			name: "past the deadline",
			request: func(h *slackHarness, v *workflow.RunView) req {
				h.clock.Advance(72*time.Hour + time.Second)
				return signedNow(h, approveBy(h, refOf(v), leadGrace))
			},
			wantStatus: http.StatusOK,
			wantTold:   []string{"Too late", "deadline passed"},
			expires:    true,
		},
		{
			name: "already decided",
			prepare: func(h *slackHarness, v *workflow.RunView) {
				h.clock.Advance(90 * time.Minute)
				if status, _ := h.click(approveBy(h, refOf(v), leadGrace)); status != http.StatusOK {
					t.Fatalf("first click: %d", status)
				}
				h.clock.Advance(3 * time.Minute)
			},
			request: func(h *slackHarness, v *workflow.RunView) req {
				return signedNow(h, approveBy(h, refOf(v), manager))
			},
			wantStatus: http.StatusOK,
			wantTold:   []string{"already approved by <@U0LEAD0001>", "2026-11-30 10:30 UTC"},
		},
		{
			name: "already decided, same person twice",
			prepare: func(h *slackHarness, v *workflow.RunView) {
				h.click(approveBy(h, refOf(v), leadGrace))
			},
			request: func(h *slackHarness, v *workflow.RunView) req {
				return signedNow(h, approveBy(h, refOf(v), leadGrace))
			},
			wantStatus: http.StatusOK,
			wantTold:   []string{"already approved by <@U0LEAD0001>"},
		},
		{
			name:       "malformed form",
			request:    func(h *slackHarness, v *workflow.RunView) req { return signedRaw(h, "payload=%zz") },
			wantStatus: http.StatusBadRequest,
		},
		{
			name:       "no payload field",
			request:    func(h *slackHarness, v *workflow.RunView) req { return signedRaw(h, "token=x&type=block_actions") },
			wantStatus: http.StatusBadRequest,
		},
		{
			name: "two payload fields",
			request: func(h *slackHarness, v *workflow.RunView) req {
				p := formBody(approveBy(h, refOf(v), leadGrace))
				return signedRaw(h, string(p)+"&"+string(formBody([]byte(`{"type":"view_closed"}`))))
			},
			wantStatus: http.StatusBadRequest,
		},
		{
			name: "malformed JSON",
			request: func(h *slackHarness, v *workflow.RunView) req {
				return signedNow(h, []byte(`{"type":"block_actions",`))
			},
			wantStatus: http.StatusBadRequest,
		},
		{
			name: "trailing data after the JSON",
			request: func(h *slackHarness, v *workflow.RunView) req {
				return signedNow(h, append(approveBy(h, refOf(v), leadGrace), []byte(`{"type":"x"}`)...))
			},
			wantStatus: http.StatusBadRequest,
		},
		{
			name: "duplicate JSON keys",
			request: func(h *slackHarness, v *workflow.RunView) req {
				// A second api_app_id: one parser may read the first, another the last.
				p := bytes.Replace(approveBy(h, refOf(v), leadGrace), []byte(`"api_app_id":"A0SIGNOFF1"`),
					[]byte(`"api_app_id":"A0SIGNOFF1","api_app_id":"A0OTHERAPP"`), 1)
				return signedNow(h, p)
			},
			wantStatus: http.StatusBadRequest,
		},
		{
			name: "duplicate JSON keys inside the user",
			request: func(h *slackHarness, v *workflow.RunView) req {
				p := bytes.Replace(approveBy(h, refOf(v), nobody), []byte(`"id":"`+nobody+`"`),
					[]byte(`"id":"`+nobody+`","id":"`+leadGrace+`"`), 1)
				return signedNow(h, p)
			},
			wantStatus: http.StatusBadRequest,
		},
		{
			name: "duplicate JSON keys in a part we do not read",
			request: func(h *slackHarness, v *workflow.RunView) req {
				p := bytes.Replace(approveBy(h, refOf(v), leadGrace), []byte(`"bot_id":"B0SIGNOFF1"`),
					[]byte(`"bot_id":"B0SIGNOFF1","bot_id":"B0SIGNOFF1"`), 1)
				return signedNow(h, p)
			},
			wantStatus: http.StatusBadRequest,
		},
		{
			name: "button value that is not ours",
			request: func(h *slackHarness, v *workflow.RunView) req {
				p := bytes.ReplaceAll(approveBy(h, refOf(v), leadGrace), []byte(`"value":"v1:`), []byte(`"value":"v9:`))
				return signedNow(h, p)
			},
			wantStatus: http.StatusBadRequest,
		},
		{
			name: "oversized body",
			request: func(h *slackHarness, v *workflow.RunView) req {
				return signedRaw(h, string(formBody(approveBy(h, refOf(v), leadGrace)))+"&pad="+strings.Repeat("x", DefaultMaxBody))
			},
			wantStatus: http.StatusRequestEntityTooLarge,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSlackHarness(t)
			v := h.submit("refund-double-charge", tc.requester)
			if tc.prepare != nil {
				tc.prepare(h, v)
			}
			before := h.snapshot(v.ID)
			decisions := len(h.storedDecisions(v.ID))
			told := len(h.acts.Ephemerals())
			r := tc.request(h, v)
			status, _ := h.post("/slack/interactions", r.body, r.hdr)
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d", status, tc.wantStatus)
			}
			if tc.expires {
				after := h.get(v.ID)
				if after.Status != record.StatusExpired || len(h.storedDecisions(v.ID)) != decisions || len(h.refunds()) != 0 {
					t.Fatalf("late click: run %s, %d decisions, %d refunds", after.Status, len(h.storedDecisions(v.ID)), len(h.refunds()))
				}
			} else if after := h.snapshot(v.ID); after != before {
				t.Fatalf("the refusal changed the run or the shop:\nbefore %s\nafter  %s", before, after)
			}
			eph := h.acts.Ephemerals()[told:]
			if tc.wantTold == nil {
				if len(eph) != 0 {
					t.Fatalf("ephemeral messages %+v, want none", eph)
				}
				return
			}
			if len(eph) != 1 {
				t.Fatalf("%d ephemeral messages, want 1: %+v", len(eph), eph)
			}
			e := eph[0]
			if e.Channel != hChannel || e.User == "" {
				t.Errorf("ephemeral to %s in %s", e.User, e.Channel)
			}
			for _, want := range tc.wantTold {
				if !strings.Contains(e.Text, want) {
					t.Errorf("told %q; want it to contain %q", e.Text, want)
				}
			}
		})
	}
}

// signedRaw signs a raw body now.
func signedRaw(h *slackHarness, body string) struct {
	body []byte
	hdr  http.Header
} {
	return struct {
		body []byte
		hdr  http.Header
	}{[]byte(body), signed(hSecret, h.clock.Now().Unix(), []byte(body))}
}

// TestOversizedBodyWithoutLength: a chunked body has no Content-Length to
// refuse early; the limited reader stops it.
func TestOversizedBodyWithoutLength(t *testing.T) {
	h := newSlackHarness(t)
	body := []byte("payload=" + strings.Repeat("x", DefaultMaxBody+1))
	req, _ := http.NewRequestWithContext(h.ctx, http.MethodPost, h.url+"/slack/interactions", io.MultiReader(bytes.NewReader(body)))
	req.Header = signed(hSecret, h.clock.Now().Unix(), body)
	req.ContentLength = -1
	resp, err := h.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
}

// TestConcurrentClicks: 50 clicks on one run from several people over
// loopback HTTP make one decision, and the worker makes one refund.
func TestConcurrentClicks(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	users := []string{leadGrace, leadOmar, manager}
	const clicks = 50
	var wg sync.WaitGroup
	statuses := make([]int, clicks)
	for i := range clicks {
		wg.Go(func() {
			body := formBody(fixture(t, "block_actions_approve.json", refOf(v), users[i%len(users)], nil))
			statuses[i], _ = h.post("/slack/interactions", body, signed(hSecret, h.clock.Now().Unix(), body))
		})
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("click %d: %d", i, s)
		}
	}
	ds := h.storedDecisions(v.ID)
	if len(ds) != 1 {
		t.Fatalf("%d decisions recorded, want exactly 1: %+v", len(ds), ds)
	}
	if eph := h.acts.Ephemerals(); len(eph) != clicks-1 {
		t.Errorf("%d people told their click changed nothing, want %d", len(eph), clicks-1)
	} else {
		for _, e := range eph {
			if !strings.Contains(e.Text, "already approved by <@"+ds[0].ApproverID+">") {
				t.Errorf("told %q", e.Text)
			}
		}
	}
	if got := h.get(v.ID).Status; got != record.StatusExecuting {
		t.Fatalf("run %s, want executing", got)
	}
	for range 2 { // a second resume finds the receipt and does nothing
		if run, err := h.eng.Resume(h.ctx, v.ID); err != nil || run.Status != record.StatusDone {
			t.Fatalf("resume: %v %v", run, err)
		}
	}
	if r := h.refunds(); len(r) != 1 {
		t.Fatalf("%d refunds, want 1", len(r))
	}
}

// TestOrganisations replays the org-wide install, Enterprise Grid and shared
// channel payloads against a server configured for our workspace and
// organisation, and for our workspace alone.
func TestOrganisations(t *testing.T) {
	for _, tc := range []struct {
		fixture    string
		teamOnly   bool
		wantStatus int
	}{
		{"block_actions_approve.json", false, http.StatusOK},
		{"block_actions_approve.json", true, http.StatusOK},
		{"block_actions_org_wide_install.json", false, http.StatusOK},
		{"block_actions_org_wide_install.json", true, http.StatusForbidden},
		{"block_actions_enterprise_grid.json", false, http.StatusOK},
		{"block_actions_enterprise_grid.json", true, http.StatusForbidden},
		{"block_actions_shared_channel_our_user.json", false, http.StatusOK},
		{"block_actions_shared_channel_our_user.json", true, http.StatusOK},
		{"block_actions_shared_channel_foreign_user.json", false, http.StatusForbidden},
		{"block_actions_shared_channel_foreign_user.json", true, http.StatusForbidden},
	} {
		name := strings.TrimSuffix(tc.fixture, ".json")
		if tc.teamOnly {
			name += "/team only"
		}
		t.Run(name, func(t *testing.T) {
			h := newSlackHarness(t, func(c *ServerConfig) {
				if tc.teamOnly {
					c.EnterpriseID = ""
				}
			})
			v := h.submit("refund-double-charge", "")
			status, _ := h.click(fixture(t, tc.fixture, refOf(v), leadGrace, nil))
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d", status, tc.wantStatus)
			}
			want := record.StatusWaitingApproval
			if status == http.StatusOK {
				want = record.StatusExecuting
			}
			if got := h.get(v.ID).Status; got != want {
				t.Fatalf("run %s, want %s", got, want)
			}
		})
	}
}

func TestRejectFlow(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("reship-planter", "")
	ref := refOf(v)

	// Reject opens the reason modal at once, with the button's claim in it.
	p := fixture(t, "block_actions_reject.json", ref, leadOmar, nil)
	if status, _ := h.click(p); status != http.StatusOK {
		t.Fatalf("reject click: %d", status)
	}
	ic, err := ParseInteraction(p)
	if err != nil {
		t.Fatal(err)
	}
	views := h.acts.Views()
	if len(views) != 1 || views[0].View.CallbackID != CallbackReject || views[0].View.PrivateMetadata != ref.String() ||
		views[0].Trigger != ic.TriggerID {
		t.Fatalf("views opened: %+v", views)
	}
	if got := h.get(v.ID).Status; got != record.StatusWaitingApproval {
		t.Fatalf("run %s after opening the modal", got)
	}

	// An empty reason keeps the modal open with an error.
	before := h.snapshot(v.ID)
	status, body := h.click(fixture(t, "view_submission_reject.json", ref, leadOmar, map[string]string{"REASON": "   "}))
	if status != http.StatusOK || !strings.Contains(body, `"response_action":"errors"`) || !strings.Contains(body, `"reason":"Say why`) {
		t.Fatalf("empty reason: %d %s", status, body)
	}
	if h.snapshot(v.ID) != before {
		t.Fatal("an empty reason changed the run")
	}

	// Someone without the role: the modal says why, nothing changes.
	status, body = h.click(fixture(t, "view_submission_reject.json", ref, nobody, map[string]string{"REASON": "no"}))
	if status != http.StatusOK || !strings.Contains(body, `"response_action":"errors"`) || !strings.Contains(body, "holds no role") {
		t.Fatalf("no role: %d %s", status, body)
	}
	if h.snapshot(v.ID) != before {
		t.Fatal("a refused rejection changed the run")
	}

	const why = `photo shows the box only; "ask" for a picture <please>`
	status, body = h.click(fixture(t, "view_submission_reject.json", ref, leadOmar, map[string]string{"REASON": why}))
	if status != http.StatusOK || body != "" {
		t.Fatalf("reject: %d %q, want 200 and an empty body (the modal closes)", status, body)
	}
	after := h.get(v.ID)
	if after.Status != record.StatusRejected || len(after.Decisions) != 1 || after.Decisions[0].Reason != why || after.Decisions[0].Via != "slack" {
		t.Fatalf("after rejecting: %s %+v", after.Status, after.Decisions)
	}

	// A late submission from another modal is told who decided.
	status, body = h.click(fixture(t, "view_submission_reject.json", ref, leadGrace, map[string]string{"REASON": "me too"}))
	if status != http.StatusOK || !strings.Contains(body, "already rejected by @U0LEAD0002") {
		t.Fatalf("second rejection: %d %s", status, body)
	}
	// And a click on Reject of a decided run opens nothing.
	h.click(fixture(t, "block_actions_reject.json", ref, leadGrace, nil))
	if n := len(h.acts.Views()); n != 1 {
		t.Fatalf("%d modals opened, want still 1", n)
	}
}

func TestRejectModalNotOpened(t *testing.T) {
	for _, tc := range []struct {
		name     string
		user     string
		viewErr  error
		wantTold string
	}{
		{"no role", nobody, nil, "you hold no signoff role"},
		{"slack refuses the modal", leadGrace, errors.New("expired_trigger_id"), "Slack did not open the form (expired_trigger_id)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSlackHarness(t)
			h.acts.viewErr = tc.viewErr
			v := h.submit("refund-double-charge", "")
			h.click(fixture(t, "block_actions_reject.json", refOf(v), tc.user, nil))
			eph := h.acts.Ephemerals()
			if len(eph) != 1 || !strings.Contains(eph[0].Text, tc.wantTold) {
				t.Fatalf("told %+v, want %q", eph, tc.wantTold)
			}
		})
	}
}

func TestEditFlow(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	ref := refOf(v)
	if status, _ := h.click(fixture(t, "block_actions_edit.json", ref, leadGrace, nil)); status != http.StatusOK {
		t.Fatalf("edit click: %d", status)
	}
	views := h.acts.Views()
	if len(views) != 1 || views[0].View.CallbackID != CallbackEdit || views[0].View.PrivateMetadata != ref.String() {
		t.Fatalf("views opened: %+v", views)
	}
	modal, _ := json.Marshal(views[0].View)
	if !strings.Contains(string(modal), `\"amount\": 119`) {
		t.Fatalf("the modal does not show the arguments: %s", modal)
	}

	submit := func(user, args string) (int, string) {
		return h.click(fixture(t, "view_submission_edit.json", ref, user, map[string]string{"ARGS": args, "REASON": "keep the shipping"}))
	}
	before := h.snapshot(v.ID)
	for _, tc := range []struct{ name, args, want string }{
		{"not JSON", `{"amount": 100,`, "Not valid JSON"},
		{"duplicate keys", `{"amount":100,"amount":1,"currency":"CAD","order_id":"LK-507862","payment_id":"PAY-507862-2","reason_code":"RFD-DOUBLE"}`, "Not valid JSON"},
		{"unchanged", `{"order_id":"LK-507862","amount":119.00,"currency":"CAD","payment_id":"PAY-507862-2","reason_code":"RFD-DOUBLE"}`, "Nothing changed"},
		{"refused by the schema", `{"amount":-5,"currency":"CAD","order_id":"LK-507862","payment_id":"PAY-507862-2","reason_code":"RFD-DOUBLE"}`, "invalid"},
		{"refused by the shop's check", `{"amount":500,"currency":"CAD","order_id":"LK-507862","payment_id":"PAY-507862-2","reason_code":"RFD-DOUBLE"}`, "fail a check"},
	} {
		status, body := submit(leadGrace, tc.args)
		if status != http.StatusOK || !strings.Contains(body, `"response_action":"errors"`) || !strings.Contains(body, `"action_0":`) || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want errors on action_0 with %q", tc.name, status, body, tc.want)
		}
		if h.snapshot(v.ID) != before {
			t.Fatalf("%s: a refused edit changed the run", tc.name)
		}
	}

	status, body := submit(leadGrace, "{\n  \"amount\": 100,\n  \"currency\": \"CAD\",\n  \"order_id\": \"LK-507862\",\n  \"payment_id\": \"PAY-507862-2\",\n  \"reason_code\": \"RFD-DOUBLE\"\n}")
	if status != http.StatusOK || body != "" {
		t.Fatalf("edit: %d %s", status, body)
	}
	after := h.get(v.ID)
	if after.Status != record.StatusExecuting || after.Fingerprint == v.Fingerprint || !strings.Contains(string(after.Actions[0].Args), `"amount":100`) {
		t.Fatalf("after the edit: %s %s %s", after.Status, after.Fingerprint, after.Actions[0].Args)
	}
	if run, err := h.eng.Resume(h.ctx, v.ID); err != nil || run.Status != record.StatusDone {
		t.Fatalf("resume: %v %v", run, err)
	}
	if r := h.refunds(); len(r) != 1 || r[0].Amount != "100.00" {
		t.Fatalf("refunds %+v, want one of 100.00", r)
	}
	// The old button is stale now.
	h.click(fixture(t, "block_actions_approve.json", ref, leadOmar, nil))
	eph := h.acts.Ephemerals()
	if len(eph) != 1 || !strings.Contains(eph[0].Text, "edited") {
		t.Fatalf("old button: told %+v", eph)
	}
}

func TestEditNotAllowedByTheRule(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("reship-planter", "")
	h.click(fixture(t, "block_actions_edit.json", refOf(v), leadGrace, nil))
	if len(h.acts.Views()) != 0 {
		t.Fatal("an edit modal opened for a rule without edit")
	}
	if eph := h.acts.Ephemerals(); len(eph) != 1 || !strings.Contains(eph[0].Text, "does not allow editing") {
		t.Fatalf("told %+v", eph)
	}
	// A submission made anyway (a modal from before a policy change) is refused by the engine.
	p := fixture(t, "view_submission_edit.json", refOf(v), leadGrace,
		map[string]string{"ARGS": `{"free_shipping":true,"order_id":"LK-640436","reason":"defective","sku":"PLANTER"}`, "REASON": ""})
	status, body := h.click(bytes.ReplaceAll(p, []byte(`"action_0"`), []byte(`"action_1"`)))
	if status != http.StatusOK || !strings.Contains(body, "does not allow editing") || !strings.Contains(body, `"action_1"`) {
		t.Fatalf("edit submission: %d %s", status, body)
	}
}

// TestRestoreRedacted: a field shown as [redacted] keeps its stored value;
// one the editor replaced takes the new value.
func TestRestoreRedacted(t *testing.T) {
	orig := json.RawMessage(`{"amount":119,"card":{"number":"4111","exp":"12/29"},"items":[{"sku":"A","token":"t1"},{"sku":"B","token":"t2"}],"payment_id":"PAY-1"}`)
	paths := []string{"payment_id", "card.number", "items.token"}
	for _, tc := range []struct{ name, edited, want string }{
		{"all kept", `{"amount":100,"card":{"exp":"12/29","number":"[redacted]"},"items":[{"sku":"A","token":"[redacted]"},{"sku":"B","token":"[redacted]"}],"payment_id":"[redacted]"}`,
			`{"amount":100,"card":{"exp":"12/29","number":"4111"},"items":[{"sku":"A","token":"t1"},{"sku":"B","token":"t2"}],"payment_id":"PAY-1"}`},
		{"one replaced", `{"amount":119,"card":{"exp":"12/29","number":"[redacted]"},"items":[],"payment_id":"PAY-2"}`,
			`{"amount":119,"card":{"exp":"12/29","number":"4111"},"items":[],"payment_id":"PAY-2"}`},
		{"new element has no stored value", `{"items":[{"sku":"A","token":"[redacted]"},{"sku":"B","token":"[redacted]"},{"sku":"C","token":"[redacted]"}]}`,
			`{"items":[{"sku":"A","token":"t1"},{"sku":"B","token":"t2"},{"sku":"C","token":"[redacted]"}]}`},
		{"not a redacted path", `{"amount":"[redacted]"}`, `{"amount":"[redacted]"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited, err := jsonvalue.Canonical([]byte(tc.edited))
			if err != nil {
				t.Fatal(err)
			}
			got, err := RestoreRedacted(orig, edited, paths)
			if err != nil || string(got) != tc.want {
				t.Fatalf("restoreRedacted = %s, %v\nwant %s", got, err, tc.want)
			}
		})
	}
}

// TestNoSecretRefusesHTTP: a server built for Socket Mode alone, without a
// signing secret, refuses every HTTP request, however it is signed.
func TestNoSecretRefusesHTTP(t *testing.T) {
	h := newSlackHarness(t, func(c *ServerConfig) { c.SigningSecret = "" })
	v := h.submit("refund-double-charge", "")
	body := formBody(fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil))
	for _, secret := range []string{"", hSecret} {
		if status, _ := h.post("/slack/interactions", body, signed(secret, h.clock.Now().Unix(), body)); status != http.StatusUnauthorized {
			t.Fatalf("signed with %q: %d, want 401", secret, status)
		}
	}
	if status, _ := h.command(fixture(t, "slash_runs.form", Ref{}, leadGrace, map[string]string{"TEXT": "pending"})); status != http.StatusUnauthorized {
		t.Fatalf("command: %d, want 401", status)
	}
	if _, err := h.srv.HandleInteraction(h.ctx, fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil)); err != nil {
		t.Fatal(err)
	}
	if got := h.get(v.ID).Status; got != record.StatusExecuting {
		t.Fatalf("over Socket Mode's entry the click decides: run %s", got)
	}
}

func TestNewServerRefusesIncompleteConfig(t *testing.T) {
	h := newSlackHarness(t)
	good := ServerConfig{Engine: h.eng, SigningSecret: "s", AppID: "A", TeamID: "T", Slack: h.acts}
	if _, err := NewServer(good); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	for name, mutate := range map[string]func(*ServerConfig){
		"no engine":       func(c *ServerConfig) { c.Engine = nil },
		"no app":          func(c *ServerConfig) { c.AppID = "" },
		"no organisation": func(c *ServerConfig) { c.TeamID, c.EnterpriseID = "", "" },
		"no slack client": func(c *ServerConfig) { c.Slack = nil },
	} {
		c := good
		mutate(&c)
		if _, err := NewServer(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestRoleLookupFailureIsRefusedClearly: with Slack user groups configured and
// Slack down, someone the config does not name is refused and told to retry.
func TestRoleLookupFailureIsRefusedClearly(t *testing.T) {
	h := newSlackHarness(t)
	lister := &fakeLister{err: errors.New("slack: internal_error")}
	dir := NewDirectory(h.eng.Roles(), map[string]string{"team_lead": "S0LEADS001"}, lister, time.Minute, h.clock)
	eng, err := workflow.New(workflow.Config{Store: h.eng.Store(), Policy: h.eng.Policy(), Roles: h.eng.Roles(), Dir: dir, Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(ServerConfig{Engine: eng, SigningSecret: hSecret, AppID: hAppID, TeamID: hTeamID, Clock: h.clock, Slack: h.acts, Directory: dir})
	if err != nil {
		t.Fatal(err)
	}
	v := h.submit("refund-double-charge", "")
	before := h.snapshot(v.ID)
	resp, err := srv.HandleInteraction(h.ctx, fixture(t, "block_actions_approve.json", refOf(v), "U0GROUPED1", nil))
	if err != nil || resp.Body != nil {
		t.Fatalf("HandleInteraction: %+v %v", resp, err)
	}
	eph := h.acts.Ephemerals()
	if len(eph) != 1 || !strings.Contains(eph[0].Text, "could not check your role with Slack") {
		t.Fatalf("told %+v", eph)
	}
	if h.snapshot(v.ID) != before {
		t.Fatal("the refusal changed the run")
	}
	// A team lead named in the config still decides.
	if _, err := srv.HandleInteraction(h.ctx, fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil)); err != nil {
		t.Fatal(err)
	}
	if got := h.get(v.ID).Status; got != record.StatusExecuting {
		t.Fatalf("run %s, want executing", got)
	}
}

func TestIgnoredInteractions(t *testing.T) {
	h := newSlackHarness(t)
	for _, p := range []string{
		`{"type":"view_closed","api_app_id":"A0SIGNOFF1","user":{"id":"U0LEAD0001","team_id":"T0SHOP0001"},"view":{"callback_id":"signoff_reject"}}`,
		`{"type":"shortcut","api_app_id":"A0SIGNOFF1","user":{"id":"U0LEAD0001","team_id":"T0SHOP0001"},"callback_id":"x"}`,
		`{"type":"block_actions","api_app_id":"A0SIGNOFF1","user":{"id":"U0LEAD0001","team_id":"T0SHOP0001"},"actions":[{"action_id":"someone_elses","value":"x"}]}`,
		`{"type":"view_submission","api_app_id":"A0SIGNOFF1","user":{"id":"U0LEAD0001","team_id":"T0SHOP0001"},"view":{"callback_id":"other","state":{"values":{}}}}`,
	} {
		status, body := h.click([]byte(p))
		if status != http.StatusOK || body != "" {
			t.Errorf("%s: %d %q, want an empty 200", p, status, body)
		}
	}
	if len(h.acts.Ephemerals())+len(h.acts.Views()) != 0 {
		t.Fatal("an ignored interaction reached Slack")
	}
	// A view of another app is refused.
	status, _ := h.click([]byte(`{"type":"view_submission","api_app_id":"A0SIGNOFF1","user":{"id":"U0LEAD0001","team_id":"T0SHOP0001"},"view":{"app_id":"A0OTHERAPP","callback_id":"signoff_reject"}}`))
	if status != http.StatusForbidden {
		t.Fatalf("view of another app: %d", status)
	}
}

func TestStatusOf(t *testing.T) {
	for err, want := range map[error]int{
		fmt.Errorf("%w: %w", errUnsigned, ErrTooOld): 401,
		fmt.Errorf("x: %w", ErrTooLarge):             413,
		fmt.Errorf("x: %w", ErrMalformed):            400,
		fmt.Errorf("x: %w", ErrForbidden):            403,
		errors.New("disk full"):                      500,
	} {
		if got := statusOf(err); got != want {
			t.Errorf("statusOf(%v) = %d, want %d", err, got, want)
		}
	}
}
