package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// filesOverHTTP is an upstream over streamable HTTP in this process with
// the write_file tool of the docs' config, counting its writes.
func filesOverHTTP(t *testing.T) (url string, writes *atomic.Int32) {
	t.Helper()
	writes = &atomic.Int32{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "write_file"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}) (*mcp.CallToolResult, any, error) {
		writes.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + in.Path}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(hs.Close)
	return hs.URL, writes
}

// operatorDocConfig is the gateway's config of the docs, its upstream the
// one at url, agent:coder's token sk_gateway_coder in mcp.identities and
// the operators of the docs' section, their hash that of sk_gateway_lead.
func operatorDocConfig(t *testing.T, dir, url string) string {
	t.Helper()
	cfg := gatewayDocConfig(t, dir, nil, "1s")
	y := strings.Replace(string(mustRead(t, cfg)), `{name: files, command: [npx, -y, "@modelcontextprotocol/server-filesystem@2026.8.31", /srv/data]}`,
		`{name: files, url: "`+url+`"}`, 1)
	agent, lead := sha256.Sum256([]byte("sk_gateway_coder")), sha256.Sum256([]byte("sk_gateway_lead"))
	y += "  identities: [{token_sha256: " + hex.EncodeToString(agent[:]) + ", requester: agent:coder}]\n"
	blocks := blocksOf(docSection(t, "docs/mcp.md", "Deciding from an MCP client: the operator tools"), "yaml")
	if len(blocks) != 1 || !strings.HasPrefix(blocks[0], "mcp:\n  operators:\n") {
		t.Fatalf("docs/mcp.md, the operator tools: want one yaml block of mcp.operators, got %q", blocks)
	}
	ops := regexp.MustCompile(`token_sha256: [0-9a-f]{64}`).ReplaceAllString(strings.TrimPrefix(blocks[0], "mcp:\n"), "token_sha256: "+hex.EncodeToString(lead[:]))
	y += ops
	if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func listed(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// TestMCPGatewayOperatorOverHTTP runs the gateway over HTTP with the
// operators of docs/mcp.md and an operator's client connected as its
// mcpServers entry says: the operator lists the agent's waiting write,
// reads its fingerprint and approves it; the agent's call made again
// writes once.
func TestMCPGatewayOperatorOverHTTP(t *testing.T) {
	url, writes := filesOverHTTP(t)
	dir := t.TempDir()
	cfg := operatorDocConfig(t, dir, url)
	must(t, dir, 0, "--config", cfg, "config", "check")
	addr := freeAddr(t)
	cmd, _, _ := child(t, dir, nil, "--config", cfg, "mcp", "gateway", "--listen", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	waitFor(t, "the gateway to listen", func() bool {
		res, err := http.Post("http://"+addr+"/", "application/json", strings.NewReader(`{}`))
		if err == nil {
			res.Body.Close()
		}
		return err == nil
	})
	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	mcpDocJSON(t, "Deciding from an MCP client: the operator tools", &doc)
	e := doc.MCPServers["signoff-approvals"]
	env := map[string]string{"SIGNOFF_OPERATOR_TOKEN": "sk_gateway_lead"}
	auth := os.Expand(e.Headers["Authorization"], func(k string) string { return env[k] })
	connect := func(endpoint, authorization string) *mcp.ClientSession {
		t.Helper()
		hc := &http.Client{Transport: headerRoundTripper{map[string]string{"Authorization": authorization}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).
			Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	agent := connect("http://"+addr+"/", "Bearer sk_gateway_coder")
	op := connect(strings.Replace(e.URL, "127.0.0.1:8767", addr, 1), auth)
	if names := listed(t, op); len(names) != 4 || !slices.Contains(names, "signoff.approvals.approve") {
		t.Fatalf("the operator's tools: %v, want the four signoff.approvals tools", names)
	}
	if names := listed(t, agent); slices.Contains(names, "signoff.approvals.approve") {
		t.Fatalf("the agent's tools: %v, want none of the operator's", names)
	}
	write := map[string]any{"path": "/srv/data/plan.txt", "content": "ship it"}
	w := gatewayCall(t, agent, "files.write_file", write)
	if w.isError || w.runID == "" {
		t.Fatalf("write = %+v, want it waiting", w)
	}
	if p := gatewayCall(t, op, "signoff.approvals.list_pending", map[string]any{}); p.isError || !strings.Contains(p.text, w.runID) {
		t.Fatalf("list_pending = %+v, want run %s", p, w.runID)
	}
	var shown struct {
		Fingerprint string `json:"fingerprint"`
	}
	s := gatewayCall(t, op, "signoff.approvals.show", map[string]any{"run_id": w.runID})
	if err := json.Unmarshal([]byte(s.text), &shown); err != nil || shown.Fingerprint == "" {
		t.Fatalf("show = %+v (%v), want the fingerprint", s, err)
	}
	if a := gatewayCall(t, op, "signoff.approvals.approve", map[string]any{"run_id": w.runID, "fingerprint": shown.Fingerprint}); a.isError || !strings.Contains(a.text, `"executing"`) {
		t.Fatalf("approve = %+v, want the run executing", a)
	}
	if a := gatewayCall(t, agent, "files.write_file", write); a.isError || a.text != "wrote /srv/data/plan.txt" || writes.Load() != 1 {
		t.Fatalf("write again = %+v (writes %d), want the upstream's answer, once", a, writes.Load())
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	if out := must(t, dir, 0, "--config", cfg, "show", w.runID); !strings.Contains(out, "U0LEAD0001") || !strings.Contains(out, "mcp") {
		t.Fatalf("show = %s, want the approval by U0LEAD0001 via mcp", out)
	}
}

// TestMCPGatewayOperatorOverStdio starts the gateway as the operator's
// stdio entry of docs/mcp.md says: the session lists the operator tools
// beside the upstream's, and never approves a run it proposed; the flag
// is refused for someone in no role, for the requester, and over HTTP.
func TestMCPGatewayOperatorOverStdio(t *testing.T) {
	url, writes := filesOverHTTP(t)
	dir := t.TempDir()
	cfg := operatorDocConfig(t, dir, url)
	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	mcpDocJSON(t, "An operator over stdio", &doc)
	cs := mcpStdio(t, dir, doc.MCPServers["files"])
	names := listed(t, cs)
	if !slices.Contains(names, "files.write_file") || !slices.Contains(names, "signoff.approvals.approve") {
		t.Fatalf("tools %v, want the upstream's and the operator's", names)
	}
	w := gatewayCall(t, cs, "files.write_file", map[string]any{"path": "/srv/data/a.txt", "content": "x"})
	var shown struct {
		Fingerprint string `json:"fingerprint"`
	}
	if err := json.Unmarshal([]byte(gatewayCall(t, cs, "signoff.approvals.show", map[string]any{"run_id": w.runID}).text), &shown); err != nil {
		t.Fatal(err)
	}
	a := gatewayCall(t, cs, "signoff.approvals.approve", map[string]any{"run_id": w.runID, "fingerprint": shown.Fingerprint})
	if !a.isError || !strings.Contains(a.text, "never by the session that asked") || writes.Load() != 0 {
		t.Fatalf("the session approving its own run = %+v (writes %d), want refused", a, writes.Load())
	}
	cs.Close()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"someone in no role", []string{"--stdio", "--requester", "agent:coder", "--operator", "U0NOBODY01"}, "holds no role"},
		{"the requester", []string{"--stdio", "--requester", "U0LEAD0001", "--operator", "U0LEAD0001"}, "never decides its own runs"},
		{"over HTTP", []string{"--listen", "127.0.0.1:0", "--operator", "U0LEAD0001"}, "--operator goes with --stdio"},
	} {
		code, _, errs := signoff(t, dir, append([]string{"--config", cfg, "mcp", "gateway"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Fatalf("%s: exit %d, stderr %s; want 2 saying %q", c.name, code, errs, c.want)
		}
	}
}
