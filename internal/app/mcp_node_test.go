package app

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// mcpNodeEnv, when set (as .ci/run sets it, after npm ci), makes the
// TypeScript SDK's end-to-end test required instead of skipped.
const mcpNodeEnv = "SIGNOFF_TEST_MCP_NODE"

// nodeClient is the directory of the TypeScript client, its packages pinned
// by package-lock.json.
var nodeClient = filepath.Join("testdata", "mcpclient")

// TestMCPServerWithTheTypeScriptSDK is a coding agent's side written by no
// one here: the official TypeScript SDK, run by node, starts signoff mcp
// server as the mcpServers entry of docs/mcp.md says and speaks to it over
// stdio. A read is allowed at once; a command is denied as waiting, approved
// from another process, and the same call again is allowed from the same
// run; a prompt without input is a tool error.
func TestMCPServerWithTheTypeScriptSDK(t *testing.T) {
	node := nodeSDK(t)
	dir := t.TempDir()
	cfg := mcpDocConfig(t, dir)
	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	mcpDocJSON(t, "A coding agent", &doc)
	entry := selfEntry(t, dir, append(slices.Clone(doc.MCPServers["signoff"].Args), "--hold", "10ms"))
	nodeAgent(t, node, dir, cfg, entry)
}

// selfEntry is an mcpServers entry (JSON) that starts this test binary as
// signoff with args, in dir: what a client's config would say.
func selfEntry(t *testing.T, dir string, args []string) []byte {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	entry, err := json.Marshal(map[string]any{"command": self, "args": args, "cwd": dir,
		"env": map[string]string{asMainEnv: "1", "PATH": os.Getenv("PATH"), "HOME": dir}})
	if err != nil {
		t.Fatal(err)
	}
	return entry
}

// startNodeClient runs script of the TypeScript client folder with node,
// its stdin and stdout piped to the test, its stderr to the test's.
func startNodeClient(ctx context.Context, t *testing.T, node, script string, args ...string) (*exec.Cmd, io.WriteCloser, io.Reader) {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = nodeClient
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, stdout
}

// nodeSDK is node, with the TypeScript SDK installed beside the client; the
// test is skipped without them, unless mcpNodeEnv says they must be there.
func nodeSDK(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	_, missing := os.Stat(filepath.Join(nodeClient, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	if err != nil || missing != nil {
		msg := "the TypeScript MCP SDK is not installed: run npm ci in internal/app/" + filepath.ToSlash(nodeClient) + " (needs node)"
		if os.Getenv(mcpNodeEnv) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node
}

// nodeAgent runs the client on the server entry: a read is allowed at once;
// a command is denied as waiting, approved from another process, and the
// same call again is allowed from the same run; a prompt without input is a
// tool error.
func nodeAgent(t *testing.T, node, dir, cfg string, entry []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd, stdin, stdout := startNodeClient(ctx, t, node, "client.mjs", string(entry))
	lines := bufio.NewScanner(stdout)
	next := func(step string) json.RawMessage {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the client ended before %s: %v", step, lines.Err())
		}
		var l struct {
			Step  string          `json:"step"`
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil || l.Step != step {
			t.Fatalf("line %s, want step %s", lines.Text(), step)
		}
		return l.Value
	}
	t.Logf("server as the client sees it: %s", next("server"))
	var tools []string
	if err := json.Unmarshal(next("tools"), &tools); err != nil || !slices.Contains(tools, "permission_prompt") {
		t.Fatalf("tools %v (%v)", tools, err)
	}
	if got := string(next("read")); got != `{"isError":false,"answer":{"behavior":"allow","updatedInput":{"file_path":"README.md"}}}` {
		t.Fatalf("read = %s", got)
	}
	bash := string(next("bash"))
	m := regexp.MustCompile(`waiting for approval in Slack, run (run_[0-9a-z]+):`).FindStringSubmatch(bash)
	if m == nil {
		t.Fatalf("bash = %s, want deny as waiting", bash)
	}
	must(t, dir, 0, "--config", cfg, "approve", m[1], "--as", "U0LEAD0001")
	if _, err := stdin.Write([]byte("approved\n")); err != nil {
		t.Fatal(err)
	}
	if got := string(next("bash-again")); got != `{"isError":false,"answer":{"behavior":"allow","updatedInput":{"command":"make deploy","description":"deploy"}}}` {
		t.Fatalf("bash again = %s", got)
	}
	if got := string(next("bad")); !regexp.MustCompile(`"isError":true,.*input: required, a JSON object`).MatchString(got) {
		t.Fatalf("bad = %s, want a tool error naming input", got)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node: %v", err)
	}
	out := must(t, dir, 0, "--config", cfg, "runs", "--json")
	var runs []struct{ ID string }
	if err := json.Unmarshal([]byte(out), &runs); err != nil || len(runs) != 2 {
		t.Fatalf("%d runs (%v), want 2: the retry attached to its run", len(runs), err)
	}
}

// TestMCPServerOverHTTPWithTheTypeScriptSDK is the same agent over
// streamable HTTP, reaching the server by the entry of docs/mcp.md, "Over
// HTTP", with its token.
func TestMCPServerOverHTTPWithTheTypeScriptSDK(t *testing.T) {
	node := nodeSDK(t)
	dir := t.TempDir()
	cfg := mcpDocConfig(t, dir)
	const secret = "sk_mcp_end_to_end"
	sum := sha256.Sum256([]byte(secret))
	addToken(t, cfg, hex.EncodeToString(sum[:]))
	addr := freeAddr(t)
	cmd, _, _ := child(t, dir, nil, "--config", cfg, "mcp", "server", "--listen", addr, "--hold", "10ms")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	waitFor(t, "the mcp server to listen", func() bool {
		res, err := http.Get("http://" + addr + "/")
		if err == nil {
			res.Body.Close()
		}
		return err == nil
	})
	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	mcpDocJSON(t, "Over HTTP", &doc)
	e := doc.MCPServers["signoff"]
	if e.Type != "http" || !strings.Contains(e.URL, "127.0.0.1:8766") || e.Headers["Authorization"] != "Bearer ${SIGNOFF_MCP_TOKEN}" {
		t.Fatalf("the entry %+v", e)
	}
	entry, _ := json.Marshal(map[string]any{"url": strings.Replace(e.URL, "127.0.0.1:8766", addr, 1),
		"headers": map[string]string{"Authorization": "Bearer " + secret}})
	nodeAgent(t, node, dir, cfg, entry)
}
