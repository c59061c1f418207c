package app

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpEntry is one server of an mcpServers map.
type mcpEntry struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// mcpDocConfig writes the config of docs/mcp.md into dir.
func mcpDocConfig(t *testing.T, dir string) string {
	t.Helper()
	blocks := blocksOf(docSection(t, "docs/mcp.md", "The config"), "yaml")
	if len(blocks) != 1 {
		t.Fatalf("docs/mcp.md, The config: %d yaml blocks, want 1", len(blocks))
	}
	p := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(p, []byte(blocks[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// mcpDocEntry is the signoff entry of the one JSON block of a section of
// docs/mcp.md, decoded into v.
func mcpDocJSON(t *testing.T, heading string, v any) {
	t.Helper()
	blocks := blocksOf(docSection(t, "docs/mcp.md", heading), "json")
	if len(blocks) != 1 {
		t.Fatalf("docs/mcp.md, %s: %d json blocks, want 1", heading, len(blocks))
	}
	if err := json.Unmarshal([]byte(blocks[0]), v); err != nil {
		t.Fatalf("docs/mcp.md, %s: %v", heading, err)
	}
}

// mcpStdio starts the entry's command as the coding agent would, this test
// binary standing in for signoff, in dir, and connects the SDK's client to
// it over its stdin and stdout.
func mcpStdio(t *testing.T, dir string, e mcpEntry, extra ...string) *mcp.ClientSession {
	t.Helper()
	if e.Command != "signoff" {
		t.Fatalf("command %q, want signoff", e.Command)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, append(slices.Clone(e.Args), extra...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "docs-test", Version: "1"}, nil).
		Connect(t.Context(), &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func mcpText(t *testing.T, cs *mcp.ClientSession, tool string, args any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("%s: error %v, %d contents", tool, res.IsError, len(res.Content))
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// TestMCPServerForACodingAgent runs the mcpServers entry of docs/mcp.md
// against its config: a read is allowed at once; a command is denied as
// waiting, approved on the CLI (another process) with an edit after the
// server stopped, and the same call to a new server is allowed with the
// edited input, from the same run.
func TestMCPServerForACodingAgent(t *testing.T) {
	dir := t.TempDir()
	cfg := mcpDocConfig(t, dir)
	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	mcpDocJSON(t, "A coding agent", &doc)
	// The hold is shortened, so that the test does not wait 50 s for it.
	cs := mcpStdio(t, dir, doc.MCPServers["signoff"], "--hold", "10ms")

	read := mcpText(t, cs, "permission_prompt", map[string]any{"tool_name": "Read", "input": map[string]any{"file_path": "README.md"}})
	if read != `{"behavior":"allow","updatedInput":{"file_path":"README.md"}}` {
		t.Fatalf("Read = %s", read)
	}
	bash := map[string]any{"tool_name": "Bash", "input": map[string]any{"command": "make deploy"}}
	denied := mcpText(t, cs, "permission_prompt", bash)
	m := regexp.MustCompile(`"waiting for approval in Slack, run (run_[0-9a-z]+):`).FindStringSubmatch(denied)
	if m == nil {
		t.Fatalf("Bash = %s, want deny as waiting", denied)
	}
	// The agent goes away (the server with it) while the call waits; the
	// approval comes meanwhile, and the agent started again asks again.
	cs.Close()
	must(t, dir, 0, "--config", cfg, "approve", m[1], "--as", "U0LEAD0001",
		"--edit", `{"tool_name":"Bash","input":{"command":"make deploy-staging"}}`)
	cs = mcpStdio(t, dir, doc.MCPServers["signoff"], "--hold", "10ms")
	if got := mcpText(t, cs, "permission_prompt", bash); got != `{"behavior":"allow","updatedInput":{"command":"make deploy-staging"}}` {
		t.Fatalf("Bash after approval = %s", got)
	}
	out := must(t, dir, 0, "--config", cfg, "runs", "--json")
	var runs []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &runs); err != nil || len(runs) != 2 {
		t.Fatalf("%d runs (%v), want 2 (the read, the command):\n%s", len(runs), err, out)
	}
}

// TestMCPServerForAnAgentSDK runs the agent SDK's options of docs/mcp.md:
// the permission-prompt tool they name is the server's, and an agent that
// asks for approval itself sees who may decide.
func TestMCPServerForAnAgentSDK(t *testing.T) {
	dir := t.TempDir()
	mcpDocConfig(t, dir)
	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
		Prompt     string              `json:"permissionPromptToolName"`
	}
	mcpDocJSON(t, "An agent SDK", &doc)
	name, tool, ok := strings.Cut(strings.TrimPrefix(doc.Prompt, "mcp__"), "__")
	if e, found := doc.MCPServers[name]; !ok || !found || e.Type != "stdio" {
		t.Fatalf("permissionPromptToolName %q names no stdio server of %v", doc.Prompt, doc.MCPServers)
	}
	cs := mcpStdio(t, dir, doc.MCPServers[name])
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, tool) || !slices.Contains(names, "request_approval") {
		t.Fatalf("tools %v, want %s and request_approval", names, tool)
	}
	out := mcpText(t, cs, "request_approval", map[string]any{"summary": "deploy",
		"actions": []any{map[string]any{"name": "permission_prompt", "args": map[string]any{"tool_name": "Deploy", "input": map[string]any{}}}}})
	var sub struct {
		Status   string `json:"status"`
		Approval struct {
			Role string `json:"role"`
		} `json:"approval"`
	}
	if err := json.Unmarshal([]byte(out), &sub); err != nil || sub.Status != "waiting_approval" || sub.Approval.Role != "team_lead" {
		t.Fatalf("request_approval = %s, want waiting for team_lead", out)
	}
}

// TestMCPServerRefusesAnUnknownRequester: over stdio the one requester
// must be one the config lets propose.
func TestMCPServerRefusesAnUnknownRequester(t *testing.T) {
	dir := t.TempDir()
	cfg := mcpDocConfig(t, dir)
	code, _, errs := signoff(t, dir, "--config", cfg, "mcp", "server", "--stdio", "--requester", "agent:stranger")
	if code != 2 || !strings.Contains(errs, "holds no role") {
		t.Fatalf("exit %d, stderr %s; want 2 naming the role", code, errs)
	}
}

// TestMCPServerOverHTTP runs the command of docs/mcp.md, "Over HTTP" (on a
// free port): a call without a token is refused with 401.
func TestMCPServerOverHTTP(t *testing.T) {
	dir := t.TempDir()
	cfg := mcpDocConfig(t, dir)
	blocks := blocksOf(docSection(t, "docs/mcp.md", "Over HTTP"), "sh")
	if len(blocks) != 1 {
		t.Fatalf("%d sh blocks", len(blocks))
	}
	args := strings.Fields(strings.TrimSpace(blocks[0]))
	if args[0] != "signoff" || args[len(args)-2] != "--listen" {
		t.Fatalf("command %v", args)
	}
	addr := freeAddr(t)
	args[len(args)-1] = addr
	if args[2] != "signoff.yaml" {
		t.Fatalf("command %v: want --config signoff.yaml", args)
	}
	args[2] = cfg
	// The config of the docs has no token, and over HTTP every call needs one.
	addToken(t, cfg, strings.Repeat("ab", 32))
	cmd, _, _ := child(t, dir, nil, args[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	var res *http.Response
	waitFor(t, "the mcp server to listen", func() bool {
		var err error
		res, err = http.Post("http://"+addr+"/", "application/json", strings.NewReader(`{}`))
		return err == nil
	})
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", res.StatusCode)
	}
}

// freeAddr is a local address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// addToken adds a token of agent:coder (submit, read) to the config at cfg.
func addToken(t *testing.T, cfg, sha256Hex string) {
	t.Helper()
	y, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	y = append(y, []byte("\napi:\n  tokens:\n    - {id: coder, sha256: \""+sha256Hex+"\", requester: agent:coder, scopes: [submit, read]}\n")...)
	if err := os.WriteFile(cfg, y, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTheClaudeCommandOfTheDocs checks the claude command of docs/mcp.md,
// "A coding agent", against the entry beside it: it loads the file the
// entry is said to be in, and names the permission tool by the MCP name
// Claude Code gives it (mcp__<the entry's key>__<the tool>), a tool the
// server started by that entry lists.
func TestTheClaudeCommandOfTheDocs(t *testing.T) {
	blocks := blocksOf(docSection(t, "docs/mcp.md", "A coding agent"), "sh")
	if len(blocks) != 1 {
		t.Fatalf("docs/mcp.md, A coding agent: %d sh blocks, want 1", len(blocks))
	}
	lines := shLines(blocks[0])
	if len(lines) != 1 {
		t.Fatalf("%d commands, want 1", len(lines))
	}
	words := shellWords(t, lines[0].cmd)
	flag := func(name string) string {
		i := slices.Index(words, name)
		if i < 0 || i+1 >= len(words) {
			t.Fatalf("the command %q has no %s", lines[0].cmd, name)
		}
		return words[i+1]
	}
	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	mcpDocJSON(t, "A coding agent", &doc)
	if len(doc.MCPServers) != 1 {
		t.Fatalf("%d entries, want 1", len(doc.MCPServers))
	}
	var key string
	for k := range doc.MCPServers {
		key = k
	}
	if words[0] != "claude" || flag("--mcp-config") != ".mcp.json" || flag("--permission-prompt-tool") != "mcp__"+key+"__permission_prompt" {
		t.Fatalf("the command %q: want claude with --mcp-config .mcp.json and --permission-prompt-tool mcp__%s__permission_prompt", lines[0].cmd, key)
	}
	dir := t.TempDir()
	mcpDocConfig(t, dir)
	tools, err := mcpStdio(t, dir, doc.MCPServers[key]).ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "permission_prompt" }) {
		t.Fatal("the server does not list permission_prompt")
	}
}
