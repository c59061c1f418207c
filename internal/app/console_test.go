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
	s, err := startServer(t.Context(), a, serveOptions{addr: "127.0.0.1:0", poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := "http://" + s.addr
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	do := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if path == "/ui/login" && resp.Header.Get("Content-Security-Policy") == "" {
			t.Fatalf("%s %s has no Content-Security-Policy", method, path)
		}
		return resp.StatusCode, string(b)
	}
	if code, _ := do("GET", "/ui", nil); code != http.StatusSeeOther {
		t.Fatalf("GET /ui: %d, want 303", code)
	}
	code, login := do("GET", "/ui/login", nil)
	if code != http.StatusOK || !strings.Contains(login, "U0LEAD0001") {
		t.Fatalf("GET /ui/login: %d\n%s", code, login)
	}
	token := csrf.FindStringSubmatch(login)[1]
	if code, _ := do("POST", "/ui/login", url.Values{"csrf": {token}, "member": {"U0LEAD0001"}}); code != http.StatusSeeOther {
		t.Fatalf("POST /ui/login: %d", code)
	}
	_, page := do("GET", "/ui/runs/"+run.ID, nil)
	form := url.Values{"verdict": {"approve"}}
	for _, f := range []string{"csrf", "request_id", "fingerprint"} {
		m := regexp.MustCompile(`name="` + f + `" value="([^"]+)"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("the run page has no %s:\n%s", f, page)
		}
		form.Set(f, m[1])
	}
	if code, body := do("POST", "/ui/runs/"+run.ID+"/decide", form); code != http.StatusSeeOther {
		t.Fatalf("approve on the console: %d\n%s", code, body)
	}
	waitFor(t, "the approved run to be executed", func() bool {
		v, err := a.engine.Get(context.Background(), run.ID)
		return err == nil && v.Status == record.StatusDone
	})
	// The agent API is still served beside it.
	if code, _ := do("GET", "/v1/runs", nil); code != http.StatusUnauthorized {
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
