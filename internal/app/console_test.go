package app

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

const testUIKey = "console-session-key-for-tests-0123456789"

// writeUIConfig writes the built-in config with ui set to section.
func writeUIConfig(t *testing.T, dir, section string) string {
	t.Helper()
	p := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(p, append(config.DefaultYAML(), []byte("\nui: "+section+"\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServeMountsTheConsole: with a ui: section serve answers /ui on its
// address, with the local login on loopback, and a decision made there
// moves the run the workers then execute.
func TestServeMountsTheConsole(t *testing.T) {
	dir := t.TempDir()
	cfg := writeUIConfig(t, dir, "{local_login: true}")
	env := func(k string) string { return map[string]string{uiKeyEnv: testUIKey}[k] }
	a, err := openApp(t.Context(), options{db: dbPath(dir), shop: shopPath(dir), config: cfg, server: true}, env, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	run := submitDoubleCharge(t, a)
	s, err := startServer(t.Context(), a, serveOptions{addr: "127.0.0.1:0", poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	ui := newUIClient(t, "http://"+s.addr)
	if code, _ := ui.do("GET", "/ui", nil); code != http.StatusSeeOther {
		t.Fatalf("GET /ui: %d, want 303", code)
	}
	ui.login("U0LEAD0001")
	if code, body := ui.approve(run.ID); code != http.StatusSeeOther {
		t.Fatalf("approve on the console: %d\n%s", code, body)
	}
	waitFor(t, "the approved run to be executed", func() bool {
		v, err := a.engine.Get(context.Background(), run.ID)
		return err == nil && v.Status == record.StatusDone
	})
	// The agent API is still served beside it.
	if code, _ := ui.do("GET", "/v1/runs", nil); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/runs without a token: %d, want 401", code)
	}
}

// TestServeRefusesAConsoleItCannotStart: a local login on an address others
// reach, or no session key, stops serve before anything is opened, saying
// which line and what to do.
func TestServeRefusesAConsoleItCannotStart(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "ui.key")
	if err := os.WriteFile(good, []byte(testUIKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withKey := func(k string) string { return map[string]string{uiKeyEnv: testUIKey}[k] }
	withSecret := func(k string) string { return map[string]string{uiKeyEnv: testUIKey, "OIDC_SECRET": "s3cret"}[k] }
	const idp = "{issuer: https://idp.corp.example, client_id: signoff, client_secret_env: OIDC_SECRET}"
	for _, tc := range []struct {
		name, section, addr string
		getenv              func(string) string
		want                string // "" for none
	}{
		{"local login on every interface", "{local_login: true}", ":8080", withKey, "ui.local_login: the local login lets anyone be anyone"},
		{"local login on a public address", "{local_login: true}", "192.0.2.1:8080", withKey, "serve offers it on loopback only"},
		{"local login on loopback", "{local_login: true}", "127.0.0.1:8080", withKey, ""},
		{"local login on localhost", "{local_login: true}", "localhost:8080", withKey, ""},
		{"no key", "{}", ":8080", noEnv, "SIGNOFF_UI_SESSION_KEY is not set"},
		{"a short key file", "{session_key_file: short.key}", ":8080", noEnv, "short.key holds 9 bytes"},
		{"a key file", "{session_key_file: ui.key}", ":8080", noEnv, ""},
		{"a missing key file", "{session_key_file: none.key}", ":8080", noEnv, "read the console's session key"},
		{"oidc without its secret", "{oidc: " + idp + "}", ":8080", withKey, "ui.oidc.client_secret_env: OIDC_SECRET, which holds the OIDC client secret, is not set"},
		{"oidc with its secret", "{oidc: " + idp + "}", ":8080", withSecret, ""},
		{"oidc calling back elsewhere", "{oidc: {issuer: https://idp.corp.example, client_id: signoff, client_secret_env: OIDC_SECRET, redirect_url: https://signoff.corp.example/cb}}",
			":8080", withSecret, "ui.oidc.redirect_url: https://signoff.corp.example/cb is not where serve answers"},
		{"plain http on every interface", "{plain_http: true, oidc: " + idp + "}", ":8080", withSecret, "ui.plain_http: plain_http sends the login's cookies without Secure"},
		{"plain http on loopback", "{plain_http: true, oidc: " + idp + "}", "127.0.0.1:8080", withSecret, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load(writeUIConfig(t, dir, tc.section))
			if err != nil {
				t.Fatal(err)
			}
			err = checkUI(cfg, tc.addr, tc.getenv)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "signoff.yaml:") {
				t.Fatalf("err = %v, want one with its line saying %q", err, tc.want)
			}
		})
	}
}

// uiClient is a browser of the console served at base: its cookies, and
// the CSRF token of the last page it read.
type uiClient struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newUIClient(t *testing.T, base string) *uiClient {
	jar, _ := cookiejar.New(nil)
	return &uiClient{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// do sends a request (a form with the last page's CSRF token unless the
// form has one), and returns the status and the body.
func (u *uiClient) do(method, path string, form url.Values) (int, string) {
	u.t.Helper()
	var body io.Reader
	if form != nil {
		if _, ok := form["csrf"]; !ok {
			form.Set("csrf", u.csrf)
		}
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequestWithContext(u.t.Context(), method, u.base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := u.c.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(path, "/ui") && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		u.t.Fatalf("%s %s has no strict Content-Security-Policy", method, path)
	}
	if m := csrfInput.FindStringSubmatch(string(b)); m != nil {
		u.csrf = m[1]
	}
	return resp.StatusCode, string(b)
}

// login logs in locally as member.
func (u *uiClient) login(member string) {
	u.t.Helper()
	code, page := u.do("GET", "/ui/login", nil)
	if code != http.StatusOK || !strings.Contains(page, member) {
		u.t.Fatalf("GET /ui/login: %d, does not offer %s\n%s", code, member, page)
	}
	if code, _ := u.do("POST", "/ui/login", url.Values{"member": {member}}); code != http.StatusSeeOther {
		u.t.Fatalf("POST /ui/login: %d", code)
	}
}

// approve approves run id with the request and fingerprint its page shows.
func (u *uiClient) approve(id string) (int, string) {
	u.t.Helper()
	_, page := u.do("GET", "/ui/runs/"+id, nil)
	form := url.Values{"verdict": {"approve"}}
	for _, f := range []string{"request_id", "fingerprint"} {
		m := regexp.MustCompile(`name="` + f + `" value="([^"]+)"`).FindStringSubmatch(page)
		if m == nil {
			u.t.Fatalf("the run page has no %s:\n%s", f, page)
		}
		form.Set(f, m[1])
	}
	return u.do("POST", "/ui/runs/"+id+"/decide", form)
}

// TestConsoleDocExamples: the ui: section of docs/console.md loads and
// serves on loopback (its local login refused elsewhere), and its demo
// command is the one TestDemoServesTheConsole runs, with the address the
// page names.
func TestConsoleDocExamples(t *testing.T) {
	yamls := blocksOf(docSection(t, "docs/console.md", "Turning it on"), "yaml")
	if len(yamls) != 1 {
		t.Fatalf("%d yaml blocks, want 1", len(yamls))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ui.key"), []byte(testUIKey), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(p, append(config.DefaultYAML(), []byte("\n"+yamls[0])...), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.UI.Given || !cfg.UI.LocalLogin || cfg.UI.ReadOnly {
		t.Fatalf("ui = %+v", cfg.UI)
	}
	if err := checkUI(cfg, "127.0.0.1:8080", noEnv); err != nil {
		t.Fatal(err)
	}
	if err := checkUI(cfg, ":8080", noEnv); err == nil {
		t.Fatal("the doc's local login was accepted on every interface")
	}
	shs := blocksOf(docSection(t, "docs/console.md", "Try it on the demo"), "sh")
	if len(shs) != 1 || strings.TrimSpace(shs[0]) != "signoff demo --ui" {
		t.Fatalf("the demo block is %q, want signoff demo --ui", shs)
	}
	c := &cli{}
	if f := c.demoCmd().Flags().Lookup("ui-addr"); f == nil || f.DefValue != "127.0.0.1:8080" {
		t.Fatalf("demo --ui-addr is %+v, want a default of 127.0.0.1:8080 as the page says", f)
	}
}

// TestConsoleOperationsPage: the Operations page of the console serve
// mounts says the loops are ready, the config in use in words as config
// check does, and never a secret: not a token's hash, not the value of an
// environment variable the config names, not the session key.
func TestConsoleOperationsPage(t *testing.T) {
	dir := t.TempDir()
	const (
		hash   = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
		secret = "whsec_c2lnbmluZy1zZWNyZXQtZm9yLXRoZS10ZXN0cy0wMTIzNDU2Nzg5"
	)
	def := string(config.DefaultYAML())
	yaml := def[:strings.Index(def, "actions:")] + `actions:
  request_refund: {executor: demo}
  reship_item: {executor: demo}
  create_return_label: {executor: demo}
  notify:
    executor: {type: webhook, url: "https://hooks.example/notify", secret_env: NOTIFY_SECRET}
api:
  tokens:
    - {id: resolver, sha256: ` + hash + `, requester: "agent:resolver", scopes: [submit, read]}
ui: {local_login: true}
`
	cfg := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string { return map[string]string{uiKeyEnv: testUIKey, "NOTIFY_SECRET": secret}[k] }
	a, err := openApp(t.Context(), options{db: dbPath(dir), shop: shopPath(dir), config: cfg, server: true}, env, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s, err := startServer(t.Context(), a, serveOptions{addr: "127.0.0.1:0", poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	ui := newUIClient(t, "http://"+s.addr)
	ui.login("U0MGR00001")
	code, page := ui.do("GET", "/ui/ops", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /ui/ops: %d\n%s", code, page)
	}
	for _, want := range []string{"Ready: the store answers", "Nothing waits to be delivered.", "team_lead", "U0LEAD0001",
		"large-refund", "approval: 1 of team_lead or above", "signed with the secret in NOTIFY_SECRET", "resolver  requester agent:resolver, scopes submit, read"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the Operations page lacks %q:\n%s", want, page)
		}
	}
	for _, secretText := range []string{hash, secret, testUIKey} {
		if strings.Contains(page, secretText) {
			t.Fatalf("the Operations page shows a secret %q:\n%s", secretText, page)
		}
	}
}

// TestConsoleOIDCDocExample: the oidc: example of docs/console.md loads,
// serve refuses it until its client secret's variable is set, and, with a
// test identity provider's issuer and client in place of the example's,
// serve logs ana@corp.example in as U0LEAD0001, who approves a run there,
// while a login allowed and not mapped reads and may not decide.
func TestConsoleOIDCDocExample(t *testing.T) {
	yamls := blocksOf(docSection(t, "docs/console.md", "Logging in through an identity provider"), "yaml")
	if len(yamls) != 1 {
		t.Fatalf("%d yaml blocks, want 1", len(yamls))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ui.key"), []byte(testUIKey), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(text string) *config.Config {
		t.Helper()
		p := filepath.Join(dir, "signoff.yaml")
		if err := os.WriteFile(p, append(config.DefaultYAML(), []byte("\n"+text)...), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := load(yamls[0])
	if o := cfg.UI.OIDC; o == nil || o.ClientSecretEnv != "SIGNOFF_OIDC_CLIENT_SECRET" || cfg.UI.MembersByLogin()["ana@corp.example"] != "U0LEAD0001" {
		t.Fatalf("ui = %+v", cfg.UI)
	}
	if err := checkUI(cfg, ":8080", noEnv); err == nil || !strings.Contains(err.Error(), "SIGNOFF_OIDC_CLIENT_SECRET, which holds the OIDC client secret, is not set") {
		t.Fatalf("serve without the client secret: %v", err)
	}

	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Shutdown() }()
	text := strings.NewReplacer("https://accounts.google.com", m.Issuer(), "1234567890-signoff.apps.googleusercontent.com", m.ClientID,
		"    redirect_url: https://signoff.corp.example/ui/oidc/callback\n", "", "[openid, email, profile]", "[openid, email, profile, groups]",
		"hd: [corp.example]", "groups: [engineering]", "ui:\n", "ui:\n  plain_http: true\n").Replace(yamls[0])
	env := func(k string) string {
		return map[string]string{uiKeyEnv: testUIKey, "SIGNOFF_OIDC_CLIENT_SECRET": m.ClientSecret}[k]
	}
	a, err := openApp(t.Context(), options{db: dbPath(dir), shop: shopPath(dir), config: writeUIConfig(t, dir, ""), server: true}, env, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.cfg = load(text)
	run := submitDoubleCharge(t, a)
	s, err := startServer(t.Context(), a, serveOptions{addr: "127.0.0.1:0", poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	signIn := func(u mockoidc.User) *uiClient {
		t.Helper()
		m.QueueUser(u)
		ui := newUIClient(t, "http://"+s.addr)
		next := ui.base + "/ui/runs/" + run.ID
		for range 8 {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, next, nil)
			resp, err := ui.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusSeeOther && resp.StatusCode != http.StatusFound {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("the login ended at %s with %d", next, resp.StatusCode)
				}
				return ui
			}
			ref, _ := url.Parse(resp.Header.Get("Location"))
			next = req.URL.ResolveReference(ref).String()
		}
		t.Fatalf("the login did not end")
		return nil
	}
	eve := signIn(&mockoidc.MockUser{Subject: "sub-eve", Email: "eve@corp.example", EmailVerified: true, Groups: []string{"engineering"}})
	if code, _ := eve.approve(run.ID); code != http.StatusForbidden {
		t.Fatalf("approve by a login no member maps: %d, want 403", code)
	}
	ana := signIn(&mockoidc.MockUser{Subject: "sub-ana", Email: "ana@corp.example", EmailVerified: true, Groups: []string{"engineering"}})
	if code, body := ana.approve(run.ID); code != http.StatusSeeOther {
		t.Fatalf("approve as ana: %d\n%s", code, body)
	}
	waitFor(t, "the approved run to be executed", func() bool {
		v, err := a.engine.Get(context.Background(), run.ID)
		return err == nil && v.Status == record.StatusDone && len(v.Decisions) == 1 && v.Decisions[0].By == "U0LEAD0001"
	})
}

// submitDoubleCharge proposes the double-charge refund of the fixtures
// through a's engine: a run that waits for a team lead.
func submitDoubleCharge(t *testing.T, a *app) *record.Run {
	t.Helper()
	raw, err := os.ReadFile(fixture("refund-double-charge.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := workflow.ParseProposal(raw)
	if err != nil {
		t.Fatal(err)
	}
	run, err := a.engine.Submit(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	return run
}
