package console_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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

// TestInABrowser drives headless Chromium through the console: log in
// locally, find the run in the inbox, open it, and approve it with the
// keyboard alone; the stylesheet applies under the Content-Security-Policy
// and the page reports no error and no policy violation.
func TestInABrowser(t *testing.T) {
	path := chromium(t)
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "refund", `{"amount":5,"order":"A-1"}`, "<script>alert(1)</script> refund A-1")
	ticket := h.submit(t, bot, "ticket", ticketArgs, "a ticket to edit")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 900))
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var problems []string
	listen := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if strings.HasSuffix(e.Entry.URL, "/favicon.ico") {
				return // the browser asks the site's root, which is not the console's
			}
			if e.Entry.Level == log.EntryLevelError || strings.Contains(e.Entry.Text, "Content Security Policy") {
				problems = append(problems, "log: "+e.Entry.Text)
			}
		case *runtime.EventConsoleAPICalled:
			problems = append(problems, "console."+string(e.Type)+" called: a script ran")
		}
	})
	if listen != nil {
		t.Fatalf("start the browser: %v", listen)
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("in the browser, %s: %v", what, err)
		}
	}
	shots := os.Getenv("SIGNOFF_TEST_ARTIFACTS")
	shot := func(name string) {
		t.Helper()
		if shots == "" {
			return
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		must("screenshot "+name, err)
		must("keep screenshot "+name, os.WriteFile(filepath.Join(shots, "console-"+name+".png"), png, 0o644))
	}
	_, err := chromedp.Call(ctx, log.Enable, cdp.Empty{})
	must("enable the log", err)
	_, err = chromedp.Call(ctx, runtime.Enable, cdp.Empty{})
	must("enable the runtime", err)
	must("open the inbox", chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/ui/inbox"), chromedp.WaitVisible(chromedp.CSS("#member"))))
	loginURL, err := chromedp.Run(ctx, chromedp.Location())
	must("read the location", err)
	shot("login")
	runLink := chromedp.CSS(`a[href="/ui/runs/` + id + `"]`)
	must("log in", chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#member"), lead),
		chromedp.Click(chromedp.CSS("main form button[type=submit]"))))
	must("see the inbox", chromedp.Do(ctx, chromedp.WaitVisible(runLink)))
	display, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("header")).display`))
	must("read the header's style", err)
	shot("inbox")
	must("open the run", chromedp.Do(ctx, chromedp.Click(runLink), chromedp.WaitVisible(chromedp.CSS("#reason"))))
	shot("run")
	// The keyboard alone: into the reason, type it, Tab to Approve, Enter.
	must("approve with the keyboard", chromedp.Do(ctx, chromedp.Focus(chromedp.CSS("#reason")),
		chromedp.KeyEvent("approved from the keyboard"), chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(".notice"))))
	notice, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".notice")))
	must("read the notice", err)
	shot("approved")
	// The Operations page, from the header's link.
	must("open the Operations page", chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`header nav a[href="/ui/ops"]`)),
		chromedp.WaitVisible(chromedp.CSS(`section[aria-label="Outbox"]`))))
	opsTitle, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main h1")))
	must("read the Operations page's title", err)
	shot("ops")
	// Edit a run's arguments from its schema's form and approve them.
	must("open the run to edit", chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/ui/runs/"+ticket),
		chromedp.WaitVisible(chromedp.CSS(`input[name="arg.priority"]`))))
	shot("edit")
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
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("the browser reported:\n%s", strings.Join(problems, "\n"))
	}
}
