package app

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemoServesTheConsole: `signoff demo --ui` tells the story, then serves
// its runs in the console with the local login on the address it prints,
// where a team lead finds the planter run waiting and approves it; an
// interrupt stops it cleanly.
func TestDemoServesTheConsole(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, errb := &lockedBuffer{}, &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--ui", "--ui-addr", "127.0.0.1:0"}, noEnv, strings.NewReader(""), out, errb)
	}()
	url := regexp.MustCompile(`open (http://127\.0\.0\.1:\d+)/ui/ and log in as U0LEAD0001`)
	var base string
	deadline := time.After(2 * time.Minute)
	for base == "" {
		select {
		case code := <-done:
			t.Fatalf("demo --ui ended (exit %d) before serving:\n%s\n%s", code, out.String(), errb.String())
		case <-deadline:
			t.Fatalf("demo --ui printed no console URL:\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
			if m := url.FindStringSubmatch(out.String()); m != nil {
				base = m[1]
			}
		}
	}
	ui := newUIClient(t, base)
	ui.login("U0LEAD0001")
	_, inbox := ui.do("GET", "/ui/inbox", nil)
	m := regexp.MustCompile(`href="/ui/runs/(run_[0-9a-f]+)"`).FindStringSubmatch(inbox)
	if m == nil || !strings.Contains(inbox, "reship_item") || !strings.Contains(inbox, "yours to decide") {
		t.Fatalf("the demo's inbox does not offer the planter run to U0LEAD0001:\n%s", inbox)
	}
	if code, body := ui.approve(m[1]); code != http.StatusSeeOther {
		t.Fatalf("approve: %d\n%s", code, body)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("demo --ui exit %d after an interrupt:\n%s", code, errb.String())
	}
}
