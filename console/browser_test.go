package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// browserEnv, set to 1, makes the browser test required: it fails instead
// of skipping when no Chromium is installed (CI sets it).
const browserEnv = "SIGNOFF_TEST_BROWSER"

// chromium finds Debian's chromium (or another Chrome) on PATH.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(browserEnv) == "1" {
		t.Fatalf("%s=1 but no chromium is on PATH (apt-get install chromium)", browserEnv)
	}
	t.Skipf("no chromium on PATH: the browser test is skipped (apt-get install chromium to run it; %s=1 makes it required)", browserEnv)
	return ""
}

// chrome is a headless Chromium for one test: its context, what it
// reported (errors, policy violations, scripts run), and screenshots kept
// in $SIGNOFF_TEST_ARTIFACTS when set.
type chrome struct {
	t        *testing.T
	ctx      context.Context
	mu       sync.Mutex
	problems []string
	expected []string // what the browser may report, as the test provokes it
	shots    string
	prefix   string // of the screenshots' names
}

func newChrome(t *testing.T, prefix string) *chrome {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 900))
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	c := &chrome{t: t, ctx: ctx, shots: os.Getenv("SIGNOFF_TEST_ARTIFACTS"), prefix: prefix}
	listen := chromedp.Listen(ctx, func(ev any) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			c.problems = append(c.problems, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if strings.HasSuffix(e.Entry.URL, "/favicon.ico") {
				return // the browser asks the site's root, which is not the console's
			}
			if e.Entry.Level == log.EntryLevelError || strings.Contains(e.Entry.Text, "Content Security Policy") {
				c.problems = append(c.problems, "log: "+e.Entry.Text)
			}
		case *runtime.EventConsoleAPICalled:
			c.problems = append(c.problems, "console."+string(e.Type)+" called: a script ran")
		}
	})
	if listen != nil {
		t.Fatalf("start the browser: %v", listen)
	}
	_, err := chromedp.Call(ctx, log.Enable, cdp.Empty{})
	c.must("enable the log", err)
	_, err = chromedp.Call(ctx, runtime.Enable, cdp.Empty{})
	c.must("enable the runtime", err)
	return c
}

func (c *chrome) must(what string, err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatalf("in the browser, %s: %v", what, err)
	}
}

// updateShotsEnv, set to 1, rewrites the screenshots docs/console.md shows
// (docsShots) from this run; never in a normal run.
const updateShotsEnv = "SIGNOFF_UPDATE_SCREENSHOTS"

// docsShots are the screenshots kept in docs, one of each page: the
// screenshot's name (PREFIX-name) and its file in docs.
var docsShots = map[string]string{
	"console-login":          "console-login.png",
	"console-inbox":          "console-inbox.png",
	"console-run":            "console-run.png",
	"console-edit":           "console-edit.png",
	"console-ops":            "console-ops.png",
	"console-stepup-refused": "console-stepup.png",
}

// shot keeps a screenshot of the page as PREFIX-name.png in
// $SIGNOFF_TEST_ARTIFACTS, and in docs when it is one of docsShots and
// SIGNOFF_UPDATE_SCREENSHOTS=1.
func (c *chrome) shot(name string) {
	c.t.Helper()
	doc := docsShots[c.prefix+name]
	update := doc != "" && os.Getenv(updateShotsEnv) == "1"
	if c.shots == "" && !update {
		return
	}
	png, err := chromedp.Run(c.ctx, chromedp.FullScreenshot(100))
	c.must("screenshot "+name, err)
	if c.shots != "" {
		c.must("keep screenshot "+name, os.WriteFile(filepath.Join(c.shots, c.prefix+name+".png"), png, 0o644))
	}
	if update {
		c.must("update docs/"+doc, os.WriteFile(filepath.Join("..", "docs", doc), png, 0o644))
	}
}

// tabTo presses Tab until js, evaluated on the page, says the focus is on
// what: the keyboard's way to a link or a field.
func (c *chrome) tabTo(what, js string) {
	c.t.Helper()
	for range 40 {
		at, err := chromedp.Run(c.ctx, chromedp.Evaluate[bool](js))
		c.must("read the focus", err)
		if at {
			return
		}
		c.must("press Tab", chromedp.Do(c.ctx, chromedp.KeyEvent(kb.Tab)))
	}
	c.t.Fatalf("40 presses of Tab never reached %s", what)
}

// reported fails the test with what the browser reported.
func (c *chrome) reported() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var left []string
	for _, p := range c.problems {
		if !slices.ContainsFunc(c.expected, func(e string) bool { return strings.Contains(p, e) }) {
			left = append(left, p)
		}
	}
	if len(left) > 0 {
		c.t.Errorf("the browser reported:\n%s", strings.Join(left, "\n"))
	}
}

// TestInABrowser drives headless Chromium through the console: log in
// locally, find the run in the inbox, open it, and approve it with the
// keyboard alone; the stylesheet applies under the Content-Security-Policy
// and the page reports no error and no policy violation.
func TestInABrowser(t *testing.T) {
	c := newChrome(t, "console-")
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "refund", `{"amount":5,"order":"A-1"}`, "<script>alert(1)</script> refund A-1")
	ticket := h.submit(t, bot, "ticket", ticketArgs, "a ticket to edit")
	// A run of each other tab: approved outside its window, stuck, forced.
	scheduled := h.submit(t, bot, "migrate", `{"table":"orders"}`, "migrate the orders table")
	if run, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: scheduled, Approver: record.Person{ID: lead},
		Verdict: record.VerdictApprove, Via: record.ViaCLI}); err != nil || run.Status != record.StatusScheduled {
		t.Fatalf("approve the migration outside its window: %v", err)
	}
	stuck := h.needsAttention(t)
	forced := h.submit(t, bot, "refund", `{"amount":7,"order":"A-2"}`, "refund A-2")
	if _, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: forced, Approver: record.Person{ID: manager},
		Verdict: record.VerdictApprove, Reason: "the customer is waiting", Via: record.ViaCLI, Force: true}); err != nil {
		t.Fatalf("break glass: %v", err)
	}
	ctx, must := c.ctx, c.must
	must("open the inbox", chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/ui/inbox"), chromedp.WaitVisible(chromedp.CSS("#member"))))
	loginURL, err := chromedp.Run(ctx, chromedp.Location())
	must("read the location", err)
	c.shot("login")
	runLink := chromedp.CSS(`a[href="/ui/runs/` + id + `"]`)
	must("log in", chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#member"), lead),
		chromedp.Click(chromedp.CSS("main form button[type=submit]"))))
	must("see the inbox", chromedp.Do(ctx, chromedp.WaitVisible(runLink)))
	display, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("header")).display`))
	must("read the header's style", err)
	c.shot("inbox")
	for _, tab := range []struct{ name, id string }{{"scheduled", scheduled}, {"attention", stuck}, {"reviews", forced}} {
		must("open the "+tab.name+" tab", chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/ui/inbox?tab="+tab.name),
			chromedp.WaitVisible(chromedp.CSS(`a[href="/ui/runs/`+tab.id+`"]`))))
		c.shot("inbox-" + tab.name)
	}
	must("back to the inbox", chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`header nav a[href="/ui/inbox"]`)), chromedp.WaitVisible(runLink)))
	must("open the run", chromedp.Do(ctx, chromedp.Click(runLink), chromedp.WaitVisible(chromedp.CSS("#reason"))))
	c.shot("run")
	// The keyboard alone: into the reason, type it, Tab to Approve, Enter.
	must("approve with the keyboard", chromedp.Do(ctx, chromedp.Focus(chromedp.CSS("#reason")),
		chromedp.KeyEvent("approved from the keyboard"), chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(".notice"))))
	notice, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".notice")))
	must("read the notice", err)
	c.shot("approved")
	// The Operations page, from the header's link.
	must("open the Operations page", chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`header nav a[href="/ui/ops"]`)),
		chromedp.WaitVisible(chromedp.CSS(`section[aria-label="Outbox"]`))))
	opsTitle, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main h1")))
	must("read the Operations page's title", err)
	c.shot("ops")
	// Edit a run's arguments from its schema's form and approve them.
	must("open the run to edit", chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/ui/runs/"+ticket),
		chromedp.WaitVisible(chromedp.CSS(`input[name="arg.priority"]`))))
	c.shot("edit")
	must("edit and approve", chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`input[name="arg.priority"]`), "4"),
		chromedp.SetValue(chromedp.CSS(`select[name="arg.queue"]`), `"shipping"`),
		chromedp.Click(chromedp.CSS(`form[aria-label="Edit ticket"] button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(".notice"))))
	edited, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".notice")))
	must("read the notice after the edit", err)
	if !strings.Contains(loginURL, "/ui/login?next=") {
		t.Errorf("the inbox without a login went to %s, want the login page", loginURL)
	}
	if display != "flex" {
		t.Errorf("the header's display is %q: the stylesheet did not apply under the Content-Security-Policy", display)
	}
	if notice != "Your approval was recorded." {
		t.Errorf("the notice after approving says %q", notice)
	}
	if opsTitle != "Operations" {
		t.Errorf("the Operations page's title is %q", opsTitle)
	}
	if edited != "Your edit and approval were recorded." {
		t.Errorf("the notice after the edit says %q", edited)
	}
	if tv := h.wantStatus(t, ticket, record.StatusExecuting); !strings.Contains(string(tv.Actions[0].Args), `"priority":4`) ||
		!strings.Contains(string(tv.Actions[0].Args), `"queue":"shipping"`) {
		t.Errorf("the ticket runs with %s, want the edit", tv.Actions[0].Args)
	}
	v := h.wantStatus(t, id, record.StatusExecuting)
	if len(v.Decisions) != 1 || v.Decisions[0].Reason != "approved from the keyboard" || v.Decisions[0].Via != record.ViaWeb {
		t.Errorf("decisions %+v, want the keyboard's approval via web", v.Decisions)
	}
	c.reported()
}

// TestInABrowserWithOIDC follows a link from another site (as from a
// Slack message) to the console, logs in through a test identity provider
// of that other site (the page and the provider on 127.0.0.1, the console
// on localhost, so the way back is a cross-site redirect), sees the inbox,
// and, with Tab and Enter alone, opens the run and approves it.
func TestInABrowserWithOIDC(t *testing.T) {
	c := newChrome(t, "console-oidc-")
	h, p := oidcHarness(t, nil, false)
	id := h.submit(t, bot, "refund", `{"amount":5,"order":"A-1"}`, "refund A-1")
	p.m.QueueUser(person("sub-ana", "ana@corp.example", true))
	base := strings.Replace(h.srv.URL, "127.0.0.1", "localhost", 1)
	ctx, must := c.ctx, c.must
	runLink := `a[href="/ui/runs/` + id + `"]`
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<!doctype html><a id="go" href="`+base+`/ui/inbox">the waiting runs</a>`)
	}))
	t.Cleanup(elsewhere.Close)
	must("log in through the provider", chromedp.Do(ctx, chromedp.Navigate(elsewhere.URL), chromedp.Click(chromedp.CSS("#go")),
		chromedp.WaitVisible(chromedp.CSS(runLink))))
	where, err := chromedp.Run(ctx, chromedp.Location())
	must("read the location", err)
	who, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("header .who span")))
	must("read who is signed in", err)
	c.shot("inbox")
	// Tab until the run's link has the focus, Enter; then Tab until the
	// reason has it, type, Tab to Approve, Enter.
	tabTo := c.tabTo
	tabTo("the run's link", `document.activeElement.matches('`+runLink+`')`)
	must("open the run with Enter", chromedp.Do(ctx, chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS("#reason"))))
	c.shot("run")
	tabTo("the reason", `document.activeElement.id === "reason"`)
	must("approve with the keyboard", chromedp.Do(ctx, chromedp.KeyEvent("approved after an OIDC login"), chromedp.KeyEvent(kb.Tab),
		chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS(".notice"))))
	c.shot("approved")
	if !strings.HasPrefix(where, base+"/ui/inbox") {
		t.Errorf("after the login the browser is at %s, want the inbox", where)
	}
	if !strings.Contains(who, lead+" · team_lead · oidc login") {
		t.Errorf("the header says %q, want the lead signed in through oidc", who)
	}
	v := h.wantStatus(t, id, record.StatusExecuting)
	if len(v.Decisions) != 1 || v.Decisions[0].By != lead || v.Decisions[0].Reason != "approved after an OIDC login" {
		t.Errorf("decisions %+v, want the lead's approval", v.Decisions)
	}
	c.reported()
}

// TestInABrowserStepUp approves a run of a step-up rule (payouts: a sign-in
// within 5 minutes) end to end, with the keyboard alone, through the test
// identity provider: the lead's approval in Slack waits on the run's page
// for its confirmation; once their sign-in is older than the rule allows,
// approving on the page is refused in words with a link to sign in again;
// that link asks the provider for a fresh login, whose token says it was
// just now; approving again counts, and the audit has both the Slack
// approval left unconfirmed and the web decision.
func TestInABrowserStepUp(t *testing.T) {
	c := newChrome(t, "console-stepup-")
	h, p := oidcHarness(t, nil, false)
	id := h.submit(t, bot, "payout", `{"amount":500}`, "pay out 500")
	_, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: id, Approver: record.Person{ID: lead},
		Verdict: record.VerdictApprove, Reason: "ok from Slack", Via: record.ViaSlack})
	if !record.IsRefused(err, record.CodeConfirmOnWeb) {
		t.Fatalf("the Slack approval of a step-up rule: %v, want it recorded unconfirmed", err)
	}
	for range 2 { // the first login, and the fresh one
		ana := person("sub-ana", "ana@corp.example", true)
		ana.authNow = true
		p.m.QueueUser(ana)
	}
	ctx, must := c.ctx, c.must
	text := func(what, sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		must("read "+what, err)
		return s
	}
	must("open the run, logging in", chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/ui/runs/"+id), chromedp.WaitVisible(chromedp.CSS("#reason"))))
	waiting := text("the confirmations waiting", "ul.unconfirmed")
	c.shot("run")
	h.clock.Advance(6 * time.Minute) // the sign-in is now older than the rule's 5 minutes
	c.tabTo("the reason", `document.activeElement.id === "reason"`)
	must("approve with the keyboard", chromedp.Do(ctx, chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("p.problem"))))
	refusal := text("the refusal", "p.problem")
	// The refusal is answered 403, which the browser logs as an error.
	c.expected = append(c.expected, "the server responded with a status of 403")
	c.shot("refused")
	again := `a[href^="/ui/login?"]`
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('`+again+`').getAttribute("href")`))
	must("read the link to sign in again", err)
	c.tabTo("the link to sign in again", `document.activeElement.matches('`+again+`')`)
	must("sign in again with Enter", chromedp.Do(ctx, chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS("#reason"))))
	c.tabTo("the reason", `document.activeElement.id === "reason"`)
	must("approve again with the keyboard", chromedp.Do(ctx, chromedp.KeyEvent("confirmed after a fresh sign-in"), chromedp.KeyEvent(kb.Tab),
		chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS(".notice"))))
	notice := text("the notice", ".notice")
	audit, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("table.timeline tbody tr")).map(r => r.cells[2].innerText + " " + r.cells[3].innerText + " " + r.cells[4].innerText)`))
	must("read the audit", err)
	c.shot("confirmed")

	if !strings.Contains(waiting, lead+" (team_lead) approved via slack") {
		t.Errorf("the run page lists %q as waiting for confirmation, want the lead's Slack approval", waiting)
	}
	if !strings.Contains(refusal, "sign in again to confirm: your sign-in is older than 5m") {
		t.Errorf("the stale sign-in's approval is refused with %q", refusal)
	}
	if want := "/ui/login?max_age=300&next=%2Fui%2Fruns%2F" + id + "&prompt=login"; href != want {
		t.Errorf("the link to sign in again is %q, want %q", href, want)
	}
	if notice != "Your approval was recorded." {
		t.Errorf("the notice after the fresh sign-in says %q", notice)
	}
	v := h.wantStatus(t, id, record.StatusExecuting)
	if len(v.Decisions) != 1 || v.Decisions[0].By != lead || v.Decisions[0].Via != record.ViaWeb ||
		v.Decisions[0].Reason != "confirmed after a fresh sign-in" || len(v.Unconfirmed) != 0 {
		t.Errorf("decisions %+v, unconfirmed %+v: want the lead's approval via web and none waiting", v.Decisions, v.Unconfirmed)
	}
	joined := strings.Join(audit, "\n")
	for _, want := range []string{lead + " approval_unconfirmed", lead + " decided"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the run page's audit lacks %q:\n%s", want, joined)
		}
	}
	if !regexp.MustCompile(lead + ` decided .*"via":"web"`).MatchString(joined) {
		t.Errorf("the run page's audit has no decision via web:\n%s", joined)
	}
	c.reported()
}
