package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/api"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// exerciseBreakGlass runs the break-glass operations on TestAPI's harness,
// each answering and refusing, so that the end of TestAPI sees them.
func exerciseBreakGlass(t *testing.T, h *harness) {
	ctx := context.Background()
	s, err := h.client(tokAll).Submit(ctx, deployProposal("k-bg", "5.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	force := mustJSON(t, map[string]string{"fingerprint": *s.Fingerprint, "reason": "the outage needs it now"})
	path := "/v1/runs/" + s.Id

	// The agent holds the role agent, below the rule's break_glass role.
	a := h.do("POST", path+"/force", tokAll, "application/json", []byte(force), false)
	if p := a.problem(t); a.status != http.StatusForbidden || p.Code != record.CodeNoRole || deref(p.RunId) != s.Id {
		t.Fatalf("force by the agent: %d %s", a.status, a.body)
	}

	a = h.do("POST", path+"/force", tokLead, "application/json", []byte(force), false)
	var v workflow.RunView
	if err := json.Unmarshal(a.body, &v); a.status != http.StatusOK || err != nil {
		t.Fatalf("force: %d %s (%v)", a.status, a.body, err)
	}
	if v.Status != record.StatusExecuting || v.Forced == nil || v.Forced.By != "U0LEAD" || v.Forced.Via != record.ViaAPI ||
		v.Forced.Reason != "the outage needs it now" {
		t.Fatalf("forced run: %s, forced %+v", v.Status, v.Forced)
	}

	a = h.do("GET", "/v1/reviews", tokRead, "", nil, false)
	if p := a.problem(t); a.status != http.StatusForbidden || p.Code != api.CodeInsufficientScope {
		t.Fatalf("reviews with a read token: %d %s", a.status, a.body)
	}
	a = h.do("GET", "/v1/reviews", tokSec, "", nil, false)
	var list api.ReviewList
	if err := json.Unmarshal(a.body, &list); a.status != http.StatusOK || err != nil {
		t.Fatalf("reviews: %d %s (%v)", a.status, a.body, err)
	}
	if !slices.ContainsFunc(list.Reviews, func(r api.Review) bool {
		return r.RunId == s.Id && r.ForcedBy == "U0LEAD" && r.Role == "team_lead" && r.Status == api.ReviewStatusPending
	}) {
		t.Fatalf("the forced run's review is not pending: %s", a.body)
	}

	ack := path + "/review/acknowledge"
	a = h.do("POST", ack, tokLead, "application/json", []byte(`{"note":"mine"}`), false)
	if p := a.problem(t); a.status != http.StatusForbidden || p.Code != record.CodeSelfApproval {
		t.Fatalf("the forcer acknowledges: %d %s", a.status, a.body)
	}
	a = h.do("POST", ack, tokSec, "application/json", []byte(`{"note":"checked the change log"}`), false)
	var r api.Review
	if err := json.Unmarshal(a.body, &r); a.status != http.StatusOK || err != nil {
		t.Fatalf("acknowledge: %d %s (%v)", a.status, a.body, err)
	}
	if r.Status != api.ReviewStatusAcknowledged || deref(r.AcknowledgedBy) != "U0SEC" || deref(r.Note) != "checked the change log" || r.AcknowledgedAt == nil {
		t.Fatalf("acknowledged review %s", a.body)
	}
	a = h.do("GET", path, tokAll, "", nil, false)
	if err := json.Unmarshal(a.body, &v); a.status != http.StatusOK || err != nil || v.Review == nil || v.Review.AcknowledgedBy != "U0SEC" {
		t.Fatalf("the run after its review: %d %s (%v)", a.status, a.body, err)
	}
	a = h.do("POST", ack, tokSec, "application/json", []byte(`{}`), false)
	if p := a.problem(t); a.status != http.StatusConflict || p.Code != record.CodeAlreadyDecided {
		t.Fatalf("a second acknowledgement: %d %s", a.status, a.body)
	}
	a = h.do("GET", "/v1/reviews", tokSec, "", nil, false)
	if a.status != http.StatusOK || strings.Contains(string(a.body), s.Id) {
		t.Fatalf("an acknowledged review is still pending: %d %s", a.status, a.body)
	}
}

// TestForceThroughTheAPIIsRefusedAsTheEngineRefuses: every refusal of a
// force or an acknowledgement is a problem with the engine's code, changes
// nothing but the audit log's record of it, and leaves the run waiting.
func TestForceThroughTheAPIIsRefusedAsTheEngineRefuses(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOpts{})
	s, err := h.client(tokAll).Submit(ctx, deployProposal("k-refuse", "5.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	fp := *s.Fingerprint
	// A run the lead requested: the lead may not force it.
	own := deployProposal("k-own", "5.0.2")
	own.Requester = record.Person{ID: "U0LEAD"}
	mine, err := h.engine.Submit(ctx, own)
	if err != nil {
		t.Fatal(err)
	}
	mv, err := h.engine.Get(ctx, mine.ID)
	if err != nil {
		t.Fatal(err)
	}
	bare := newHarness(t, harnessOpts{noBreakGlass: true})
	bs, err := bare.client(tokAll).Submit(ctx, deployProposal("k-bare", "5.0.3"))
	if err != nil {
		t.Fatal(err)
	}
	body := func(fp, reason string) string {
		return mustJSON(t, map[string]string{"fingerprint": fp, "reason": reason})
	}
	tests := []struct {
		name    string
		h       *harness
		path    string
		token   string
		body    string
		status  int
		code    string
		runID   string
		audited bool
	}{
		{"a requester without the break_glass role", h, s.Id + "/force", tokAll, body(fp, "x"), 403, record.CodeNoRole, s.Id, true},
		{"a stale fingerprint", h, s.Id + "/force", tokLead, body(strings.Repeat("0", 64), "x"), 409, record.CodeStaleFingerprint, s.Id, true},
		{"a fingerprint too short to bind", h, s.Id + "/force", tokLead, body(fp[:4], "x"), 409, record.CodeStaleFingerprint, s.Id, true},
		{"the run's own requester", h, mine.ID + "/force", tokLead, body(mv.Fingerprint, "x"), 403, record.CodeSelfApproval, mine.ID, true},
		{"a rule without break_glass", bare, bs.Id + "/force", tokLead, body(*bs.Fingerprint, "x"), 409, record.CodeNoBreakGlass, bs.Id, true},
		{"an unknown run", h, "run_nope/force", tokLead, body(fp, "x"), 404, record.CodeUnknownRun, "run_nope", true},
		{"no justification", h, s.Id + "/force", tokLead, body(fp, " "), 400, record.CodeInvalidInput, "", false},
		{"no fingerprint", h, s.Id + "/force", tokLead, `{"fingerprint":" ","reason":"x"}`, 400, record.CodeInvalidInput, "", false},
		{"a token without the force scope", h, s.Id + "/force", tokRead, body(fp, "x"), 403, api.CodeInsufficientScope, "", false},
		{"acknowledge a run never forced", h, s.Id + "/review/acknowledge", tokSec, `{}`, 409, record.CodeNoReview, s.Id, true},
		{"acknowledge with an unknown token", h, s.Id + "/review/acknowledge", tokAll + "x", `{}`, 401, api.CodeUnauthorized, "", false},
		{"acknowledge with a read token", h, s.Id + "/review/acknowledge", tokRead, `{}`, 403, api.CodeInsufficientScope, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.h.snapshot()
			a := tc.h.do("POST", "/v1/runs/"+tc.path, tc.token, "application/json", []byte(tc.body), strings.Contains(tc.body, `" "`))
			p := a.problem(t)
			if a.status != tc.status || p.Code != tc.code || deref(p.RunId) != tc.runID {
				t.Fatalf("%d %s, want %d %s about %q", a.status, a.body, tc.status, tc.code, tc.runID)
			}
			after := tc.h.snapshot()
			if tc.audited {
				if after.Audit != before.Audit+1 {
					t.Errorf("audit %d → %d, want the refusal recorded", before.Audit, after.Audit)
				}
				after.Audit = before.Audit
			}
			if after.json(t) != before.json(t) {
				t.Errorf("the refusal changed the store:\nbefore %s\nafter  %s", before.json(t), after.json(t))
			}
		})
	}
}
