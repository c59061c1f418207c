package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/console"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// The people of the harness's config.
const (
	bot     = "agent:bot" // the requester; its role may decide nothing
	lead    = "U0LEAD"
	lead2   = "U0LEAD2"
	manager = "U0MGR"
)

type noopExec struct{}

func (noopExec) Check(context.Context, record.Action) error { return nil }
func (noopExec) Execute(_ context.Context, key string, a record.Action) (record.Receipt, error) {
	return record.Receipt{ID: "rcpt-" + key, Detail: json.RawMessage(`{"echo":` + string(a.Args) + `}`)}, nil
}
func (noopExec) Lookup(context.Context, string) (record.Receipt, bool, error) {
	return record.Receipt{}, false, nil
}

// unprovable loses every answer and its register refuses to say: each run
// of it ends needing attention.
type unprovable struct{}

func (unprovable) Check(context.Context, record.Action) error { return nil }
func (unprovable) Execute(context.Context, string, record.Action) (record.Receipt, error) {
	return record.Receipt{}, errors.New("connection reset after sending")
}
func (unprovable) Lookup(context.Context, string) (record.Receipt, bool, error) {
	return record.Receipt{}, false, workflow.Permanent(errors.New("the register refuses to say"))
}

// ticketSchema is the schema of the action "ticket", whose rule lets an
// approver edit: a field of each kind the edit form has, and one redacted.
const ticketSchema = `{"type":"object","additionalProperties":false,"required":["title","priority"],"properties":{
	"title":{"type":"string","maxLength":80},
	"priority":{"type":"integer","minimum":1,"maximum":5},
	"cost":{"type":"number"},
	"urgent":{"type":"boolean"},
	"queue":{"enum":["billing","shipping"]},
	"tags":{"type":"array","items":{"type":"string"}},
	"secret":{"type":"string"}}}`

type harness struct {
	console *console.Console
	engine  *workflow.Engine
	clock   *clocktest.Clock
	srv     *httptest.Server
}

type harnessOpts struct {
	readOnly   bool
	noLocal    bool
	sessionKey []byte
	// consoleCfg changes the console's Config before New.
	consoleCfg func(*consoleConfig)
	oidc       *console.OIDC // a login through this identity provider
}

type consoleConfig = console.Config

// harnessStart is the harness's clock when it starts.
var harnessStart = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func newHarness(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "signoff.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	roles, err := policy.NewRoles([]policy.Role{
		{Name: "agent", Members: []string{bot}},
		{Name: "team_lead", Members: []string{lead, lead2}},
		{Name: "manager", Members: []string{manager}},
	})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New("r1", []policy.Rule{
		{Name: "refunds", When: `action.name == "refund"`, Risk: "high",
			Approval:   &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(3600)},
			BreakGlass: &record.BreakGlass{Role: "manager", Review: record.BreakGlassReview{Role: "manager", Within: 3600}}},
		{Name: "notes", When: `action.name == "note"`, Risk: "medium",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(3600), Edit: true}},
		{Name: "tickets", When: `action.name == "ticket"`, Risk: "medium",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(3600), Edit: true}},
		{Name: "wobbles", When: `action.name == "wobble"`, Risk: "medium",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(3600)}},
		{Name: "payouts", When: `action.name == "payout"`, Risk: "high",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(3600), StepUp: 300}},
		{Name: "migrations", When: `action.name == "migrate"`, Risk: "high",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(3600)},
			Window:   &record.Window{Days: []time.Weekday{time.Saturday}, From: "02:00", To: "04:00", TZ: "UTC"}},
		{Name: "deploys", When: `action.name == "deploy"`, Risk: "high",
			Approval: &record.ApprovalSpec{Expires: record.Seconds(3600), Requirement: &record.Requirement{
				AllOf: []record.Requirement{{Role: "team_lead", Count: 1}, {Role: "manager", Count: 1}}}}},
	}, roles)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]*workflow.ActionSpec{}
	for _, name := range []string{"refund", "note", "deploy", "wobble", "ticket", "payout", "migrate"} {
		var exec workflow.Executor = noopExec{}
		if name == "wobble" {
			exec = unprovable{}
		}
		var schema []byte
		var redact []string
		if name == "ticket" {
			schema, redact = []byte(ticketSchema), []string{"secret"}
		}
		spec, err := workflow.NewActionSpec(name, schema, exec, redact)
		if err != nil {
			t.Fatal(err)
		}
		actions[name] = spec
	}
	clk := clocktest.New(harnessStart)
	e, err := workflow.New(workflow.Config{Store: st, Policy: pol, Roles: roles, Actions: actions, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	key := testKey
	if o.sessionKey != nil {
		key = o.sessionKey
	}
	cc := console.Config{Engine: e, Prefix: "/ui", SessionKey: key, ReadOnly: o.readOnly, LocalLogin: !o.noLocal,
		OIDC: o.oidc, Clock: clk}
	if o.consoleCfg != nil {
		o.consoleCfg(&cc)
	}
	c, err := console.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return &harness{console: c, engine: e, clock: clk, srv: srv}
}

// submit proposes one action as requester, and returns the waiting run's id.
func (h *harness) submit(t testing.TB, requester, action, args, summary string, evidence ...record.Evidence) string {
	t.Helper()
	run, err := h.engine.Submit(context.Background(), &workflow.Proposal{Requester: record.Person{ID: requester}, Summary: summary,
		Actions: []record.Action{{Name: action, Args: json.RawMessage(args)}}, Evidence: evidence})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != record.StatusWaitingApproval {
		t.Fatalf("run %s is %s, want waiting_approval", run.ID, run.Status)
	}
	return run.ID
}

// browser is one visitor: its cookies, and the CSRF token of the last page.
type browser struct {
	t    testing.TB
	h    *harness
	c    *http.Client
	csrf string
}

func (h *harness) browser(t testing.TB) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &browser{t: t, h: h, c: c}
}

// page is one answer: its status, headers and body.
type page struct {
	status int
	header http.Header
	body   string
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	if m := csrfField.FindStringSubmatch(string(body)); m != nil {
		b.csrf = m[1]
	}
	return page{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.h.srv.URL+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

// post sends form to path; with the session's CSRF token unless the form
// has a csrf of its own.
func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", b.csrf)
	}
	req, err := http.NewRequest(http.MethodPost, b.h.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// login logs in locally as member.
func (b *browser) login(member string) {
	b.t.Helper()
	b.get("/ui/login")
	p := b.post("/ui/login", url.Values{"member": {member}})
	if p.status != http.StatusSeeOther {
		b.t.Fatalf("login as %s: %d\n%s", member, p.status, p.body)
	}
}

// decide posts a decision on run id with the request and fingerprint its
// page shows.
func (b *browser) decide(id, verdict, reason string) page {
	b.t.Helper()
	run := b.get("/ui/runs/" + id)
	form := url.Values{"verdict": {verdict}, "reason": {reason}}
	for _, f := range []string{"request_id", "fingerprint"} {
		m := regexp.MustCompile(`name="` + f + `" value="([^"]*)"`).FindStringSubmatch(run.body)
		if m == nil {
			b.t.Fatalf("the page of run %s has no %s to decide with:\n%s", id, f, run.body)
		}
		form.Set(f, m[1])
	}
	return b.post("/ui/runs/"+id+"/decide", form)
}
