package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// ticketArgs are the arguments a ticket is proposed with.
const ticketArgs = `{"title":"Refund A-1","priority":2,"cost":1.5,"urgent":false,"queue":"billing","tags":["a"],"secret":"s3cr3t-value"}`

// editForm reads the edit form of action 0 on run id's page: the
// request, fingerprint and each field's value as the page fills them.
func (b *browser) editForm(id string) url.Values {
	b.t.Helper()
	run := b.get("/ui/runs/" + id)
	i := strings.Index(run.body, `action="/ui/runs/`+id+`/edit"`)
	if i < 0 {
		b.t.Fatalf("the page of run %s has no edit form:\n%s", id, run.body)
	}
	form := run.body[i:]
	form = form[:strings.Index(form, "</form>")]
	v := url.Values{}
	for _, m := range regexp.MustCompile(`<input (?:id="[^"]*" )?(?:type="hidden" )?name="([^"]+)" value="([^"]*)"`).FindAllStringSubmatch(form, -1) {
		v.Set(m[1], unescape(m[2]))
	}
	for _, m := range regexp.MustCompile(`(?s)<textarea id="[^"]*" name="(arg\.[^"]+)" rows="3">(.*?)</textarea>`).FindAllStringSubmatch(form, -1) {
		v.Set(m[1], unescape(m[2]))
	}
	for _, m := range regexp.MustCompile(`(?s)<select id="[^"]*" name="([^"]+)">(.*?)</select>`).FindAllStringSubmatch(form, -1) {
		if s := regexp.MustCompile(`<option value="([^"]*)" selected>`).FindStringSubmatch(m[2]); s != nil {
			v.Set(m[1], unescape(s[1]))
		}
	}
	v.Del("csrf")
	return v
}

func unescape(s string) string {
	return strings.NewReplacer("&#34;", `"`, "&quot;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}

func TestEditFormFromTheSchema(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "ticket", ticketArgs, "a ticket")
	b := h.browser(t)
	b.login(lead)
	run := b.get("/ui/runs/" + id)
	for _, want := range []string{
		`name="arg.title" value="Refund A-1"`, `name="arg.priority" value="2" inputmode="decimal"`,
		`<option value="false" selected>false</option>`, `<option value="&#34;billing&#34;" selected>`,
		`name="arg.tags" rows="3">[&#34;a&#34;]</textarea>`, "hidden from people; kept as proposed",
	} {
		if !strings.Contains(run.body, want) {
			t.Fatalf("the edit form lacks %s:\n%s", want, run.body)
		}
	}
	if strings.Contains(run.body, "s3cr3t-value") {
		t.Fatal("the run page shows a redacted argument")
	}
	// A rule without edit offers no form.
	if p := b.get("/ui/runs/" + h.submit(t, bot, "refund", `{"amount":5}`, "")); strings.Contains(p.body, "/edit\"") {
		t.Fatalf("a rule without edit offers an edit form:\n%s", p.body)
	}
}

func TestEditThroughThePage(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "ticket", ticketArgs, "a ticket")
	b := h.browser(t)
	b.login(lead)
	form := b.editForm(id)
	form.Set("arg.priority", "4")
	form.Set("arg.queue", `"shipping"`)
	form.Set("arg.cost", "")
	form.Set("reason", "more urgent than proposed")
	p := b.post("/ui/runs/"+id+"/edit", form)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/runs/"+id+"?done=edit" {
		t.Fatalf("edit: %d to %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	v := h.wantStatus(t, id, record.StatusExecuting)
	var got map[string]any
	if err := json.Unmarshal(v.Actions[0].Args, &got); err != nil {
		t.Fatal(err)
	}
	if got["priority"] != 4.0 || got["queue"] != "shipping" || got["secret"] != "s3cr3t-value" || got["title"] != "Refund A-1" {
		t.Fatalf("the edited arguments are %s", v.Actions[0].Args)
	}
	if _, ok := got["cost"]; ok {
		t.Fatalf("an emptied field is kept: %s", v.Actions[0].Args)
	}
	if len(v.Decisions) == 0 || v.Decisions[0].Via != record.ViaWeb || len(v.Decisions[0].Edited) == 0 {
		t.Fatalf("decisions %+v, want the edit via web first", v.Decisions)
	}
	if p := b.get("/ui/runs/" + id + "?done=edit"); !strings.Contains(p.body, "Your edit and approval were recorded.") || p.status != http.StatusOK {
		t.Fatalf("after the edit: %d\n%s", p.status, p.body)
	}
}

func TestEditRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		as     string
		change func(url.Values)
		status int
		words  string
	}{
		{"not a number", lead, func(f url.Values) { f.Set("arg.priority", "four") }, http.StatusBadRequest, "priority: &#34;four&#34; is not a number"},
		{"out of the schema", lead, func(f url.Values) { f.Set("arg.priority", "9") }, http.StatusBadRequest, "priority"},
		{"not a choice", lead, func(f url.Values) { f.Set("arg.queue", `"elsewhere"`) }, http.StatusBadRequest, "not one of the choices offered"},
		{"bad JSON", lead, func(f url.Values) { f.Set("arg.tags", "[1,") }, http.StatusBadRequest, "tags: not valid JSON"},
		{"nothing changed", lead, func(url.Values) {}, http.StatusBadRequest, "the form has the arguments as proposed"},
		{"stale fingerprint", lead, func(f url.Values) { f.Set("arg.priority", "3"); f.Set("fingerprint", "sha256:0") }, http.StatusConflict, "The proposal changed after this page was shown"},
		{"no fingerprint", lead, func(f url.Values) { f.Set("arg.priority", "3"); f.Del("fingerprint") }, http.StatusBadRequest, "lacks the request and fingerprint"},
		{"no role", bot, func(f url.Values) { f.Set("arg.priority", "3") }, http.StatusForbidden, "You may not decide this run"},
		{"no such action", lead, func(f url.Values) { f.Set("arg.priority", "3"); f.Set("index", "7") }, http.StatusBadRequest, "names no action"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			id := h.submit(t, bot, "ticket", ticketArgs, "")
			b := h.browser(t)
			b.login(tc.as)
			form := b.editForm(id)
			tc.change(form)
			p := b.post("/ui/runs/"+id+"/edit", form)
			if p.status != tc.status || !strings.Contains(p.body, tc.words) {
				t.Fatalf("%d, want %d saying %q:\n%s", p.status, tc.status, tc.words, p.body)
			}
			v := h.wantStatus(t, id, record.StatusWaitingApproval)
			if len(v.Decisions) != 0 || !strings.Contains(string(v.Actions[0].Args), `"priority":2`) {
				t.Fatalf("a refused edit changed the run: %+v %s", v.Decisions, v.Actions[0].Args)
			}
		})
	}
}

// needsAttention is a run whose action's outcome nobody can tell.
func (h *harness) needsAttention(t *testing.T) string {
	t.Helper()
	id := h.submit(t, bot, "wobble", `{"n":1}`, "")
	run, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: id, Approver: record.Person{ID: lead}, Verdict: record.VerdictApprove, Via: record.ViaCLI})
	if err != nil || run.Status != record.StatusExecuting {
		t.Fatalf("approve %s: %v", id, err)
	}
	if _, err := h.engine.Resume(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	h.wantStatus(t, id, record.StatusNeedsAttention)
	return id
}

func TestResolveThroughThePage(t *testing.T) {
	for _, tc := range []struct {
		name, outcome, note string
		want                record.Status
	}{
		{"it ran, with a note", "ran", "seen in the ledger as D-9", record.StatusDone},
		{"it did not run, given up", "abandon", "", record.StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			id := h.needsAttention(t)
			b := h.browser(t)
			b.login(manager)
			if p := b.get("/ui/runs/" + id); !strings.Contains(p.body, `action="/ui/runs/`+id+`/resolve"`) {
				t.Fatalf("the page of a run that needs attention offers no resolution:\n%s", p.body)
			}
			p := b.post("/ui/runs/"+id+"/resolve", url.Values{"outcome": {tc.outcome}, "reason": {"checked the target"}, "note": {tc.note}})
			if p.status != http.StatusSeeOther {
				t.Fatalf("resolve: %d\n%s", p.status, p.body)
			}
			v := h.wantStatus(t, id, tc.want)
			if len(v.Resolutions) != 1 || v.Resolutions[0].By != manager {
				t.Fatalf("resolutions %+v", v.Resolutions)
			}
			if tc.note != "" && !strings.Contains(string(v.Operations[0].Receipt), tc.note) {
				t.Fatalf("the receipt %s lacks the note", v.Operations[0].Receipt)
			}
		})
	}
}

func TestResolveRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		as     string
		form   url.Values
		status int
		words  string
	}{
		{"no role", lead, url.Values{"outcome": {"ran"}, "reason": {"checked"}}, http.StatusForbidden, "role manager or above"},
		{"no reason", manager, url.Values{"outcome": {"ran"}}, http.StatusBadRequest, "say what you checked"},
		{"no outcome", manager, url.Values{"reason": {"checked"}}, http.StatusBadRequest, "say whether it ran"},
		{"a note on a retry", manager, url.Values{"outcome": {"retry"}, "reason": {"checked"}, "note": {"x"}}, http.StatusBadRequest, "goes only with"},
		{"no token", manager, url.Values{"outcome": {"ran"}, "reason": {"checked"}, "csrf": {""}}, http.StatusForbidden, "security token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			id := h.needsAttention(t)
			b := h.browser(t)
			b.login(tc.as)
			b.get("/ui/runs/" + id)
			p := b.post("/ui/runs/"+id+"/resolve", tc.form)
			if p.status != tc.status || !strings.Contains(p.body, tc.words) {
				t.Fatalf("%d, want %d saying %q:\n%s", p.status, tc.status, tc.words, p.body)
			}
			h.wantStatus(t, id, record.StatusNeedsAttention)
		})
	}
}

func TestReadOnlyRefusesEditAndResolve(t *testing.T) {
	h := newHarness(t, harnessOpts{readOnly: true})
	ticket := h.submit(t, bot, "ticket", ticketArgs, "")
	stuck := h.needsAttention(t)
	b := h.browser(t)
	b.login(manager)
	for _, id := range []string{ticket, stuck} {
		if p := b.get("/ui/runs/" + id); strings.Contains(p.body, "/edit\"") || strings.Contains(p.body, "/resolve\"") {
			t.Fatalf("a read-only console offers a form on %s:\n%s", id, p.body)
		}
	}
	if p := b.post("/ui/runs/"+ticket+"/edit", url.Values{"arg.priority": {"3"}}); p.status != http.StatusForbidden || !strings.Contains(p.body, "read-only") {
		t.Fatalf("edit on a read-only console: %d\n%s", p.status, p.body)
	}
	if p := b.post("/ui/runs/"+stuck+"/resolve", url.Values{"outcome": {"ran"}, "reason": {"checked"}}); p.status != http.StatusForbidden || !strings.Contains(p.body, "read-only") {
		t.Fatalf("resolve on a read-only console: %d\n%s", p.status, p.body)
	}
	h.wantStatus(t, ticket, record.StatusWaitingApproval)
	h.wantStatus(t, stuck, record.StatusNeedsAttention)
}

func TestSlackLinkOnTheRunPage(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "refund", `{"amount":5}`, "")
	b := h.browser(t)
	b.login(lead)
	if p := b.get("/ui/runs/" + id); strings.Contains(p.body, "In Slack") {
		t.Fatalf("a run never posted links to Slack:\n%s", p.body)
	}
	v := h.wantStatus(t, id, record.StatusWaitingApproval)
	if err := h.engine.Outbox().Posted(context.Background(), &record.MessageLocation{RequestID: v.Requests[0].ID, RunID: id,
		Channel: "C0APPROVALS", TS: "1733130000.000100", PostedAt: h.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	p := b.get("/ui/runs/" + id)
	if !strings.Contains(p.body, `href="https://slack.com/archives/C0APPROVALS/p1733130000000100"`) {
		t.Fatalf("the run page does not link its Slack message:\n%s", p.body)
	}
}

// TestEditFormKeepsHostileStringsInert: a string that holds a bidi
// control is offered as its JSON, escaped, and comes back as it was.
func TestEditFormKeepsHostileStringsInert(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.submit(t, bot, "ticket", `{"title":"pay \u202eDAC","priority":2}`, "")
	b := h.browser(t)
	b.login(lead)
	form := b.editForm(id)
	if got := form.Get("arg.title"); got != `"pay \u202eDAC"` {
		t.Fatalf("the title is offered as %q, want its escaped JSON", got)
	}
	form.Set("arg.priority", "3")
	if p := b.post("/ui/runs/"+id+"/edit", form); p.status != http.StatusSeeOther {
		t.Fatalf("edit: %d\n%s", p.status, p.body)
	}
	v := h.wantStatus(t, id, record.StatusExecuting)
	if !strings.Contains(string(v.Actions[0].Args), "pay \u202eDAC") || !strings.Contains(string(v.Actions[0].Args), `"priority":3`) {
		t.Fatalf("the edited arguments are %s", v.Actions[0].Args)
	}
}
