package bot

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/workflow"
)

func TestRunsPending(t *testing.T) {
	h := newSlackHarness(t)
	var ids []string
	for i := range 12 {
		name := "refund-double-charge"
		if i%3 == 2 {
			name = "reship-planter"
		}
		ids = append(ids, h.submit(name, "").ID)
		h.clock.Advance(10 * time.Minute)
	}
	for _, tc := range []struct {
		text     string
		want     []string
		dontWant []string
	}{
		{"pending", append([]string{"Waiting for approval (page 1)", "More: `/runs pending 2`", "request_refund", "reship_item, create_return_label",
			"asked by `Resolver agent` (`agent:resolver`)", "2h ago", "deadline <!date^"}, ids[:10]...), ids[10:]},
		{"pending 2", append([]string{"Waiting for approval (page 2)"}, ids[10:]...), append([]string{"More:"}, ids[:10]...)},
		{"PENDING   2", []string{"(page 2)"}, nil},
		{"pending 3", []string{"There is no page 3"}, nil},
		{"pending two", []string{"The page is a number from 1 to 50"}, nil},
		{"pending 51", []string{"The page is a number from 1 to 50"}, nil},
	} {
		t.Run(tc.text, func(t *testing.T) {
			status, r := h.runsCommand(leadGrace, tc.text)
			if status != http.StatusOK || r.ResponseType != "ephemeral" {
				t.Fatalf("status %d, response_type %q", status, r.ResponseType)
			}
			got := replyText(r)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("reply lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.dontWant {
				if strings.Contains(got, w) {
					t.Errorf("reply has %q:\n%s", w, got)
				}
			}
		})
	}
	// Someone without a role sees nothing.
	_, r := h.runsCommand(nobody, "pending")
	if got := replyText(r); !strings.Contains(got, "You hold no signoff role") || strings.Contains(got, ids[0]) {
		t.Fatalf("no role: %s", got)
	}
}

// TestRenamedCommand: under the name slack.command gives, the command is
// answered, and its help and hints name it; a command of another name (the
// app and the config disagree) is told which one this server answers.
func TestRenamedCommand(t *testing.T) {
	h := newSlackHarness(t, func(c *ServerConfig) { c.Command = "/approvals" })
	for range pendingPageSize + 1 {
		h.submit("refund-double-charge", "")
	}
	for _, tc := range []struct {
		command, text string
		want          []string
	}{
		{"/approvals", "", []string{"*/approvals* lists and manages runs", "`/approvals pending [page]`", "`/approvals extend RUN_ID 24h`"}},
		{"/approvals", "pending", []string{"Waiting for approval (page 1)", "More: `/approvals pending 2`"}},
		{"/approvals", "reassign run_x nobody", []string{"`/approvals reassign RUN_ID @person`"}},
		{"/approvals", "frobnicate", []string{"Unknown subcommand", "`/approvals show RUN_ID`"}},
		{"/runs", "pending", []string{"This signoff answers `/approvals` (its slack.command), not `/runs`"}},
	} {
		t.Run(tc.command+" "+tc.text, func(t *testing.T) {
			status, r := h.slashCommand(leadGrace, tc.command, tc.text)
			if status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			got := replyText(r)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("reply lacks %q:\n%s", w, got)
				}
			}
			if tc.command == "/approvals" && strings.Contains(got, "/runs") {
				t.Errorf("the reply names /runs:\n%s", got)
			}
		})
	}
	if _, r := h.slashCommand(leadGrace, "/runs", "pending"); strings.Contains(replyText(r), "Waiting for approval") {
		t.Error("a command of another name was answered as if it were ours")
	}
}

func TestRunsPendingEmpty(t *testing.T) {
	h := newSlackHarness(t)
	if _, r := h.runsCommand(leadGrace, "pending"); !strings.Contains(r.Text, "Nothing is waiting for approval") {
		t.Fatalf("reply %q", r.Text)
	}
}

func TestRunsShow(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	_, r := h.runsCommand(manager, "show "+v.ID)
	got := replyText(r)
	for _, w := range []string{"Approval needed: request_refund", v.ID, policy.ShortFingerprint(v.Fingerprint), "large-refund", "LK-507862"} {
		if !strings.Contains(got, w) {
			t.Errorf("show lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, ActionApprove) {
		t.Errorf("show has buttons: an ephemeral copy cannot be rewritten after a decision")
	}
	if _, r := h.runsCommand(manager, "show run_00000000000000000000dead"); !strings.Contains(r.Text, "there is no run") {
		t.Errorf("unknown run: %q", r.Text)
	}
	if _, r := h.runsCommand(nobody, "show "+v.ID); strings.Contains(replyText(r), "LK-507862") {
		t.Errorf("someone without a role saw the run")
	}
	if _, r := h.runsCommand(manager, "show"); !strings.Contains(r.Text, "Not enough arguments") {
		t.Errorf("show without an id: %q", r.Text)
	}
}

func TestRunsManage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		user   string
		text   string // %s is the run id
		want   string
		change func(t *testing.T, before, after *workflow.RunView)
	}{
		{"cancel", leadGrace, "cancel %s customer &lt;withdrew&gt; the complaint", "Cancelled run", func(t *testing.T, b, a *workflow.RunView) {
			if a.Status != record.StatusCancelled || a.Reason != "cancelled by U0LEAD0001: customer <withdrew> the complaint" {
				t.Errorf("after cancel: %s %q", a.Status, a.Reason)
			}
		}},
		{"cancel without a reason", leadGrace, "cancel %s", "Not enough arguments", nil},
		{"cancel without the role", nobody, "cancel %s because", "Nothing changed: only the requester or someone with role team_lead", nil},
		{"reassign", leadGrace, "reassign %s <@U0LEAD0002|omar>", "is now assigned to <@U0LEAD0002>", func(t *testing.T, b, a *workflow.RunView) {
			if a.Gate.Assignee != leadOmar || a.Status != record.StatusWaitingApproval {
				t.Errorf("after reassign: assignee %q, %s", a.Gate.Assignee, a.Status)
			}
		}},
		{"reassign by bare id", manager, "reassign %s U0LEAD0002", "is now assigned to <@U0LEAD0002>", func(t *testing.T, b, a *workflow.RunView) {
			if a.Gate.Assignee != leadOmar {
				t.Errorf("assignee %q", a.Gate.Assignee)
			}
		}},
		{"reassign to someone who cannot approve", leadGrace, "reassign %s <@U0NOBODY01>", "Nothing changed: U0NOBODY01 cannot approve this", nil},
		{"reassign by name only", leadGrace, "reassign %s @omar", "Mention the person", nil},
		{"reassign without the role", nobody, "reassign %s <@U0LEAD0002>", "Nothing changed: only the requester or someone with role team_lead", nil},
		{"extend", leadGrace, "extend %s 24h", "The deadline of run", func(t *testing.T, b, a *workflow.RunView) {
			if !a.Deadline.Equal(b.Deadline.Add(24 * time.Hour)) {
				t.Errorf("deadline %v, want %v", a.Deadline, b.Deadline.Add(24*time.Hour))
			}
		}},
		{"extend in days", leadGrace, "extend %s 2d", "The deadline of run", func(t *testing.T, b, a *workflow.RunView) {
			if !a.Deadline.Equal(b.Deadline.Add(48 * time.Hour)) {
				t.Errorf("deadline %v", a.Deadline)
			}
		}},
		{"extend by nonsense", leadGrace, "extend %s soon", "Say how long", nil},
		{"extend too far", leadGrace, "extend %s 100d", "Nothing changed: extend needs", nil},
		{"extend without the role", nobody, "extend %s 1h", "Nothing changed: only someone with role team_lead", nil},
		{"unknown run", leadGrace, "cancel run_00000000000000000000dead because %s", "there is no run", nil},
		{"help", leadGrace, "", "lists and manages runs waiting for approval", nil},
		{"help by name", leadGrace, "help", "lists and manages runs waiting for approval", nil},
		{"unknown subcommand", leadGrace, "frobnicate %s", "Unknown subcommand `frobnicate`.", nil},
		{"unknown subcommand, with the help", leadGrace, "approve %s", "lists and manages runs waiting for approval", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSlackHarness(t)
			v := h.submit("refund-double-charge", "")
			before := h.snapshot(v.ID)
			text := strings.Replace(tc.text, "%s", v.ID, 1)
			status, r := h.runsCommand(tc.user, text)
			if status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			if got := replyText(r); !strings.Contains(got, tc.want) {
				t.Fatalf("reply %q, want %q", r.Text, tc.want)
			}
			if tc.change == nil {
				if h.snapshot(v.ID) != before {
					t.Fatal("a refused command changed the run")
				}
				return
			}
			tc.change(t, v, h.get(v.ID))
		})
	}
}

func TestCommandRequests(t *testing.T) {
	h := newSlackHarness(t)
	form := func(name string) []byte {
		return fixture(t, name, Ref{}, leadGrace, map[string]string{"TEXT": "pending"})
	}
	for _, tc := range []struct {
		name   string
		body   []byte
		sign   bool
		status int
	}{
		{"ours", form("slash_runs.form"), true, http.StatusOK},
		{"org-level install", form("slash_runs_org_level.form"), true, http.StatusOK},
		{"another organisation", form("slash_runs_foreign_org.form"), true, http.StatusForbidden},
		{"unsigned", form("slash_runs.form"), false, http.StatusUnauthorized},
		{"user given twice", append(form("slash_runs.form"), "&user_id=U0MGR00001"...), true, http.StatusBadRequest},
		{"bad escape", []byte("command=%2Fruns&text=%zz"), true, http.StatusBadRequest},
		{"no command", []byte("user_id=U0LEAD0001&api_app_id=A0SIGNOFF1&team_id=T0SHOP0001"), true, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
			if tc.sign {
				hdr = signed(hSecret, h.clock.Now().Unix(), tc.body)
			}
			if status, body := h.post("/slack/commands", tc.body, hdr); status != tc.status {
				t.Fatalf("status %d %s, want %d", status, body, tc.status)
			}
		})
	}
}

func TestParseMention(t *testing.T) {
	for in, want := range map[string]record.Person{
		"<@U0LEAD0002|omar>": {ID: "U0LEAD0002", Name: "omar"},
		"<@W0LEAD0002>":      {ID: "W0LEAD0002"},
		"U0LEAD0002":         {ID: "U0LEAD0002"},
		"@omar":              {},
		"<#C0APPROVALS|x>":   {},
		"<@U0LEAD0002":       {},
		"<!here>":            {},
	} {
		got, ok := parseMention(in)
		if got != want || ok != (want.ID != "") {
			t.Errorf("parseMention(%q) = %+v %v, want %+v", in, got, ok, want)
		}
	}
}

func TestParseExtension(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"24h": 24 * time.Hour, "90m": 90 * time.Minute, "2d": 48 * time.Hour, "1d12h": 36 * time.Hour, "1h30m": 90 * time.Minute,
	} {
		if got, err := ParseExtension(in); err != nil || got != want {
			t.Errorf("ParseExtension(%q) = %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "soon", "d", "2dd", "1000d", "-"} {
		if _, err := ParseExtension(bad); err == nil {
			t.Errorf("ParseExtension(%q) accepted", bad)
		}
	}
}

func TestRestAfter(t *testing.T) {
	for _, tc := range []struct {
		text string
		n    int
		want string
	}{
		{"cancel run_1 the customer  called back", 2, "the customer  called back"},
		{"  cancel   run_1\tsaid so ", 2, "said so"},
		{"cancel run_1", 2, ""},
	} {
		if got := restAfter(tc.text, tc.n); got != tc.want {
			t.Errorf("restAfter(%q, %d) = %q, want %q", tc.text, tc.n, got, tc.want)
		}
	}
}

// TestRunsResolve: /runs resolve says what became of a run that needs
// attention, as the person found at the target; the engine checks the role
// (the highest by default), and a refusal changes nothing.
func TestRunsResolve(t *testing.T) {
	h := newSlackHarness(t)
	v := h.submit("refund-double-charge", "")
	// The duplicate charge is refunded by hand while the run waits, so the
	// shop refuses the approved refund and the run needs a person.
	if _, err := h.shop.Refund(h.ctx, "by-hand-1", "U0CLERK001", demo.RefundRequest{OrderID: "LK-507862", PaymentID: "PAY-507862-2",
		Amount: 119, Currency: "CAD", ReasonCode: "RFD-DOUBLE"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Decide(h.ctx, workflow.DecideInput{RunID: v.ID, Approver: record.Person{ID: leadGrace}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	if run, err := h.eng.Resume(h.ctx, v.ID); err != nil || run.Status != record.StatusNeedsAttention {
		t.Fatalf("after the refund by hand: %+v, %v; want needs_attention", run, err)
	}
	for _, tc := range []struct {
		name, user, text, want string
	}{
		{"no choice", manager, "resolve %s", "Not enough arguments"},
		{"an unknown choice", manager, "resolve %s maybe it did", "Say what became of it: `/runs resolve RUN_ID happened|retry|abandon reason…`"},
		{"without the role", leadGrace, "resolve %s abandon refunded by hand", "Nothing changed: only someone with role manager or above may resolve"},
		{"without a reason", manager, "resolve %s abandon", "Not enough arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.snapshot(v.ID)
			_, r := h.runsCommand(tc.user, strings.ReplaceAll(tc.text, "%s", v.ID))
			if got := replyText(r); !strings.Contains(got, tc.want) {
				t.Errorf("reply lacks %q:\n%s", tc.want, got)
			}
			if after := h.snapshot(v.ID); after != before {
				t.Errorf("a refused resolve changed the run")
			}
		})
	}
	_, r := h.runsCommand(manager, "resolve "+v.ID+" abandon the shop shows a refund by hand")
	if got := replyText(r); !strings.Contains(got, "it did not happen, and the run is abandoned") || !strings.Contains(got, "`failed`") {
		t.Fatalf("reply: %s", got)
	}
	after := h.get(v.ID)
	if after.Status != record.StatusFailed || len(after.Resolutions) != 1 || after.Resolutions[0].Via != "slack" || after.Resolutions[0].By != manager {
		t.Fatalf("status %s, resolutions %+v", after.Status, after.Resolutions)
	}
	if msg := replyText(commandReply{Blocks: RenderRun(after, RenderContext{Roles: h.eng.Roles(), Redact: Redactor(h.eng), Now: h.clock.Now()})}); !strings.Contains(msg, ":wrench: *Resolved* by <@"+manager+">") {
		t.Errorf("the message does not show the resolution:\n%s", msg)
	}
	_, r = h.runsCommand(manager, "resolve "+v.ID+" retry try again")
	if got := replyText(r); !strings.Contains(got, "only a run that needs attention can be resolved") {
		t.Errorf("resolving a failed run: %s", got)
	}
}

// TestRunsPendingHidesRedactedValues: the pending list shows a run's summary,
// with what a redact: field holds hidden there too.
func TestRunsPendingHidesRedactedValues(t *testing.T) {
	h := newSlackHarness(t)
	spec, ok := h.eng.Action("request_refund")
	if !ok {
		t.Fatal("no request_refund")
	}
	spec.Redact = []string{"payment_id"}
	h.submit("refund-double-charge", "")
	_, r := h.runsCommand(leadGrace, "pending")
	if got := replyText(r); strings.Contains(got, "PAY-507862-2") || !strings.Contains(got, "Refund the duplicate charge [redacted] in full.") {
		t.Errorf("the pending list shows the payment id:\n%s", got)
	}
}
