package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	agentapi "github.com/signoff-dev/signoff/api"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/workflow"
)

// TestServeMountsTheAgentAPI: signoff serve answers /v1 on its port, with
// the config's tokens, and the run an agent submits is the one the CLI sees.
func TestServeMountsTheAgentAPI(t *testing.T) {
	s := startServed(t)
	body, err := os.ReadFile("../../fixtures/proposals/refund-double-charge.json")
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path, token string, body []byte) (int, http.Header, []byte) {
		t.Helper()
		return apiCall(t, s.addr, method, path, token, body)
	}
	if code, h, _ := call("POST", "/v1/runs", "", body); code != 401 || h.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("no token: %d %s", code, h.Get("Content-Type"))
	}
	code, h, b := call("POST", "/v1/runs", serveAPIToken, body)
	if code != 201 {
		t.Fatalf("submit: %d %s", code, b)
	}
	var res struct{ ID, Status string }
	if err := json.Unmarshal(b, &res); err != nil || h.Get("Location") != "/v1/runs/"+res.ID {
		t.Fatalf("submit answered %s, Location %q (%v)", b, h.Get("Location"), err)
	}
	if res.Status != string(workflow.StatusWaitingApproval) {
		t.Errorf("status %s", res.Status)
	}
	if exit, out := s.cli(t, "show", res.ID); exit != exitWaiting || !strings.Contains(out, res.ID) {
		t.Errorf("show: exit %d\n%s", exit, out)
	}
	if code, _, b := call("GET", "/v1/openapi.yaml", "", nil); code != 200 || !strings.HasPrefix(string(b), "openapi: 3.0") {
		t.Errorf("document: %d", code)
	}
	if code, h, _ := call("GET", "/v1/nothing", serveAPIToken, nil); code != 404 || h.Get("Content-Type") != "application/problem+json" {
		t.Errorf("unknown route: %d %s", code, h.Get("Content-Type"))
	}
}

// TestTokenNew: the printed lines are a config the loader takes, whose hash
// is the printed token's; a bad scope is a usage error.
func TestTokenNew(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"token", "new", "--id", "ci", "--requester", "agent:resolver", "--scopes", "submit, read"},
		func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	secret, lines, _ := strings.Cut(out.String(), "\n")
	if !strings.HasPrefix(secret, "sk_") || len(secret) != 3+43 {
		t.Fatalf("token %q", secret)
	}
	path := filepath.Join(t.TempDir(), "signoff.yaml")
	if err := os.WriteFile(path, append(config.DefaultYAML(), []byte("\napi:\n  tokens:\n"+lines)...), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("the printed lines: %v\n%s", err, lines)
	}
	tok := cfg.API.Tokens[0]
	if tok.ID != "ci" || tok.Requester != "agent:resolver" || !tok.Has(config.ScopeSubmit) || !tok.Has(config.ScopeRead) || tok.Has(config.ScopeCancel) {
		t.Errorf("token %+v", tok)
	}
	if sum := sha256.Sum256([]byte(secret)); !strings.Contains(lines, hex.EncodeToString(sum[:])) {
		t.Errorf("the lines do not hold the token's SHA-256 %x", sum)
	}
	out.Reset()
	errOut.Reset()
	code = run(t.Context(), []string{"token", "new", "--id", "ci", "--requester", "r", "--scopes", "submit,admin"},
		func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
	if code != exitRefused || out.Len() != 0 || !strings.Contains(errOut.String(), `unknown scope "admin"`) {
		t.Errorf("bad scope: exit %d, out %q, err %q", code, out.String(), errOut.String())
	}
}

// TestAPIScopesAreTheConfigs: the scopes the config takes are the ones the
// API checks, so a token's scopes mean the same on both sides.
func TestAPIScopesAreTheConfigs(t *testing.T) {
	if got := []string{agentapi.ScopeSubmit, agentapi.ScopeRead, agentapi.ScopeCancel, agentapi.ScopeResolve}; !slices.Equal(got, config.Scopes) {
		t.Errorf("api scopes %v, config scopes %v", got, config.Scopes)
	}
	tok := apiToken(config.APIToken{ID: "a", Requester: "r", Scopes: []string{config.ScopeRead}, SHA256: [32]byte{1}})
	if tok.ID != "a" || tok.Requester != "r" || !slices.Equal(tok.Scopes, []string{agentapi.ScopeRead}) || tok.SHA256 != [32]byte{1} {
		t.Errorf("token %+v", tok)
	}
}

// apiCall sends one request to the agent API of the server on addr, with
// token as its bearer token ("" for none), and returns the answer.
func apiCall(t *testing.T, addr, method, path, token string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// TestIdempotencyRefusalIsOneMessage: an idempotency key reused with another
// proposal is refused with the same words by the agent API (409
// idempotency_key_reused, naming the run) and by signoff submit (exit 2), on
// the same store, and neither makes a run.
func TestIdempotencyRefusalIsOneMessage(t *testing.T) {
	s := startServed(t)
	body, err := os.ReadFile("../../fixtures/proposals/refund-double-charge.json")
	if err != nil {
		t.Fatal(err)
	}
	submit := func(body []byte) (int, []byte) {
		t.Helper()
		code, _, b := apiCall(t, s.addr, "POST", "/v1/runs", serveAPIToken, body)
		return code, b
	}
	code, b := submit(body)
	if code != 201 {
		t.Fatalf("first submit: %d %s", code, b)
	}
	var first struct{ ID string }
	if err := json.Unmarshal(b, &first); err != nil || first.ID == "" {
		t.Fatalf("first submit answered %s (%v)", b, err)
	}
	// The same key, another amount.
	other := bytes.Replace(body, []byte(`"amount": 119.00`), []byte(`"amount": 118.00`), 1)
	if bytes.Equal(other, body) {
		t.Fatal("the fixture has no amount to change")
	}
	path := filepath.Join(s.dir, "other.json")
	if err := os.WriteFile(path, other, 0o600); err != nil {
		t.Fatal(err)
	}
	runs := func() int {
		t.Helper()
		exit, out := s.cli(t, "runs", "--json")
		if exit != 0 {
			t.Fatalf("runs: exit %d\n%s", exit, out)
		}
		var l []json.RawMessage
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("runs: %v\n%s", err, out)
		}
		return len(l)
	}
	before := runs()

	code, b = submit(other)
	var p struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
		RunID  string `json:"run_id"`
	}
	if err := json.Unmarshal(b, &p); err != nil || code != 409 || p.Code != workflow.CodeIdempotencyKeyReused || p.RunID != first.ID {
		t.Fatalf("API: %d %s (%v), want 409 %s naming %s", code, b, err, workflow.CodeIdempotencyKeyReused, first.ID)
	}
	exit, out := s.cli(t, "submit", path)
	if exit != exitRefused {
		t.Fatalf("CLI: exit %d, want %d\n%s", exit, exitRefused, out)
	}
	cliMsg, ok := strings.CutPrefix(strings.TrimSpace(out), "signoff: ")
	if !ok {
		t.Fatalf("CLI: %q, want one line starting signoff:", out)
	}
	if cliMsg != p.Detail {
		t.Errorf("the API and the CLI say it differently:\nAPI %s\nCLI %s", p.Detail, cliMsg)
	}
	if !strings.Contains(p.Detail, first.ID) || !strings.Contains(p.Detail, `"resolver-T-65273-1"`) {
		t.Errorf("the message should name the run and the key: %s", p.Detail)
	}
	if after := runs(); after != before {
		t.Errorf("the refusals made runs: %d → %d", before, after)
	}
}
