package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/show"
	"github.com/signoff-dev/signoff/workflow"
)

// liveAttempts are strings that would run or add something if a page took
// them as markup: each tries to set window.__pwned or the page's title, or
// to hide the page. The fixture's strings attack terminals and Slack; these
// attack the browser.
var liveAttempts = []string{
	`<script>window.__pwned=1;document.title="pwned"</script>`,
	`"><img src=x onerror="window.__pwned=1">`,
	`<svg onload="window.__pwned=1"></svg>`,
	`<iframe srcdoc="<script>parent.__pwned=1</script>"></iframe>`,
	`<a href="javascript:window.__pwned=1">click to approve</a>`,
	`<style>body{display:none}</style>`,
	`</code></dd></dl></section><title>pwned</title>`,
	`{{.CSRF}}`,
}

// hostileStrings are every string of fixtures/hostile/strings.json, then
// liveAttempts.
func hostileStrings(t *testing.T) []string {
	t.Helper()
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
	if len(fx.Strings) == 0 {
		t.Fatal("the fixture holds no strings")
	}
	return append(fx.Strings, liveAttempts...)
}

// shownRaw is a character that must never reach the page's text as it is:
// a control (but a newline or tab of the page's own layout), a format
// character (bidi controls, zero-width characters, the BOM, tag
// characters), a line or paragraph separator, or an invisible filler.
func shownRaw(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case unicode.IsControl(r), unicode.Is(unicode.Cf, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return true
	}
	return r == 0x3164 || r == 0x115f || r == 0x1160
}

// domState is what a page's DOM holds that a live string would change.
type domState struct {
	Title    string   `json:"title"`
	Pwned    bool     `json:"pwned"`
	Injected []string `json:"injected"` // elements the console never writes
	Tags     []string `json:"tags"`     // the elements inside what shows untrusted text
	Body     string   `json:"body"`     // the body's textContent
}

// readDOM reads domState; untrusted selects what shows strings from outside.
func (c *chrome) readDOM(untrusted string) domState {
	c.t.Helper()
	js := `(() => ({
	title: document.title,
	pwned: window.__pwned !== undefined,
	injected: Array.from(document.querySelectorAll("script, img, iframe, frame, svg, math, style, object, embed, body title, base, " +
		"a[href^='javascript' i], [onerror], [onload], [srcdoc], [style]")).map(e => e.outerHTML.slice(0, 80)),
	tags: [...new Set(Array.from(document.querySelectorAll(` + jsString(untrusted) + `)).map(e => e.tagName.toLowerCase()))],
	body: document.body.textContent
}))()`
	st, err := chromedp.Run(c.ctx, chromedp.Evaluate[domState](js))
	c.must("read the page", err)
	return st
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// inertDOM fails the test when a string made the page something more than
// text: a script ran (window.__pwned, the title), an element the console
// does not write is there, an element not of the console's templates is
// inside what shows untrusted text (allowed lists them), or a character
// that hides or reorders text reached the page raw.
func (c *chrome) inertDOM(page, title, untrusted string, allowed ...string) {
	c.t.Helper()
	st := c.readDOM(untrusted)
	if st.Pwned || st.Title != title {
		c.t.Errorf("%s: a script ran: window.__pwned %v, the title %q (want %q)", page, st.Pwned, st.Title, title)
	}
	if len(st.Injected) > 0 {
		c.t.Errorf("%s: elements from strings are on the page: %q", page, st.Injected)
	}
	for _, tag := range st.Tags {
		if !slices.Contains(allowed, tag) {
			c.t.Errorf("%s: a <%s> is inside the untrusted text (%s)", page, tag, untrusted)
		}
	}
	for _, r := range st.Body {
		if shownRaw(r) {
			c.t.Errorf("%s: the page's text holds %U raw", page, r)
			break
		}
	}
}

// runTexts are the texts of a run page a requester wrote.
type runTexts struct {
	Facts    map[string]string `json:"facts"`    // the untrusted box's facts by their label
	Evidence [][2]string       `json:"evidence"` // source, data
	Args     [][2]string       `json:"args"`     // field, as proposed
}

const readRunTexts = `(() => {
	const u = document.querySelector("section.untrusted");
	const facts = {};
	for (const dt of u.querySelectorAll("dt")) facts[dt.textContent] = dt.nextElementSibling.textContent;
	return {
		facts,
		evidence: Array.from(u.querySelectorAll("li")).map(li => [li.querySelector("strong").textContent, li.querySelector("code").textContent]),
		args: Array.from(document.querySelectorAll("table.args tbody tr")).map(tr => [tr.cells[0].textContent, tr.cells[1].textContent]),
	};
})()`

// readsBack says whether text, a string as the console shows an argument,
// reads back as JSON to exactly s.
func readsBack(text, s string) bool {
	var got string
	return json.Unmarshal([]byte(text), &got) == nil && got == s
}

// TestInABrowserHostileStrings submits a run whose arguments, evidence,
// summary and requester name carry every hostile string of the fixture
// (and strings that would be live markup), rejects another with all of them
// as the reason, and opens the inbox and both runs' pages in Chromium: no
// script ran, no element came from a string, no hiding or reordering
// character reached the page, and each string reads as the console shows
// it: an argument or evidence as a JSON string that reads back to exactly
// it, every other text with its control and format characters made visible.
func TestInABrowserHostileStrings(t *testing.T) {
	c := newChrome(t, "console-hostile-")
	h := newHarness(t, harnessOpts{})
	all := hostileStrings(t)
	args := map[string]string{}
	var ev []record.Evidence
	var names []string
	for i, s := range all {
		args[fmt.Sprintf("s%02d", i)] = s
		if strings.TrimSpace(s) != "" { // a source is required
			data, _ := json.Marshal(s)
			ev = append(ev, record.Evidence{Source: s, Data: data})
		}
		if show.LineProblem(s) == "" { // a name is one line, without controls
			names = append(names, s)
		}
	}
	rawArgs, _ := json.Marshal(args)
	summary, name, reason := strings.Join(all, " | "), strings.Join(names, " | "), strings.Join(all, " / ")
	ctx := context.Background()
	run, err := h.engine.Submit(ctx, &workflow.Proposal{Requester: record.Person{ID: bot, Name: name}, Summary: summary,
		Actions: []record.Action{{Name: "refund", Args: rawArgs}}, Evidence: ev})
	if err != nil || run.Status != record.StatusWaitingApproval {
		t.Fatalf("submit the hostile run: %v", err)
	}
	id := run.ID
	rejected := h.submit(t, bot, "refund", `{"amount":5,"order":"A-1"}`, "refund A-1")
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: rejected, Approver: record.Person{ID: lead},
		Verdict: record.VerdictReject, Reason: reason, Via: record.ViaCLI}); err != nil {
		t.Fatalf("reject with the hostile reason: %v", err)
	}

	must := c.must
	runLink := chromedp.CSS(`a[href="/ui/runs/` + id + `"]`)
	must("log in", chromedp.Do(c.ctx, chromedp.Navigate(h.srv.URL+"/ui/login"), chromedp.WaitVisible(chromedp.CSS("#member")),
		chromedp.SetValue(chromedp.CSS("#member"), lead), chromedp.Click(chromedp.CSS("main form button[type=submit]")),
		chromedp.WaitVisible(runLink)))
	c.inertDOM("the inbox", "Inbox · signoff", ".untrusted *, .untrusted.summary *")
	inboxSummary, err := chromedp.Run(c.ctx, chromedp.Evaluate[string](
		`document.querySelector('a[href="/ui/runs/`+id+`"]').closest("tr").querySelector(".summary").textContent`))
	must("read the inbox's summary", err)
	c.shot("inbox")

	must("open the hostile run", chromedp.Do(c.ctx, chromedp.Click(runLink), chromedp.WaitVisible(chromedp.CSS("section.untrusted"))))
	c.inertDOM("the hostile run", "Run "+id+" · signoff", "section.untrusted *, table.args *",
		"h2", "p", "dl", "dt", "dd", "h3", "ul", "li", "strong", "code", "thead", "tbody", "tr", "th", "td", "span")
	texts, err := chromedp.Run(c.ctx, chromedp.Evaluate[runTexts](readRunTexts))
	must("read the run's texts", err)
	c.shot("run")

	must("open the rejected run", chromedp.Do(c.ctx, chromedp.Navigate(h.srv.URL+"/ui/runs/"+rejected),
		chromedp.WaitVisible(chromedp.CSS("li span.untrusted"))))
	c.inertDOM("the rejected run", "Run "+rejected+" · signoff", "li span.untrusted *")
	shownReason, err := chromedp.Run(c.ctx, chromedp.Evaluate[string](`document.querySelector("li span.untrusted").textContent`))
	must("read the decision's reason", err)
	status, err := chromedp.Run(c.ctx, chromedp.Evaluate[string](`document.querySelector('dd[class^="status-"]').textContent`))
	must("read the run's status", err)
	c.shot("rejected")

	if want := show.Inert(summary); inboxSummary != want {
		t.Errorf("the inbox shows the summary as\n%q\nwant\n%q", inboxSummary, want)
	}
	if want := show.Inert(summary); texts.Facts["Summary"] != want {
		t.Errorf("the run page shows the summary as\n%q\nwant\n%q", texts.Facts["Summary"], want)
	}
	if want := bot + " (" + show.Inert(name) + ")"; texts.Facts["Requester"] != want {
		t.Errorf("the run page shows the requester as\n%q\nwant\n%q", texts.Facts["Requester"], want)
	}
	if len(texts.Evidence) != len(ev) {
		t.Fatalf("the run page lists %d pieces of evidence, want %d", len(texts.Evidence), len(ev))
	}
	for i, e := range ev {
		s := e.Source
		if got := texts.Evidence[i]; got[0] != show.Inert(s) || !readsBack(got[1], s) {
			t.Errorf("evidence %d shows as %q, want the source %q and data reading back to %q", i, got, show.Inert(s), s)
		}
	}
	if len(texts.Args) != len(all) {
		t.Fatalf("the arguments table has %d rows, want %d", len(texts.Args), len(all))
	}
	seen := map[string]bool{}
	for i, s := range all {
		got := texts.Args[i]
		if got[0] != fmt.Sprintf("s%02d", i) || !readsBack(got[1], s) {
			t.Errorf("argument row %d shows %q, want s%02d reading back to %q", i, got, i, s)
		}
		if seen[got[1]] {
			t.Errorf("two different strings show alike: %q", got[1])
		}
		seen[got[1]] = true
	}
	if want := show.Inert(reason); shownReason != want {
		t.Errorf("the decision's reason shows as\n%q\nwant\n%q", shownReason, want)
	}
	if want := "rejected: " + show.Inert("rejected by "+lead+": "+reason); status != want {
		t.Errorf("the rejected run's status shows as\n%q\nwant\n%q", status, want)
	}
	h.wantStatus(t, id, record.StatusWaitingApproval)
	c.reported()
}

// TestInABrowserCSRF approves a run from a form whose CSRF token was taken
// out, and from another site's form that carries the token but no session
// (the cookie is SameSite): both land on a refusal page saying why, and the
// run is still waiting, without a decision.
func TestInABrowserCSRF(t *testing.T) {
	c := newChrome(t, "console-csrf-")
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "refund", `{"amount":5,"order":"A-1"}`, "refund A-1")
	// Each refusal is answered 403, which the browser logs as an error.
	c.expected = append(c.expected, "the server responded with a status of 403")
	must := c.must
	// answered is the page's word on a post: the refusal, or the notice of
	// a decision recorded.
	const answered = "p.problem, p.notice"
	text := func(what, js string) string {
		t.Helper()
		s, err := chromedp.Run(c.ctx, chromedp.Evaluate[string](js))
		must("read "+what, err)
		return s
	}
	must("log in and open the run", chromedp.Do(c.ctx, chromedp.Navigate(h.srv.URL+"/ui/login?next=/ui/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS("#member")), chromedp.SetValue(chromedp.CSS("#member"), lead),
		chromedp.Click(chromedp.CSS("main form button[type=submit]")), chromedp.WaitVisible(chromedp.CSS("#reason"))))
	token := text("the form's token", `document.querySelector('form[action$="/decide"] input[name="csrf"]').value`)
	requestID := text("the request", `document.querySelector('input[name="request_id"]').value`)
	fingerprint := text("the fingerprint", `document.querySelector('input[name="fingerprint"]').value`)
	// DevTools is not bound by the page's policy: empty the token, then
	// approve with the keyboard.
	must("take the token out", chromedp.Do(c.ctx,
		chromedp.SetAttributeValue(chromedp.CSS(`form[action$="/decide"] input[name="csrf"]`), "value", "")))
	must("approve with the keyboard", chromedp.Do(c.ctx, chromedp.Focus(chromedp.CSS("#reason")),
		chromedp.KeyEvent("approved without a token"), chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(answered))))
	noToken := text("the refusal", `document.querySelector("`+answered+`").textContent`)
	noTokenTitle := text("the refusal's title", `document.title`)
	c.shot("no-token")

	// Another site (localhost, the console being on 127.0.0.1) posts the
	// same form with the session's own token, as if it had leaked.
	base := strings.Replace(h.srv.URL, "127.0.0.1", "localhost", 1)
	if base == h.srv.URL {
		t.Fatalf("the console's address %s is not on 127.0.0.1", h.srv.URL)
	}
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<!doctype html><form method="post" action="`+h.srv.URL+`/ui/runs/`+id+`/decide">`+
			`<input type="hidden" name="csrf" value="`+token+`"><input type="hidden" name="request_id" value="`+requestID+`">`+
			`<input type="hidden" name="fingerprint" value="`+fingerprint+`"><input type="hidden" name="reason" value="approved from elsewhere">`+
			`<button id="go" type="submit" name="verdict" value="approve">Win a prize</button></form>`)
	}))
	t.Cleanup(elsewhere.Close)
	other := strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1)
	must("post from another site", chromedp.Do(c.ctx, chromedp.Navigate(other), chromedp.Click(chromedp.CSS("#go")),
		chromedp.WaitVisible(chromedp.CSS(answered))))
	crossSite := text("the cross-site refusal", `document.querySelector("`+answered+`").textContent`)
	crossSiteTitle := text("the cross-site refusal's title", `document.title`)
	signedIn, err := chromedp.Run(c.ctx, chromedp.Evaluate[bool](`document.querySelector("header .who") !== null`))
	must("read whether a session came", err)
	c.shot("cross-site")

	for _, got := range []struct{ what, problem, title string }{
		{"the form without its token", noToken, noTokenTitle}, {"the other site's form", crossSite, crossSiteTitle}} {
		if got.title != "Forbidden · signoff" || !strings.Contains(got.problem, "security token is missing or belongs to another session") {
			t.Errorf("%s is answered %q: %q, want Forbidden and why", got.what, got.title, got.problem)
		}
	}
	if signedIn {
		t.Error("the other site's post came with the session: the refusal page shows someone signed in")
	}
	if v := h.wantStatus(t, id, record.StatusWaitingApproval); len(v.Decisions) != 0 {
		t.Errorf("decisions %+v, want none", v.Decisions)
	}
	c.reported()
}
