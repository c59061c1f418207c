package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/console"
	"github.com/signoff-dev/signoff/record"
)

// runs are the runs a route case acts on: one waiting, one waiting whose
// rule allows editing, one needing attention; and the forms the lead's
// pages offer on them.
type runs struct {
	waiting, ticket, stuck string
	decide, edit, resolve  url.Values
}

func seedRuns(t *testing.T, h *harness) runs {
	t.Helper()
	r := runs{waiting: h.submit(t, bot, "refund", `{"amount":5}`, "a refund"), ticket: h.submit(t, bot, "ticket", ticketArgs, "a ticket"),
		stuck: h.needsAttention(t)}
	// The forms as the pages fill them (a read-only console's offer none:
	// the same fields, from the runs).
	bound := func(id string) url.Values {
		v, err := h.engine.Get(t.Context(), id)
		if err != nil || len(v.Requests) == 0 {
			t.Fatalf("run %s: %v", id, err)
		}
		return url.Values{"request_id": {v.Requests[len(v.Requests)-1].ID}, "fingerprint": {v.Fingerprint}}
	}
	r.decide = bound(r.waiting)
	r.decide.Set("verdict", "approve")
	r.edit = bound(r.ticket)
	r.edit.Set("index", "0")
	r.edit.Set("arg.title", "Refund A-1")
	r.edit.Set("arg.priority", "4")
	r.resolve = url.Values{"outcome": {"ran"}, "reason": {"checked at the target"}}
	return r
}

// path is the case's path with its run put in.
func (r runs) path(p string) string {
	return strings.NewReplacer("WAITING", r.waiting, "TICKET", r.ticket, "STUCK", r.stuck).Replace(p)
}

// unchanged fails the test when a refused request changed a run.
func (r runs) unchanged(t *testing.T, h *harness, what string) {
	t.Helper()
	for id, want := range map[string]record.Status{r.waiting: record.StatusWaitingApproval, r.ticket: record.StatusWaitingApproval, r.stuck: record.StatusNeedsAttention} {
		v, err := h.engine.Get(t.Context(), id)
		if err != nil || v.Status != want {
			t.Fatalf("after %s, run %s is %v (%v), want %s", what, id, v.Status, err, want)
		}
	}
}

// signInViewer signs b in as a login the identity provider vouches for and
// no member maps: one who may read and never decide.
func signInViewer(t *testing.T, h *harness, b *browser) {
	t.Helper()
	rec := httptest.NewRecorder()
	if err := h.console.SignIn(rec, httptest.NewRequest(http.MethodGet, h.srv.URL+"/ui/inbox", nil),
		console.Identity{Subject: "sub-eve", Email: "eve@corp.example", Method: console.MethodOIDC}); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(h.srv.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	b.c.Jar.SetCookies(u, rec.Result().Cookies())
	if p := b.get("/ui/inbox"); p.status != http.StatusOK || !strings.Contains(p.body, "eve@corp.example · no role") {
		t.Fatalf("the viewer's inbox: %d\n%s", p.status, p.body)
	}
}

// TestEveryRoute covers each route of the console's mux, and fails when
// one has no case here: signed out it sends to the login (a page) or
// refuses (401, a decision); another method is 405; every POST without the
// session's CSRF token is refused (403); a decision from a viewer with no
// role (403) and on a read-only console (403) is refused; and nothing a
// refusal answered changed a run.
func TestEveryRoute(t *testing.T) {
	h, _ := oidcHarness(t, nil, true)
	rs := seedRuns(t, h)
	ro := newHarness(t, harnessOpts{readOnly: true})
	ros := seedRuns(t, ro)
	const na = 0 // not probed: see the case
	cases := []struct {
		pattern string // as the mux has it
		path    string // WAITING, TICKET or STUCK: that run
		form    func(runs) url.Values
		// Signed out: the status and where it sends (a prefix).
		signedOut int
		to        string
		wrong     string // a method the path does not answer: 405
		viewer    int    // signed in with no role
		readOnly  int    // the lead on a read-only console; na: the route is not there
	}{
		{pattern: "GET /ui/{$}", path: "/ui/", signedOut: http.StatusSeeOther, to: "/ui/inbox", wrong: http.MethodPost,
			viewer: http.StatusSeeOther, readOnly: http.StatusSeeOther},
		// The session cookie's path is /ui/, so a POST to /ui carries no
		// token and is refused (403) before any route: DELETE is the probe.
		{pattern: "GET /ui", path: "/ui", signedOut: http.StatusSeeOther, to: "/ui/inbox", wrong: http.MethodDelete,
			viewer: http.StatusSeeOther, readOnly: http.StatusSeeOther},
		{pattern: "GET /ui/static/", path: "/ui/static/console.css", signedOut: http.StatusOK, wrong: http.MethodPost,
			viewer: http.StatusOK, readOnly: http.StatusOK},
		{pattern: "GET /ui/login", path: "/ui/login", signedOut: http.StatusOK, wrong: http.MethodDelete,
			viewer: http.StatusOK, readOnly: http.StatusOK},
		// Logging in as a member is not a decision: a viewer may become
		// one through the local login, on a read-only console too.
		{pattern: "POST /ui/login", path: "/ui/login", form: func(runs) url.Values { return url.Values{"member": {lead}} },
			signedOut: http.StatusSeeOther, to: "/ui/inbox", wrong: http.MethodDelete, viewer: http.StatusSeeOther, readOnly: http.StatusSeeOther},
		{pattern: "POST /ui/logout", path: "/ui/logout", form: func(runs) url.Values { return url.Values{} },
			signedOut: http.StatusSeeOther, to: "/ui/login", wrong: http.MethodGet, viewer: http.StatusSeeOther, readOnly: http.StatusSeeOther},
		{pattern: "GET /ui/oidc/login", path: "/ui/oidc/login?next=/ui/inbox", signedOut: http.StatusSeeOther, to: "http://127.0.0.1:",
			wrong: http.MethodPost, viewer: http.StatusSeeOther, readOnly: na},
		{pattern: "GET /ui/oidc/callback", path: "/ui/oidc/callback?code=x&state=y", signedOut: http.StatusBadRequest, wrong: http.MethodPost,
			viewer: http.StatusBadRequest, readOnly: na},
		{pattern: "GET /ui/inbox", path: "/ui/inbox", signedOut: http.StatusSeeOther, to: "/ui/login?next=%2Fui%2Finbox", wrong: http.MethodPost,
			viewer: http.StatusOK, readOnly: http.StatusOK},
		{pattern: "GET /ui/runs/{id}", path: "/ui/runs/WAITING", signedOut: http.StatusSeeOther, to: "/ui/login?next=%2Fui%2Fruns%2Frun_",
			wrong: http.MethodPut, viewer: http.StatusOK, readOnly: http.StatusOK},
		{pattern: "GET /ui/ops", path: "/ui/ops", signedOut: http.StatusSeeOther, to: "/ui/login?next=%2Fui%2Fops", wrong: http.MethodPost,
			viewer: http.StatusOK, readOnly: http.StatusOK},
		{pattern: "POST /ui/runs/{id}/decide", path: "/ui/runs/WAITING/decide", form: func(r runs) url.Values { return r.decide },
			signedOut: http.StatusUnauthorized, wrong: http.MethodGet, viewer: http.StatusForbidden, readOnly: http.StatusForbidden},
		{pattern: "POST /ui/runs/{id}/edit", path: "/ui/runs/TICKET/edit", form: func(r runs) url.Values { return r.edit },
			signedOut: http.StatusUnauthorized, wrong: http.MethodGet, viewer: http.StatusForbidden, readOnly: http.StatusForbidden},
		{pattern: "POST /ui/runs/{id}/resolve", path: "/ui/runs/STUCK/resolve", form: func(r runs) url.Values { return r.resolve },
			signedOut: http.StatusUnauthorized, wrong: http.MethodGet, viewer: http.StatusForbidden, readOnly: http.StatusForbidden},
	}
	var covered []string
	for _, tc := range cases {
		covered = append(covered, tc.pattern)
	}
	if got := h.console.Routes(); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(covered))) {
		t.Fatalf("the console has the routes\n%v\nand this test covers\n%v\nadd a case for each new route", got, covered)
	}
	// send asks path of h with method, as b; a POST with form and the
	// session's CSRF token (its own csrf when the form has one).
	send := func(b *browser, h *harness, method, path string, form url.Values) page {
		t.Helper()
		if method == http.MethodPost {
			f := url.Values{}
			for k, v := range form {
				f[k] = slices.Clone(v)
			}
			return b.post(path, f)
		}
		req, err := http.NewRequest(method, h.srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b.do(req)
	}
	for _, tc := range cases {
		t.Run(tc.pattern, func(t *testing.T) {
			method, _, _ := strings.Cut(tc.pattern, " ")
			var form url.Values
			if tc.form != nil {
				form = tc.form(rs)
			}
			path := rs.path(tc.path)
			out := h.browser(t)
			out.get("/ui/login") // a session, for the CSRF token, and no login
			if got := send(out, h, method, path, form); got.status != tc.signedOut || !strings.HasPrefix(got.header.Get("Location"), tc.to) ||
				(tc.to == "") != (got.header.Get("Location") == "") {
				t.Errorf("signed out: %d to %q, want %d to %q…", got.status, got.header.Get("Location"), tc.signedOut, tc.to)
			}
			rs.unchanged(t, h, "signed out")
			lb := h.browser(t)
			lb.login(lead)
			lb.get("/ui/inbox") // the new session's CSRF token
			if got := send(lb, h, tc.wrong, path, form); got.status != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405", tc.wrong, path, got.status)
			}
			if method == http.MethodPost {
				f := url.Values{"csrf": {""}}
				for k, v := range form {
					f[k] = v
				}
				if got := lb.post(path, f); got.status != http.StatusForbidden || !strings.Contains(got.body, "security token") {
					t.Errorf("without the CSRF token: %d, want 403 saying why\n%s", got.status, got.body)
				}
				rs.unchanged(t, h, "a POST without the CSRF token")
			}
			viewer := h.browser(t)
			signInViewer(t, h, viewer)
			if got := send(viewer, h, method, path, form); got.status != tc.viewer {
				t.Errorf("a viewer with no role: %d, want %d\n%s", got.status, tc.viewer, got.body)
			} else if tc.viewer == http.StatusForbidden && !strings.Contains(got.body, "maps to no member of the roles: you may read and not decide") {
				t.Errorf("a viewer with no role is refused without saying why:\n%s", got.body)
			}
			rs.unchanged(t, h, "a viewer's request")
			if tc.readOnly == na {
				return
			}
			rb := ro.browser(t)
			rb.login(lead)
			rb.get("/ui/inbox")
			if tc.form != nil {
				form = tc.form(ros)
			}
			if got := send(rb, ro, method, ros.path(tc.path), form); got.status != tc.readOnly {
				t.Errorf("on a read-only console: %d, want %d\n%s", got.status, tc.readOnly, got.body)
			} else if tc.readOnly == http.StatusForbidden && !strings.Contains(got.body, "read-only") {
				t.Errorf("a read-only console refuses without saying why:\n%s", got.body)
			}
			ros.unchanged(t, ro, "a request to a read-only console")
		})
	}
	// The same forms from someone who may: each is done, so the refusals
	// above were of forms that would have worked.
	for _, tc := range []struct {
		who, path string
		form      url.Values
		id        string
		want      record.Status
	}{
		{lead, "/ui/runs/" + rs.waiting + "/decide", rs.decide, rs.waiting, record.StatusExecuting},
		{lead, "/ui/runs/" + rs.ticket + "/edit", rs.edit, rs.ticket, record.StatusExecuting},
		{manager, "/ui/runs/" + rs.stuck + "/resolve", rs.resolve, rs.stuck, record.StatusDone},
	} {
		b := h.browser(t)
		b.login(tc.who)
		b.get("/ui/inbox")
		if got := b.post(tc.path, tc.form); got.status != http.StatusSeeOther {
			t.Errorf("POST %s as %s: %d, want 303\n%s", tc.path, tc.who, got.status, got.body)
		}
		h.wantStatus(t, tc.id, tc.want)
	}
}
