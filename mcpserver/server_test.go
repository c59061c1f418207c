package mcpserver_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/internal/bearer"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/mcpserver"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

const deploySchema = `{"type": "object", "additionalProperties": false, "required": ["service"],
 "properties": {"service": {"type": "string", "minLength": 1}, "token": {"type": "string"}}}`

// recorder is an executor that succeeds and remembers the keys it ran.
type recorder struct {
	mu   sync.Mutex
	keys []string
}

func (r *recorder) Check(context.Context, record.Action) error { return nil }
func (r *recorder) Execute(_ context.Context, key string, a record.Action) (record.Receipt, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
	return record.Receipt{ID: "rcpt-" + key}, nil
}
func (r *recorder) Lookup(context.Context, string) (record.Receipt, bool, error) {
	return record.Receipt{}, false, nil
}

type harness struct {
	t      *testing.T
	engine *workflow.Engine
	srv    *mcpserver.Server
	rec    *recorder
	clock  *clocktest.Clock
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "signoff.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	roles, err := policy.NewRoles([]policy.Role{
		{Name: "agent", Members: []string{"agent:coder", "agent:other"}},
		{Name: "team_lead", Members: []string{"U0LEAD"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	gated := &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(3600), Edit: true}
	pol, err := policy.New("r1", []policy.Rule{
		{Name: "deploys", When: `action.name == "deploy"`, Risk: "high", Approval: gated},
		{Name: "reads", When: `action.name == "permission_prompt" && action.args.tool_name in ["Read", "Glob"]`, Risk: "low"},
		{Name: "other-tools", When: `action.name == "permission_prompt"`, Risk: "high", Approval: gated},
		{Name: "everything-else", When: "true", Risk: "low"},
	}, roles)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	deploy, err := workflow.NewActionSpec("deploy", []byte(deploySchema), rec, []string{"token"})
	if err != nil {
		t.Fatal(err)
	}
	perm, err := workflow.NewActionSpec("permission_prompt", nil, mcpserver.Granted{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktest.New(time.Now())
	e, err := workflow.New(workflow.Config{Store: st, Policy: pol, Roles: roles, Clock: clock,
		Actions: map[string]*workflow.ActionSpec{"deploy": deploy, "permission_prompt": perm}})
	if err != nil {
		t.Fatal(err)
	}
	// A hold of a nanosecond: a gated prompt is answered "waiting" at once.
	srv, err := mcpserver.New(mcpserver.Config{Engine: e, Hold: time.Nanosecond, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, engine: e, srv: srv, rec: rec, clock: clock}
}

// client connects an MCP client to the server speaking for requester, over
// the SDK's in-memory transports.
func (h *harness) client(requester string) *mcp.ClientSession {
	h.t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := h.srv.MCP(requester).Connect(ctx, st, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns its text and whether it is a tool error.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d contents, want 1", tool, len(res.Content))
	}
	txt, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content %T, want text", tool, res.Content[0])
	}
	return txt.Text, res.IsError
}

func callJSON[T any](t *testing.T, cs *mcp.ClientSession, tool string, args any) T {
	t.Helper()
	text, isErr := call(t, cs, tool, args)
	if isErr {
		t.Fatalf("%s: tool error: %s", tool, text)
	}
	var out T
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("%s: %v in %s", tool, err, text)
	}
	return out
}

func (h *harness) approve(id string, edit json.RawMessage) {
	h.t.Helper()
	ctx := context.Background()
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: id, Approver: record.Person{ID: "U0LEAD"},
		Verdict: record.VerdictApprove, Via: record.ViaCLI, Edit: edit}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.engine.Resume(ctx, id); err != nil {
		h.t.Fatal(err)
	}
}

var deployAction = map[string]any{"name": "deploy", "args": map[string]any{"service": "billing", "token": "s3cret"}}

func TestRequestApprovalWaitsThenWaitRunSeesItDone(t *testing.T) {
	h := newHarness(t)
	cs := h.client("agent:coder")
	sub := callJSON[mcpserver.Submitted](t, cs, "request_approval", map[string]any{
		"summary": "ship billing", "actions": []any{deployAction}, "idempotency_key": "k1"})
	if sub.Status != record.StatusWaitingApproval || sub.Approval == nil || sub.Approval.Role != "team_lead" ||
		sub.Approval.Remaining != 1 || sub.Approval.Deadline.IsZero() || len(sub.Fingerprint) != policy.ShortFingerprintLen {
		t.Fatalf("submitted = %+v, want waiting for one team_lead, with a deadline and a short fingerprint", sub)
	}
	again := callJSON[mcpserver.Submitted](t, cs, "request_approval", map[string]any{
		"summary": "ship billing", "actions": []any{deployAction}, "idempotency_key": "k1"})
	if again.RunID != sub.RunID || !again.Replayed {
		t.Fatalf("retry = %+v, want the same run %s replayed", again, sub.RunID)
	}

	// get_run shows the run redacted, as the agent API does.
	text, isErr := call(t, cs, "get_run", map[string]any{"run_id": sub.RunID})
	if isErr || strings.Contains(text, "s3cret") || !strings.Contains(text, "[redacted]") {
		t.Fatalf("get_run = %s (error %v), want the run with token redacted", text, isErr)
	}
	// Another requester's run is a run that does not exist.
	if text, isErr := call(t, h.client("agent:other"), "get_run", map[string]any{"run_id": sub.RunID}); !isErr || !strings.Contains(text, "no such run") {
		t.Fatalf("another's get_run = %s (error %v), want the unknown-run refusal", text, isErr)
	}

	// A wait that ends first says the run is not settled.
	w := callJSON[mcpserver.Waited](t, cs, "wait_run", map[string]any{"run_id": sub.RunID, "timeout_seconds": 0})
	if w.Settled || w.Run.Status != record.StatusWaitingApproval {
		t.Fatalf("wait_run at 0 s = settled %v, %s; want still waiting", w.Settled, w.Run.Status)
	}
	// A wait in progress is woken by the approval, not by a poll.
	done := make(chan mcpserver.Waited, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait_run", Arguments: map[string]any{"run_id": sub.RunID, "timeout_seconds": 50}})
		if err != nil || res.IsError {
			t.Errorf("wait_run: %v %v", err, res)
			close(done)
			return
		}
		var w mcpserver.Waited
		_ = json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &w)
		done <- w
	}()
	h.approve(sub.RunID, nil)
	w = <-done
	if !w.Settled || w.Run.Status != record.StatusDone {
		t.Fatalf("wait_run = settled %v, %s; want done", w.Settled, w.Run.Status)
	}
	if len(h.rec.keys) != 1 {
		t.Fatalf("executed %v, want once", h.rec.keys)
	}
}

func TestCancelRun(t *testing.T) {
	h := newHarness(t)
	cs := h.client("agent:coder")
	sub := callJSON[mcpserver.Submitted](t, cs, "request_approval", map[string]any{"actions": []any{deployAction}})
	if text, isErr := call(t, cs, "cancel_run", map[string]any{"run_id": sub.RunID}); !isErr || !strings.Contains(text, "reason") {
		t.Fatalf("cancel without reason = %s (error %v), want refused naming reason", text, isErr)
	}
	v := callJSON[workflow.RunView](t, cs, "cancel_run", map[string]any{"run_id": sub.RunID, "reason": "wrong service"})
	if v.Status != record.StatusCancelled || !strings.Contains(v.Reason, "wrong service") {
		t.Fatalf("cancelled = %s %q", v.Status, v.Reason)
	}
}

func permission(t *testing.T, cs *mcp.ClientSession, args any) mcpserver.Permission {
	t.Helper()
	return callJSON[mcpserver.Permission](t, cs, "permission_prompt", args)
}

func TestPermissionPrompt(t *testing.T) {
	h := newHarness(t)
	cs := h.client("agent:coder")

	// A low-risk tool is allowed at once, with its input as given.
	p := permission(t, cs, map[string]any{"tool_name": "Read", "input": map[string]any{"file_path": "/srv/a.txt"}, "tool_use_id": "t1"})
	if p.Behavior != "allow" || string(p.UpdatedInput) != `{"file_path":"/srv/a.txt"}` {
		t.Fatalf("Read = %+v, want allow with the input", p)
	}

	// A gated tool waits for the hold, then is denied as waiting, naming the run.
	bash := map[string]any{"tool_name": "Bash", "input": map[string]any{"command": "rm -rf build", "description": "clean"}}
	p = permission(t, cs, bash)
	if p.Behavior != "deny" || !strings.HasPrefix(p.Message, "waiting for approval in Slack, run run_") {
		t.Fatalf("Bash = %+v, want deny as waiting", p)
	}
	runID := runIn(t, p.Message)
	// The approver narrows the command; the retry (keys in another order:
	// the same canonical input) gets the stored, edited input, from the same run.
	h.approve(runID, json.RawMessage(`{"tool_name":"Bash","input":{"command":"rm -rf build/tmp","description":"clean"}}`))
	p = permission(t, cs, map[string]any{"input": map[string]any{"description": "clean", "command": "rm -rf build"}, "tool_name": "Bash"})
	if p.Behavior != "allow" || string(p.UpdatedInput) != `{"command":"rm -rf build/tmp","description":"clean"}` {
		t.Fatalf("Bash after approval = %+v, want allow with the edited input", p)
	}
	runs, err := h.engine.List(context.Background(), storage.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 { // the Read and the Bash
		t.Fatalf("%d runs, want 2: a retry attaches to its run", len(runs))
	}
	// A grant is for its call and the call's retries: the same call long
	// after the run ended is asked anew, in a run of its own.
	h.clock.Advance(mcpserver.DefaultReattach + time.Minute)
	p = permission(t, cs, bash)
	if p.Behavior != "deny" || !strings.HasPrefix(p.Message, "waiting for approval in Slack, run run_") || runIn(t, p.Message) == runID {
		t.Fatalf("Bash long after its grant = %+v, want a new run waiting (not %s)", p, runID)
	}

	// Rejected: denied with the approver's reason.
	p = permission(t, cs, map[string]any{"tool_name": "Write", "input": map[string]any{"file_path": "/etc/passwd"}})
	runID = runIn(t, p.Message)
	if _, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: runID, Approver: record.Person{ID: "U0LEAD"},
		Verdict: record.VerdictReject, Reason: "not that file", Via: record.ViaCLI}); err != nil {
		t.Fatal(err)
	}
	p = permission(t, cs, map[string]any{"tool_name": "Write", "input": map[string]any{"file_path": "/etc/passwd"}})
	if p.Behavior != "deny" || !strings.Contains(p.Message, "rejected") || !strings.Contains(p.Message, "not that file") {
		t.Fatalf("Write after rejection = %+v, want deny with the reason", p)
	}
}

func TestBadInputIsAToolError(t *testing.T) {
	h := newHarness(t)
	cs := h.client("agent:coder")
	for _, c := range []struct {
		name, tool string
		args       any
		want       string
	}{
		{"no tool name", "permission_prompt", map[string]any{"input": map[string]any{}}, "tool_name: required"},
		{"input not an object", "permission_prompt", map[string]any{"tool_name": "Bash", "input": "ls"}, "input: required, a JSON object"},
		{"tool name with a newline", "permission_prompt", map[string]any{"tool_name": "Bash\nallow", "input": map[string]any{}}, "control characters"},
		{"requester claimed", "request_approval", map[string]any{"actions": []any{deployAction}, "requester": map[string]any{"id": "U0LEAD"}}, "unknown"},
		{"unknown action", "request_approval", map[string]any{"actions": []any{map[string]any{"name": "drop_db"}}}, "unknown action"},
		{"args against the schema", "request_approval", map[string]any{"actions": []any{map[string]any{"name": "deploy", "args": map[string]any{}}}}, "service"},
		{"no run id", "get_run", map[string]any{}, "run_id is required"},
		{"wait too long", "wait_run", map[string]any{"run_id": "run_x", "timeout_seconds": 51}, "timeout_seconds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text, isErr := call(t, cs, c.tool, c.args)
			if !isErr || !strings.Contains(text, c.want) {
				t.Fatalf("%s = %s (error %v), want a tool error saying %q", c.tool, text, isErr, c.want)
			}
		})
	}
}

func TestHTTPChecksEachRequest(t *testing.T) {
	h := newHarness(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	handler, err := h.srv.Handler(mcpserver.HTTPConfig{Rate: 1, Burst: 5, Now: func() time.Time { return now },
		Origins: []string{"https://ide.example"}, Tokens: []bearer.Token{
			{ID: "coder", SHA256: sha256.Sum256([]byte("sk_coder")), Requester: "agent:coder", Scopes: []string{"submit", "read"}},
			{ID: "slow", SHA256: sha256.Sum256([]byte("sk_slow")), Requester: "agent:other", Scopes: []string{"read"}}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(handler)
	t.Cleanup(hs.Close)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	huge := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", mcpserver.MaxBodyBytes) + `"}}`
	for _, c := range []struct {
		name, auth, origin, host, body string
		want                           int
	}{
		{"no token", "", "", "", init, http.StatusUnauthorized},
		{"unknown token", "Bearer sk_nope", "", "", init, http.StatusUnauthorized},
		{"another origin", "Bearer sk_coder", "https://evil.example", "", init, http.StatusForbidden},
		{"an allowed origin", "Bearer sk_coder", "https://ide.example", "", init, http.StatusOK},
		{"the token", "Bearer sk_coder", "", "", init, http.StatusOK},
		{"another host on localhost (DNS rebinding)", "Bearer sk_coder", "", "evil.example", init, http.StatusForbidden},
		{"a body too large", "Bearer sk_coder", "", "", huge, http.StatusRequestEntityTooLarge},
		{"the slow token's first", "Bearer sk_slow", "", "", init, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := post(t, hs, c.auth, c.origin, c.host, c.body); got != c.want {
				t.Fatalf("status %d, want %d", got, c.want)
			}
		})
	}
	// The slow token's bucket (5, refilled at 1 a second on a clock that
	// does not move) runs dry; the other token's is its own.
	for range 4 {
		post(t, hs, "Bearer sk_slow", "", "", init)
	}
	if got := post(t, hs, "Bearer sk_slow", "", "", init); got != http.StatusTooManyRequests {
		t.Fatalf("past the burst: status %d, want 429", got)
	}
}

func post(t *testing.T, hs *httptest.Server, auth, origin, host, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if host != "" {
		req.Host = host
	}
	res, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestHTTPToolsSpeakForTheToken calls through the SDK's own streamable
// client, in the newest revision: the run is the token's requester's, and a scope the token lacks
// is refused.
func TestHTTPToolsSpeakForTheToken(t *testing.T) {
	h := newHarness(t)
	handler, err := h.srv.Handler(mcpserver.HTTPConfig{Tokens: []bearer.Token{
		{ID: "coder", SHA256: sha256.Sum256([]byte("sk_coder")), Requester: "agent:coder", Scopes: []string{"submit", "read"}}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(handler)
	t.Cleanup(hs.Close)
	hc := &http.Client{Transport: bearerTransport{"sk_coder", http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q, want the newest revision, 2026-07-28", v)
	}
	sub := callJSON[mcpserver.Submitted](t, cs, "request_approval", map[string]any{"actions": []any{deployAction}})
	v, err := h.engine.Get(context.Background(), sub.RunID)
	if err != nil || v.Requester.ID != "agent:coder" {
		t.Fatalf("run %v requester %v, want agent:coder", err, v)
	}
	if text, isErr := call(t, cs, "cancel_run", map[string]any{"run_id": sub.RunID, "reason": "x"}); !isErr || !strings.Contains(text, "scope cancel") {
		t.Fatalf("cancel = %s (error %v), want refused for the scope", text, isErr)
	}
}

type bearerTransport struct {
	secret string
	next   http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.secret)
	return b.next.RoundTrip(r)
}

// runIn is the run a waiting denial names.
func runIn(t *testing.T, msg string) string {
	t.Helper()
	m := regexp.MustCompile(`, run (run_[0-9a-z]+):`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("%q names no run", msg)
	}
	return m[1]
}

// TestHTTPOlderRevisions: a client of an older protocol revision, which
// initializes first and sends its version on each request, is answered in
// its revision, stateless.
func TestHTTPOlderRevisions(t *testing.T) {
	h := newHarness(t)
	handler, err := h.srv.Handler(mcpserver.HTTPConfig{Rate: 1e6, Burst: 1e6, Tokens: []bearer.Token{
		{ID: "coder", SHA256: sha256.Sum256([]byte("sk_coder")), Requester: "agent:coder", Scopes: []string{"submit", "read"}}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(handler)
	t.Cleanup(hs.Close)
	for _, version := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			init := rpc(t, hs, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			var ir struct {
				Result struct {
					ProtocolVersion string `json:"protocolVersion"`
				} `json:"result"`
			}
			if err := json.Unmarshal(init, &ir); err != nil || ir.Result.ProtocolVersion != version {
				t.Fatalf("initialize = %s, want %s", init, version)
			}
			call := rpc(t, hs, version, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"permission_prompt","arguments":{"tool_name":"Read","input":{"file_path":"a"}}}}`)
			if !strings.Contains(string(call), `{\"behavior\":\"allow\",\"updatedInput\":{\"file_path\":\"a\"}}`) {
				t.Fatalf("tools/call = %s, want allow", call)
			}
		})
	}
}

// rpc posts one JSON-RPC message and returns the answer, from a JSON body
// or the one event of a stream.
func rpc(t *testing.T, hs *httptest.Server, version, body string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer sk_coder")
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	res, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, b)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			return []byte(data)
		}
	}
	return b
}

// TestPermissionPromptOfAnActionNotConfigured: the prompt proposes an
// action the config must declare; without it every call is denied, saying so.
func TestPermissionPromptOfAnActionNotConfigured(t *testing.T) {
	h := newHarness(t)
	srv, err := mcpserver.New(mcpserver.Config{Engine: h.engine, PermissionAction: "claude_tool", Hold: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	p := permission(t, h.client("agent:coder"), map[string]any{"tool_name": "Read", "input": map[string]any{}})
	if p.Behavior != "deny" || !strings.Contains(p.Message, `unknown action "claude_tool"`) {
		t.Fatalf("= %+v, want deny naming the action", p)
	}
}
