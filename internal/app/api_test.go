package app

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
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
	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/record"
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
	if res.Status != string(record.StatusWaitingApproval) {
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
	if got := []string{agentapi.ScopeSubmit, agentapi.ScopeRead, agentapi.ScopeCancel, agentapi.ScopeResolve, agentapi.ScopeForce, agentapi.ScopeReview}; !slices.Equal(got, config.Scopes) {
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
	if err := json.Unmarshal(b, &p); err != nil || code != 409 || p.Code != record.CodeIdempotencyKeyReused || p.RunID != first.ID {
		t.Fatalf("API: %d %s (%v), want 409 %s naming %s", code, b, err, record.CodeIdempotencyKeyReused, first.ID)
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

// TestCursorsHoldAcrossReplicas: a list cursor one serve gave out is taken by
// another serve of the same store (a replica, or the server restarted): the
// cursors are sealed with a key derived from the integrity keys, which both
// read. A cursor of the right shape that neither gave out is 400
// invalid_cursor.
func TestCursorsHoldAcrossReplicas(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	cfg := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(cfg, []byte(slackConfig(fs)), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if code, out, errs := cliWith(t, dir, cfg, nil, "submit", proposal(t, dir, "p.json", refundJSON(agentID, "119.00", ""))); code != exitWaiting {
			t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
		}
	}
	a, b := startServeChild(t, dir, cfg, fs).addr(t), startServeChild(t, dir, cfg, fs).addr(t)
	var page struct {
		Runs       []struct{ ID string }
		NextCursor string `json:"next_cursor"`
	}
	code, _, body := apiCall(t, a, "GET", "/v1/runs?limit=1", serveAPIToken, nil)
	if err := json.Unmarshal(body, &page); code != 200 || err != nil || len(page.Runs) != 1 || page.NextCursor == "" {
		t.Fatalf("first page: %d %s (%v)", code, body, err)
	}
	first, cursor := page.Runs[0].ID, page.NextCursor
	code, _, body = apiCall(t, b, "GET", "/v1/runs?limit=1&cursor="+cursor, serveAPIToken, nil)
	if err := json.Unmarshal(body, &page); code != 200 || err != nil || len(page.Runs) != 1 || page.Runs[0].ID == first {
		t.Fatalf("the other replica's next page: %d %s (%v), want the run after %s", code, body, err, first)
	}
	// The cursor's fields (version:created:filter:seal:id) with another seal,
	// or another position under its seal.
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	f := strings.SplitN(string(raw), ":", 5)
	if err != nil || len(f) != 5 || f[4] != first {
		t.Fatalf("the cursor reads %q (%v)", raw, err)
	}
	forged := []string{
		strings.Join([]string{f[0], f[1], f[2], strings.Repeat("0", 32), f[4]}, ":"),
		strings.Join([]string{f[0], f[1], f[2], f[3], page.Runs[0].ID}, ":"),
	}
	for _, addr := range []string{a, b} {
		for _, c := range forged {
			code, h, body := apiCall(t, addr, "GET", "/v1/runs?limit=1&cursor="+base64.RawURLEncoding.EncodeToString([]byte(c)), serveAPIToken, nil)
			if code != 400 || h.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(body), `"invalid_cursor"`) {
				t.Errorf("the cursor %q no server gave out: %d %s", c, code, body)
			}
		}
	}
}
