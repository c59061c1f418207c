package console_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

func TestOperationsPage(t *testing.T) {
	h := newHarness(t, harnessOpts{consoleCfg: func(c *consoleConfig) {
		c.Ready = func(context.Context) error {
			return errors.New("workers stopped: 3 of 4 running (outbox: \u202ehalted)")
		}
		c.Anchor = func() (workflow.Anchor, bool) { return workflow.Anchor{Seq: 7, Hash: "abc123"}, true }
		c.Setup = []string{"roles (lowest first):", "  team_lead  U0LEAD, U0LEAD2"}
	}})
	id := h.submit(t, bot, "refund", `{"amount":5}`, "")
	ob := h.engine.Outbox()
	m := &record.OutboxMessage{RunID: id, Kind: record.OutboxKind("slack.post"), Payload: []byte(`{}`), NextAttempt: h.clock.Now(), CreatedAt: h.clock.Now()}
	if _, err := ob.Queue(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if err := ob.Retry(context.Background(), m, h.clock.Now().Add(60e9), "<b>channel_not_found</b> \u202e"+strings.Repeat("x", 500)); err != nil {
		t.Fatal(err)
	}
	b := h.browser(t)
	if p := b.get("/ui/ops"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/ui/login") {
		t.Fatalf("GET /ui/ops without a login: %d to %q", p.status, p.header.Get("Location"))
	}
	b.login(lead)
	p := b.get("/ui/ops")
	if p.status != http.StatusOK {
		t.Fatalf("GET /ui/ops: %d\n%s", p.status, p.body)
	}
	for _, want := range []string{"Not ready: workers stopped: 3 of 4 running (outbox: \\u202ehalted)", "slack.post",
		`href="/ui/runs/` + id + `"`, "&lt;b&gt;channel_not_found&lt;/b&gt; \\u202exxx", "xxx…", "A7:abc123", "  team_lead  U0LEAD, U0LEAD2"} {
		if !strings.Contains(p.body, want) {
			t.Fatalf("the Operations page lacks %q:\n%s", want, p.body)
		}
	}
	if strings.Contains(p.body, "\u202e") || strings.Contains(p.body, strings.Repeat("x", 301)) {
		t.Fatalf("the Operations page shows an error raw or whole:\n%s", p.body)
	}
	// A host that says nothing gets a page that says so.
	bare := newHarness(t, harnessOpts{})
	b = bare.browser(t)
	b.login(lead)
	p = b.get("/ui/ops")
	for _, want := range []string{"does not say how its loops are", "Nothing waits to be delivered.", "No anchor published yet", "does not say its config"} {
		if !strings.Contains(p.body, want) {
			t.Fatalf("the bare Operations page lacks %q:\n%s", want, p.body)
		}
	}
}
