package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/signoff-dev/signoff/console"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

func TestRoutesWithoutLogin(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "refund", `{"amount":5}`, "a refund")
	for _, tc := range []struct {
		name, path string
		status     int
		location   string
	}{
		{"root goes to the inbox", "/ui/", http.StatusSeeOther, "/ui/inbox"},
		{"the prefix alone too", "/ui", http.StatusSeeOther, "/ui/inbox"},
		{"inbox asks for a login", "/ui/inbox?tab=attention", http.StatusSeeOther, "/ui/login?next=%2Fui%2Finbox%3Ftab%3Dattention"},
		{"run asks for a login", "/ui/runs/" + id, http.StatusSeeOther, "/ui/login?next=%2Fui%2Fruns%2F" + id},
		{"operations ask for a login", "/ui/ops", http.StatusSeeOther, "/ui/login?next=%2Fui%2Fops"},
		{"login page", "/ui/login", http.StatusOK, ""},
		{"stylesheet", "/ui/static/console.css", http.StatusOK, ""},
		{"unknown page", "/ui/nothing", http.StatusNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := h.browser(t).get(tc.path)
			if p.status != tc.status || p.header.Get("Location") != tc.location {
				t.Fatalf("GET %s: %d to %q, want %d to %q", tc.path, p.status, p.header.Get("Location"), tc.status, tc.location)
			}
			csp := p.header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "script-src") {
				t.Fatalf("GET %s: Content-Security-Policy %q, want one that allows no script and no inline style", tc.path, csp)
			}
		})
	}
	// A request outside the console starts no session, which would replace
	// the one its pages carry.
	if p := h.browser(t).get("/favicon.ico"); p.status != http.StatusNotFound || p.header.Get("Set-Cookie") != "" {
		t.Fatalf("GET /favicon.ico: %d, Set-Cookie %q; want 404 and no session", p.status, p.header.Get("Set-Cookie"))
	}
	// A decision without a login is refused and changes nothing.
	b := h.browser(t)
	b.get("/ui/login")
	for _, what := range []string{"decide", "edit", "resolve"} {
		if p := b.post("/ui/runs/"+id+"/"+what, url.Values{"verdict": {"approve"}, "outcome": {"ran"}, "reason": {"r"}}); p.status != http.StatusUnauthorized {
			t.Fatalf("%s without a login: %d, want 401", what, p.status)
		}
	}
	h.wantStatus(t, id, record.StatusWaitingApproval)
}

func TestSessionCookie(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	b := h.browser(t)
	p := b.get("/ui/login")
	c := p.header.Get("Set-Cookie")
	for _, want := range []string{"signoff_ui=", "Path=/ui/", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(c, want) {
			t.Fatalf("Set-Cookie %q lacks %s", c, want)
		}
	}
	b.login(lead)
	if p := b.get("/ui/inbox"); p.status != http.StatusOK || !strings.Contains(p.body, lead+" · team_lead") {
		t.Fatalf("inbox after login: %d\n%s", p.status, p.body)
	}
	// A cookie signed with another key is no session: back to the login.
	other := newHarness(t, harnessOpts{sessionKey: []byte("another key, 32 bytes or more....")})
	u, _ := url.Parse(h.srv.URL)
	ob := other.browser(t)
	ou, _ := url.Parse(other.srv.URL)
	ob.c.Jar.SetCookies(ou, b.c.Jar.Cookies(u))
	if p := ob.get("/ui/inbox"); p.status != http.StatusSeeOther {
		t.Fatalf("inbox with a cookie of another key: %d, want 303 to the login", p.status)
	}
	// Logging out ends it.
	b.post("/ui/logout", url.Values{})
	if p := b.get("/ui/inbox"); p.status != http.StatusSeeOther {
		t.Fatalf("inbox after logout: %d, want 303 to the login", p.status)
	}
}

func TestLoginRefusals(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	b := h.browser(t)
	b.get("/ui/login")
	if p := b.post("/ui/login", url.Values{"member": {"U0NOBODY"}}); p.status != http.StatusBadRequest {
		t.Fatalf("login as a stranger: %d, want 400", p.status)
	}
	// next= never leads to another site.
	b.get("/ui/login")
	p := b.post("/ui/login", url.Values{"member": {lead}, "next": {"//evil.example/ui/inbox"}})
	if loc := p.header.Get("Location"); loc != "/ui/inbox" {
		t.Fatalf("login with next=//evil.example: to %q, want /ui/inbox", loc)
	}
	off := newHarness(t, harnessOpts{noLocal: true})
	ob := off.browser(t)
	if p := ob.get("/ui/login"); p.status != http.StatusOK || strings.Contains(p.body, `name="member"`) {
		t.Fatalf("login page without local login: %d, offers members:\n%s", p.status, p.body)
	}
	if p := ob.post("/ui/login", url.Values{"member": {lead}}); p.status != http.StatusForbidden {
		t.Fatalf("local login when it is off: %d, want 403", p.status)
	}
}

func TestCSRFRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "refund", `{"amount":5}`, "")
	b := h.browser(t)
	b.get("/ui/login")
	if p := b.post("/ui/login", url.Values{"member": {lead}, "csrf": {""}}); p.status != http.StatusForbidden {
		t.Fatalf("login without a token: %d, want 403", p.status)
	}
	b.login(lead)
	run := b.get("/ui/runs/" + id)
	for _, tc := range []struct{ name, token string }{{"none", ""}, {"another session's", "bm90IHRoaXMgc2Vzc2lvbidz"}} {
		p := b.post("/ui/runs/"+id+"/decide", url.Values{"verdict": {"approve"}, "csrf": {tc.token}})
		if p.status != http.StatusForbidden || !strings.Contains(p.body, "security token") {
			t.Fatalf("decide with %s token: %d\n%s", tc.name, p.status, p.body)
		}
	}
	_ = run
	h.wantStatus(t, id, record.StatusWaitingApproval)
}

func TestApproveThroughThePage(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "refund", `{"amount":5}`, "refund order 1")
	b := h.browser(t)
	b.login(lead)
	inbox := b.get("/ui/inbox")
	if !strings.Contains(inbox.body, `href="/ui/runs/`+id+`"`) || !strings.Contains(inbox.body, "yours to decide") {
		t.Fatalf("the inbox does not offer run %s to %s:\n%s", id, lead, inbox.body)
	}
	p := b.decide(id, "approve", "looks right")
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/runs/"+id+"?done=approve" {
		t.Fatalf("approve: %d to %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	v := h.wantStatus(t, id, record.StatusExecuting)
	if len(v.Decisions) != 1 || v.Decisions[0].By != lead || v.Decisions[0].Via != record.ViaWeb {
		t.Fatalf("decisions %+v, want one by %s via web", v.Decisions, lead)
	}
	after := b.get("/ui/runs/" + id + "?done=approve")
	if !strings.Contains(after.body, "Your approval was recorded.") || strings.Contains(after.body, `name="verdict"`) {
		t.Fatalf("the run page after approving:\n%s", after.body)
	}
	if inbox := b.get("/ui/inbox"); strings.Contains(inbox.body, id) {
		t.Fatalf("the approved run is still in the inbox:\n%s", inbox.body)
	}
}

func TestRejectNeedsAReason(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "refund", `{"amount":5}`, "")
	b := h.browser(t)
	b.login(lead)
	if p := b.decide(id, "reject", " "); p.status != http.StatusBadRequest || !strings.Contains(p.body, "a rejection needs a reason") {
		t.Fatalf("reject without a reason: %d\n%s", p.status, p.body)
	}
	h.wantStatus(t, id, record.StatusWaitingApproval)
	if p := b.decide(id, "reject", "wrong order"); p.status != http.StatusSeeOther {
		t.Fatalf("reject: %d\n%s", p.status, p.body)
	}
	v := h.wantStatus(t, id, record.StatusRejected)
	if v.Decisions[0].Reason != "wrong order" {
		t.Fatalf("decision %+v, want the reason given", v.Decisions[0])
	}
}

func TestRefusalsShownInWords(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, tc := range []struct {
		name, as, requester string
		fingerprint         string // "" keeps the page's
		status              int
		words               string
	}{
		{"a viewer whose role may not decide", bot, bot, "", http.StatusForbidden, "your role is not one the rule asks for"},
		{"self-approval", lead, lead, "", http.StatusForbidden, "You may not approve your own request"},
		{"a stale fingerprint", lead, bot, "0000stale", http.StatusConflict, "The proposal changed after this page was shown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := h.submit(t, tc.requester, "refund", `{"amount":5}`, "")
			b := h.browser(t)
			b.login(tc.as)
			run := b.get("/ui/runs/" + id)
			form := url.Values{"verdict": {"approve"}, "reason": {""}}
			for _, f := range []string{"request_id", "fingerprint"} {
				form.Set(f, field(t, run.body, f))
			}
			if tc.fingerprint != "" {
				form.Set("fingerprint", tc.fingerprint)
			}
			p := b.post("/ui/runs/"+id+"/decide", form)
			if p.status != tc.status || !strings.Contains(p.body, tc.words) {
				t.Fatalf("%d, want %d saying %q:\n%s", p.status, tc.status, tc.words, p.body)
			}
			h.wantStatus(t, id, record.StatusWaitingApproval)
		})
	}
}

func TestReadOnlyRefusesDecisions(t *testing.T) {
	h := newHarness(t, harnessOpts{readOnly: true})
	id := h.submit(t, bot, "refund", `{"amount":5}`, "")
	b := h.browser(t)
	b.login(lead)
	run := b.get("/ui/runs/" + id)
	if run.status != http.StatusOK || strings.Contains(run.body, `name="verdict"`) || !strings.Contains(run.body, "read-only") {
		t.Fatalf("read-only run page: %d, offers a decision or does not say read-only:\n%s", run.status, run.body)
	}
	p := b.post("/ui/runs/"+id+"/decide", url.Values{"verdict": {"approve"}})
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "read-only") {
		t.Fatalf("decide on a read-only console: %d\n%s", p.status, p.body)
	}
	h.wantStatus(t, id, record.StatusWaitingApproval)
}

func TestUnknownRun(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	b := h.browser(t)
	b.login(lead)
	if p := b.get("/ui/runs/run_nothing"); p.status != http.StatusNotFound {
		t.Fatalf("an unknown run: %d, want 404", p.status)
	}
}

func TestInboxFiltersAndPages(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	var refunds, notes []string
	for i := range 60 {
		h.clock.Advance(1e9)
		if i%3 == 0 {
			notes = append(notes, h.submit(t, lead2, "note", `{"text":"n"}`, "a note"))
		} else {
			refunds = append(refunds, h.submit(t, bot, "refund", `{"amount":5}`, "refund"))
		}
	}
	b := h.browser(t)
	b.login(lead)
	first := b.get("/ui/inbox")
	if n := strings.Count(first.body, `<tr class="yours">`) + strings.Count(first.body, "<tr>\n<td><a href=\"/ui/runs/"); n != 50 {
		t.Fatalf("the first page lists %d runs, want 50", n)
	}
	m := strings.Index(first.body, `rel="next" href="`)
	if m < 0 {
		t.Fatalf("the first page has no next link:\n%s", first.body)
	}
	link := first.body[m+len(`rel="next" href="`):]
	link = strings.ReplaceAll(link[:strings.Index(link, `"`)], "&amp;", "&")
	second := b.get(link)
	if strings.Contains(second.body, "rel=\"next\"") {
		t.Fatalf("the second page (%s) has a next link:\n%s", link, second.body)
	}
	for _, id := range append(append([]string{}, refunds...), notes...) {
		if strings.Contains(first.body, id) == strings.Contains(second.body, id) {
			t.Fatalf("run %s is on both pages or on neither", id)
		}
	}
	ruled := b.get("/ui/inbox?rule=notes")
	for _, id := range refunds {
		if strings.Contains(ruled.body, id) {
			t.Fatalf("rule=notes lists refund %s", id)
		}
	}
	for _, id := range notes {
		if !strings.Contains(ruled.body, id) {
			t.Fatalf("rule=notes lacks note %s", id)
		}
	}
	if byReq := b.get("/ui/inbox?requester=" + lead2 + "&action=note"); strings.Count(byReq.body, `href="/ui/runs/`) != len(notes) {
		t.Fatalf("requester=%s&action=note lists %d runs, want %d", lead2, strings.Count(byReq.body, `href="/ui/runs/`), len(notes))
	}
	if text := b.get("/ui/inbox?q=" + refunds[3]); strings.Count(text.body, `href="/ui/runs/`) != 1 {
		t.Fatalf("q=<one run's id> lists %d runs, want 1", strings.Count(text.body, `href="/ui/runs/`))
	}
	// The text is searched in the store, in what identifies a run: its
	// requester and its rule too, in any case.
	if text := b.get("/ui/inbox?q=" + strings.ToUpper(lead2)); strings.Count(text.body, `href="/ui/runs/`) != len(notes) {
		t.Fatalf("q=<a requester> lists %d runs, want %d", strings.Count(text.body, `href="/ui/runs/`), len(notes))
	}
	if text := b.get("/ui/inbox?q=note"); strings.Count(text.body, `href="/ui/runs/`) != len(notes) {
		t.Fatalf("q=<a rule's name> lists %d runs, want %d", strings.Count(text.body, `href="/ui/runs/`), len(notes))
	}
	if long := b.get("/ui/inbox?q=" + strings.Repeat("x", 201)); long.status != http.StatusBadRequest || !strings.Contains(long.body, "at most 200") {
		t.Fatalf("a search of 201 bytes: %d\n%s", long.status, long.body)
	}
	if bad := b.get("/ui/inbox?after=nonsense"); bad.status != http.StatusBadRequest {
		t.Fatalf("after=nonsense: %d, want 400", bad.status)
	}
	for _, tab := range []string{"scheduled", "attention", "reviews"} {
		if p := b.get("/ui/inbox?tab=" + tab); p.status != http.StatusOK || strings.Contains(p.body, refunds[0]) {
			t.Fatalf("tab %s: %d, or lists a waiting run", tab, p.status)
		}
	}
}

// TestHostileStringsRenderedInert puts every hostile string of the
// fixture (and strings that would be live HTML) in everything a requester
// writes, and checks the pages show them inert: no tag, no control or
// format character, no attribute opened by them.
func TestHostileStringsRenderedInert(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "fixtures", "hostile", "strings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Strings []string `json:"strings"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	html := []string{`<script>alert(1)</script>`, `"><img src=x onerror=alert(1)>`, `</textarea><b>bold</b>`, `<a href="javascript:alert(1)">x</a>`,
		`<style>body{display:none}</style>`, `{{.CSRF}}`}
	all := append(append([]string{}, fx.Strings...), html...)
	h := newHarness(t, harnessOpts{})
	args, _ := json.Marshal(map[string]any{"text": all})
	var ev []record.Evidence
	for _, s := range all {
		if strings.TrimSpace(s) == "" {
			continue // a source is required
		}
		data, _ := json.Marshal(s)
		ev = append(ev, record.Evidence{Source: s, Data: data})
	}
	id := h.submit(t, bot, "note", string(args), strings.Join(all, " | "), ev...)
	b := h.browser(t)
	b.login(lead)
	for _, path := range []string{"/ui/runs/" + id, "/ui/inbox", "/ui/inbox?q=" + url.QueryEscape("<script>")} {
		p := b.get(path)
		if p.status != http.StatusOK {
			t.Fatalf("GET %s: %d", path, p.status)
		}
		if live := liveMarkup(p.body); live != "" {
			t.Fatalf("GET %s: the page has live markup from a string: %s", path, live)
		}
		for _, r := range p.body {
			if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r < 0xa0) || r == 0x202e || r == 0x200b || r == 0x2028 || r == 0xfeff || r == 0x2066 {
				t.Fatalf("GET %s: the page holds %U raw", path, r)
			}
		}
		if strings.Count(p.body, `name="csrf"`) != strings.Count(p.body, `method="post"`) {
			t.Fatalf("GET %s: a form lacks its token, or a string added a field", path)
		}
	}
	run := b.get("/ui/runs/" + id)
	if !strings.Contains(run.body, `class="untrusted"`) || !strings.Contains(run.body, `\u202eDAC 00.911\u202c`) ||
		!strings.Contains(run.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatalf("the run page does not show the hostile strings escaped in the untrusted box:\n%s", run.body)
	}
}

func TestRunPageShowsTheRun(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "refund", `{"amount":5,"order":"A-1"}`, "refund A-1")
	b := h.browser(t)
	b.login(lead)
	if p := b.decide(id, "approve", ""); p.status != http.StatusSeeOther {
		t.Fatalf("approve: %d\n%s", p.status, p.body)
	}
	if _, err := h.engine.Resume(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	h.wantStatus(t, id, record.StatusDone)
	p := b.get("/ui/runs/" + id)
	evs, err := h.engine.AuditLog(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Verified:", "rcpt-", string(record.EventProposed), evs[len(evs)-1].Hash, "As executed", "<code>5</code>", "via web"} {
		if !strings.Contains(p.body, want) {
			t.Fatalf("the run page lacks %q:\n%s", want, p.body)
		}
	}
}

// consoleTags are the elements the console's templates write; any other
// came from a string.
var consoleTags = map[string]bool{}

func init() {
	for _, t := range strings.Fields("html head meta title link body header nav form span input button main p a h1 h2 h3 dl dt dd " +
		"section ul li strong code table thead tbody tr th td label select option textarea div") {
		consoleTags[t] = true
	}
}

// liveMarkup names the first element, attribute or link in body that the
// console's templates do not write: an event handler, a script link, a tag
// of another kind.
func liveMarkup(body string) string {
	z := html.NewTokenizer(strings.NewReader(body))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			if !consoleTags[tok.Data] {
				return "<" + tok.Data + ">"
			}
			for _, a := range tok.Attr {
				v := strings.ToLower(strings.TrimSpace(a.Val))
				if strings.HasPrefix(a.Key, "on") || a.Key == "style" || a.Key == "src" ||
					(a.Key == "href" || a.Key == "action") && !strings.HasPrefix(v, "/ui/") && !strings.HasPrefix(v, "?") {
					return tok.String()
				}
			}
		}
	}
}

// field is the value of the hidden input name in body ("" name: none).
func field(t testing.TB, body, name string) string {
	t.Helper()
	if name == "" {
		return ""
	}
	i := strings.Index(body, `name="`+name+`" value="`)
	if i < 0 {
		t.Fatalf("no field %s in:\n%s", name, body)
	}
	v := body[i+len(`name="`+name+`" value="`):]
	return v[:strings.Index(v, `"`)]
}

func (h *harness) wantStatus(t testing.TB, id string, want record.Status) *workflow.RunView {
	t.Helper()
	v, err := h.engine.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != want {
		t.Fatalf("run %s is %s, want %s", id, v.Status, want)
	}
	return v
}

// TestSecureCookieOverTLS: over TLS the session cookie is Secure, so a
// browser never sends it in clear.
func TestSecureCookieOverTLS(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	tls := httptest.NewTLSServer(h.srv.Config.Handler)
	defer tls.Close()
	resp, err := tls.Client().Get(tls.URL + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := resp.Header.Get("Set-Cookie"); !strings.Contains(c, "; Secure") {
		t.Fatalf("Set-Cookie over TLS %q is not Secure", c)
	}
	if p := h.browser(t).get("/ui/login"); strings.Contains(p.header.Get("Set-Cookie"), "Secure") {
		t.Fatalf("Set-Cookie over plain HTTP %q is Secure: a browser would drop it", p.header.Get("Set-Cookie"))
	}
}

// TestArgumentsSideBySide: an approver's edit shows the arguments as
// proposed beside them as edited and as executed, the changed field marked
// and the unchanged one not.
func TestArgumentsSideBySide(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "note", `{"text":"send 100","to":"ana"}`, "")
	ctx := context.Background()
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: id, Approver: record.Person{ID: lead}, Verdict: record.VerdictApprove,
		Via: record.ViaCLI, Edit: json.RawMessage(`{"text":"send 10","to":"ana"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	b := h.browser(t)
	b.login(manager)
	p := b.get("/ui/runs/" + id)
	changed := regexp.MustCompile(`(?s)<tr class="changed">\s*<th scope="row"><code>text</code></th><td><code>&#34;send 100&#34;</code></td>\s*` +
		`<td><code>&#34;send 10&#34;</code> <span class="badge">changed</span></td>\s*<td><code>&#34;send 10&#34;</code></td></tr>`)
	same := regexp.MustCompile(`(?s)<tr>\s*<th scope="row"><code>to</code></th><td><code>&#34;ana&#34;</code></td>\s*<td><code>&#34;ana&#34;</code></td>`)
	if !changed.MatchString(p.body) || !same.MatchString(p.body) {
		t.Fatalf("the run page does not show text changed (100 → 10) and to unchanged:\n%s", p.body)
	}
}

// TestInboxShowsCompositeProgress: a composite approval lists each place
// with who filled it.
func TestInboxShowsCompositeProgress(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "deploy", `{"service":"api"}`, "")
	if _, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: id, Approver: record.Person{ID: lead},
		Verdict: record.VerdictApprove, Via: record.ViaCLI}); err != nil {
		t.Fatal(err)
	}
	b := h.browser(t)
	b.login(manager)
	p := b.get("/ui/inbox")
	for _, want := range []string{`<li class="done">team_lead or above: 1 of 1: U0LEAD</li>`, `<li>manager or above: 0 of 1</li>`, "composite: at least"} {
		if !strings.Contains(p.body, want) {
			t.Fatalf("the inbox lacks %q:\n%s", want, p.body)
		}
	}
}

// TestDecisionNeedsTheFingerprintShown: a decision that names no request
// and fingerprint is refused, so that nobody decides a proposal they were
// not shown.
func TestDecisionNeedsTheFingerprintShown(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "refund", `{"amount":5}`, "")
	b := h.browser(t)
	b.login(lead)
	b.get("/ui/runs/" + id)
	if p := b.post("/ui/runs/"+id+"/decide", url.Values{"verdict": {"approve"}}); p.status != http.StatusBadRequest ||
		!strings.Contains(p.body, "lacks the request and fingerprint") {
		t.Fatalf("decide without the fingerprint: %d\n%s", p.status, p.body)
	}
	h.wantStatus(t, id, record.StatusWaitingApproval)
}

// TestReviewsTab: a forced approval's follow-up review is listed in its
// own tab, its justification shown inert as the requester's words are.
func TestReviewsTab(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "refund", `{"amount":5}`, "")
	if _, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: id, Approver: record.Person{ID: manager},
		Verdict: record.VerdictApprove, Reason: "outage <b>now</b>\u202e", Via: record.ViaCLI, Force: true}); err != nil {
		t.Fatal(err)
	}
	b := h.browser(t)
	b.login(lead)
	p := b.get("/ui/inbox?tab=reviews")
	for _, want := range []string{`href="/ui/runs/` + id + `"`, `<td class="untrusted">outage &lt;b&gt;now&lt;/b&gt;\u202e</td>`, "<td>" + manager + "</td>"} {
		if !strings.Contains(p.body, want) {
			t.Fatalf("the reviews tab lacks %q:\n%s", want, p.body)
		}
	}
	if w := b.get("/ui/inbox"); strings.Contains(w.body, id) {
		t.Fatalf("the forced run is still listed as waiting")
	}
}

// TestAttentionTab: a run whose outcome its target could not say is listed
// under needs attention, not as waiting.
func TestAttentionTab(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "wobble", `{"n":1}`, "")
	b := h.browser(t)
	b.login(lead)
	if p := b.decide(id, "approve", ""); p.status != http.StatusSeeOther {
		t.Fatalf("approve: %d\n%s", p.status, p.body)
	}
	if _, err := h.engine.Resume(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	h.wantStatus(t, id, record.StatusNeedsAttention)
	if p := b.get("/ui/inbox?tab=attention"); !strings.Contains(p.body, `href="/ui/runs/`+id+`"`) {
		t.Fatalf("the attention tab does not list %s:\n%s", id, p.body)
	}
	if p := b.get("/ui/inbox?status=needs_attention"); !strings.Contains(p.body, `href="/ui/runs/`+id+`"`) || !strings.Contains(p.body, `aria-current="page">Needs attention`) {
		t.Fatalf("status=needs_attention does not pick the attention tab:\n%s", p.body)
	}
	if p := b.get("/ui/inbox"); strings.Contains(p.body, id) {
		t.Fatalf("the waiting tab lists %s", id)
	}
	if p := b.get("/ui/runs/" + id); !strings.Contains(p.body, "the register refuses to say") {
		t.Fatalf("the run page does not say what the operation met:\n%s", p.body)
	}
}

// TestSignInByTheHost: a program that mounts the console behind its own
// login signs a person in as a member; the console then shows them as
// that member, with their role, and their decisions are theirs.
func TestSignInByTheHost(t *testing.T) {
	h := newHarness(t, harnessOpts{noLocal: true})
	c, err := console.New(console.Config{Engine: h.engine, Prefix: "/ui", SessionKey: testKey, Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", c)
	mux.HandleFunc("/sso/callback", func(w http.ResponseWriter, r *http.Request) {
		// As an identity provider's callback would, once it mapped the person.
		if err := c.SignIn(w, r, console.Identity{Member: manager, Subject: "sub-42", Email: "ana@example.com", Method: "sso"}); err != nil {
			t.Error(err)
		}
		http.Redirect(w, r, "/ui/inbox", http.StatusSeeOther)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	b := h.browser(t)
	b.h = &harness{engine: h.engine, clock: h.clock, srv: srv}
	// The cookie's path is the console's: the callback's answer sets it there.
	if p := b.get("/sso/callback"); p.status != http.StatusSeeOther {
		t.Fatalf("callback: %d", p.status)
	}
	if p := b.get("/ui/inbox"); p.status != http.StatusOK || !strings.Contains(p.body, manager+" · manager · sso login") {
		t.Fatalf("inbox after the host's sign-in: %d\n%s", p.status, p.body)
	}
	if err := c.SignIn(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), console.Identity{Method: "sso"}); err == nil {
		t.Fatal("a sign-in without a member was accepted")
	}
}
