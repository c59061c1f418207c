package app

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/mcpgateway"
)

// nodeFilesystem is the reference filesystem MCP server's entry point,
// installed by npm ci in testdata/mcpfilesystem (pinned by its
// package-lock.json); the test is skipped without it, unless mcpNodeEnv
// says it must be there.
func nodeFilesystem(t *testing.T) (node, server string) {
	t.Helper()
	node, err := exec.LookPath("node")
	server, _ = filepath.Abs(filepath.Join("testdata", "mcpfilesystem", "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js"))
	if _, missing := os.Stat(server); err != nil || missing != nil {
		msg := "the reference filesystem MCP server is not installed: run npm ci in internal/app/testdata/mcpfilesystem (needs node)"
		if os.Getenv(mcpNodeEnv) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node, server
}

// gatewayDocConfig writes the config of docs/mcp.md, "A gateway in front of
// one upstream", into dir, its upstream command replaced by replace (nil:
// as written) and its hold by hold.
func gatewayDocConfig(t *testing.T, dir string, command []string, hold string) string {
	t.Helper()
	blocks := blocksOf(docSection(t, "docs/mcp.md", "A gateway in front of one upstream"), "yaml")
	if len(blocks) != 1 {
		t.Fatalf("docs/mcp.md, A gateway in front of one upstream: %d yaml blocks, want 1", len(blocks))
	}
	y := blocks[0]
	const asWritten = `command: [npx, -y, "@modelcontextprotocol/server-filesystem@2026.8.31", /srv/data]`
	if !strings.Contains(y, asWritten) || !strings.Contains(y, "hold: 50s") {
		t.Fatalf("the config of the docs has no %s and hold: 50s:\n%s", asWritten, y)
	}
	if command != nil {
		y = strings.Replace(y, asWritten, `command: ["`+strings.Join(command, `", "`)+`"]`, 1)
	}
	y = strings.Replace(y, "hold: 50s", "hold: "+hold, 1)
	p := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMCPGatewayConfigOfTheDocsChecks: the gateway's config of the docs is
// a config signoff takes, its rules naming tools the upstream lists.
func TestMCPGatewayConfigOfTheDocsChecks(t *testing.T) {
	dir := t.TempDir()
	cfg := gatewayDocConfig(t, dir, nil, "50s")
	must(t, dir, 0, "--config", cfg, "config", "check")
}

// TestMCPGatewayNeedsUpstreams: without mcp.upstreams there is nothing to
// stand in front of, and the command says so.
func TestMCPGatewayNeedsUpstreams(t *testing.T) {
	dir := t.TempDir()
	cfg := mcpDocConfig(t, dir)
	code, _, errs := signoff(t, dir, "--config", cfg, "mcp", "gateway", "--stdio", "--requester", "agent:coder")
	if code != 2 || !strings.Contains(errs, "no mcp.upstreams") {
		t.Fatalf("exit %d, stderr %s; want 2 naming mcp.upstreams", code, errs)
	}
}

// TestMCPGatewayInFrontOfTheFilesystemServer runs the gateway as the
// coding agent's entry of docs/mcp.md says, in front of the reference
// filesystem server from npm: a read goes through; a gated write waits, is
// approved from another process (which makes the call), and the call made
// again, to a gateway started anew, returns the stored answer without
// writing again; a rejected write never reaches the upstream.
func TestMCPGatewayInFrontOfTheFilesystemServer(t *testing.T) {
	node, server := nodeFilesystem(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "hello.txt"), []byte("hello from disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := gatewayDocConfig(t, dir, []string{node, server, data}, "1s")
	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	mcpDocJSON(t, "A coding agent through the gateway", &doc)
	cs := mcpStdio(t, dir, doc.MCPServers["files"])

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, tl := range tools.Tools {
		listed[tl.Name] = true
	}
	if !listed["files.read_text_file"] || !listed["files.write_file"] {
		t.Fatalf("tools %v, want files.read_text_file and files.write_file", listed)
	}
	if a := gatewayCall(t, cs, "files.read_text_file", map[string]any{"path": filepath.Join(data, "hello.txt")}); a.isError || !strings.Contains(a.text, "hello from disk") {
		t.Fatalf("read = %+v, want the file's text", a)
	}

	out := filepath.Join(data, "out.txt")
	write := map[string]any{"path": out, "content": "approved once"}
	w := gatewayCall(t, cs, "files.write_file", write)
	if w.isError || w.runID == "" || !strings.Contains(w.text, "waiting for approval") {
		t.Fatalf("write = %+v, want waiting with the run id", w)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("the file exists before the approval (%v)", err)
	}
	// The agent goes away, the gateway with it, while the call waits; the
	// approval comes meanwhile from another process, which makes the call.
	cs.Close()
	must(t, dir, 0, "--config", cfg, "approve", w.runID, "--as", "U0LEAD0001")
	cs = mcpStdio(t, dir, doc.MCPServers["files"])
	if b, err := os.ReadFile(out); err != nil || string(b) != "approved once" {
		t.Fatalf("after the approval the file holds %q (%v), want the approved content", b, err)
	}
	// Changed on disk: a second write would undo the change.
	if err := os.WriteFile(out, []byte("changed since"), 0o600); err != nil {
		t.Fatal(err)
	}
	if a := gatewayCall(t, cs, "files.write_file", write); a.isError || !strings.Contains(a.text, "Successfully wrote") {
		t.Fatalf("write again = %+v, want the upstream's stored answer", a)
	}
	if b, _ := os.ReadFile(out); string(b) != "changed since" {
		t.Fatalf("the file holds %q: the upstream was called again", b)
	}

	no := filepath.Join(data, "no.txt")
	r := gatewayCall(t, cs, "files.write_file", map[string]any{"path": no, "content": "never"})
	must(t, dir, exitEnded, "--config", cfg, "reject", r.runID, "--as", "U0LEAD0001", "--reason", "not this file")
	if a := gatewayCall(t, cs, "files.write_file", map[string]any{"path": no, "content": "never"}); !a.isError || !strings.Contains(a.text, "not this file") {
		t.Fatalf("rejected write again = %+v, want isError with the reason", a)
	}
	if _, err := os.Stat(no); !os.IsNotExist(err) {
		t.Fatalf("the rejected file exists (%v)", err)
	}
}

type gatewayAnswer struct {
	text    string
	isError bool
	runID   string
}

func gatewayCall(t *testing.T, cs *mcp.ClientSession, tool string, args any) gatewayAnswer {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var a gatewayAnswer
	for _, c := range res.Content {
		if txt, ok := c.(*mcp.TextContent); ok {
			a.text += txt.Text
		}
	}
	a.isError = res.IsError
	a.runID, _ = res.Meta["signoff/run_id"].(string)
	return a
}

// gatewayChild starts the gateway as the coding agent's entry of docs/mcp.md
// says, on dir's store (the entry's --db is dir's SQLite file; on
// PostgreSQL the flags that follow it name dir's schema and keys), with env
// added, and returns the client and the process, for a test to kill.
func gatewayChild(t *testing.T, dir string, env ...string) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	mcpDocJSON(t, "A coding agent through the gateway", &doc)
	e := doc.MCPServers["files"]
	if e.Command != "signoff" {
		t.Fatalf("command %q, want signoff", e.Command)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := slices.Clone(e.Args)
	if _, ok := pgStores.Load(dir); ok {
		args = append(args, storeArgs(dir)...)
	}
	cmd := exec.Command(self, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), asMainEnv+"=1"), env...)
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "docs-test", Version: "1"}, nil).
		Connect(t.Context(), &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cmd
}

// gatewayStore is a dir on one store of onEachStore with the gateway's
// config of the docs in front of the reference filesystem server, whose
// data folder it returns.
func gatewayStore(t *testing.T, newDir func(*testing.T) string) (dir, cfg, data string) {
	t.Helper()
	node, server := nodeFilesystem(t)
	dir = newDir(t)
	data = filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir, gatewayDocConfig(t, dir, []string{node, server, data}, "30s"), data
}

// TestMCPGatewayCrashAfterTheCallNeedsAPerson: the process that carries out
// an approved call dies after the upstream wrote the file and before the
// answer was stored. MCP has no idempotency key to ask the upstream with, so
// that the run needs a person: the call made again says so, and the
// upstream is never called a second time. On each store.
func TestMCPGatewayCrashAfterTheCallNeedsAPerson(t *testing.T) {
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		dir, cfg, data := gatewayStore(t, newDir)
		// A hold that passes at once, and a lease that lapses soon, so that
		// the gateway takes the dead process's run over within the test.
		if err := os.WriteFile(cfg, []byte(strings.Replace(readFile(t, cfg), "hold: 30s", "hold: 1s", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		cs, _ := gatewayChild(t, dir, "SIGNOFF_LEASE_TTL=4s")

		out := filepath.Join(data, "out.txt")
		write := map[string]any{"path": out, "content": "written once"}
		w := gatewayCall(t, cs, "files.write_file", write)
		if w.runID == "" {
			t.Fatalf("write = %+v, want waiting with the run id", w)
		}
		crash(t, dir, "after-effect", "--config", cfg, "approve", w.runID, "--as", "U0LEAD0001")
		if b, err := os.ReadFile(out); err != nil || string(b) != "written once" {
			t.Fatalf("after the crash the file holds %q (%v), want the approved content", b, err)
		}
		if err := os.WriteFile(out, []byte("changed since"), 0o600); err != nil {
			t.Fatal(err)
		}
		a := gatewayCall(t, cs, "files.write_file", write)
		if !a.isError || !strings.Contains(a.text, "needs a person") || !strings.Contains(a.text, "no idempotency key") {
			t.Fatalf("write again = %+v, want isError saying a person must look", a)
		}
		if b, _ := os.ReadFile(out); string(b) != "changed since" {
			t.Fatalf("the file holds %q: the upstream was called again", b)
		}
		if st := must(t, dir, exitAttention, "--config", cfg, "show", w.runID); !strings.Contains(st, "NEEDS_ATTENTION") {
			t.Fatalf("show = %s, want needs attention", st)
		}
	})
}

// TestMCPGatewayCrashWhileACallWaits: the gateway is killed (SIGKILL)
// while it holds a gated call; the approval comes meanwhile from another
// process, which makes the call once; the agent's same call, to a gateway
// started anew, gets the stored answer, and the upstream is not called
// again. Then the approving process dies after its decision committed and
// before it made the call, while a gateway holds the next call: the held
// call is answered by the approval, carried out once. On each store.
func TestMCPGatewayCrashWhileACallWaits(t *testing.T) {
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		dir, cfg, data := gatewayStore(t, newDir)
		cs, cmd := gatewayChild(t, dir)

		out := filepath.Join(data, "out.txt")
		write := map[string]any{"path": out, "content": "approved once"}
		held := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "files.write_file", Arguments: write})
			held <- err
		}()
		id := waitingRun(t, dir, cfg, "")
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := <-held; err == nil {
			t.Fatal("the held call was answered by a gateway that was killed")
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Fatalf("the file exists before the approval (%v)", err)
		}
		must(t, dir, 0, "--config", cfg, "approve", id, "--as", "U0LEAD0001")
		if b, err := os.ReadFile(out); err != nil || string(b) != "approved once" {
			t.Fatalf("after the approval the file holds %q (%v), want the approved content", b, err)
		}
		// Changed on disk: a second write would undo the change.
		if err := os.WriteFile(out, []byte("changed since"), 0o600); err != nil {
			t.Fatal(err)
		}
		cs, _ = gatewayChild(t, dir)
		if a := gatewayCall(t, cs, "files.write_file", write); a.isError || !strings.Contains(a.text, "Successfully wrote") {
			t.Fatalf("the same call to a new gateway = %+v, want the upstream's stored answer", a)
		}
		if b, _ := os.ReadFile(out); string(b) != "changed since" {
			t.Fatalf("the file holds %q: the upstream was called again", b)
		}

		next := filepath.Join(data, "next.txt")
		write = map[string]any{"path": next, "content": "held, then approved"}
		answered := make(chan gatewayAnswer, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "files.write_file", Arguments: write})
			a := gatewayAnswer{isError: err != nil}
			if err == nil {
				a.isError = res.IsError
				for _, c := range res.Content {
					if txt, ok := c.(*mcp.TextContent); ok {
						a.text += txt.Text
					}
				}
			}
			answered <- a
		}()
		second := waitingRun(t, dir, cfg, id)
		crash(t, dir, "after-decision-commit", "--config", cfg, "approve", second, "--as", "U0LEAD0001")
		if a := <-answered; a.isError || !strings.Contains(a.text, "Successfully wrote") {
			t.Fatalf("the held call = %+v, want the upstream's answer once approved", a)
		}
		if b, err := os.ReadFile(next); err != nil || string(b) != "held, then approved" {
			t.Fatalf("the file holds %q (%v), want the approved content", b, err)
		}
		if st := must(t, dir, exitDone, "--config", cfg, "show", second); !strings.Contains(st, "DONE") {
			t.Fatalf("show = %s, want done", st)
		}
	})
}

// waitingRun waits for a run other than not to wait for approval on dir's
// store, and returns its id.
func waitingRun(t *testing.T, dir, cfg, not string) string {
	t.Helper()
	var id string
	waitFor(t, "the call's run to wait for approval", func() bool {
		var runs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal([]byte(must(t, dir, 0, "--config", cfg, "runs", "--json")), &runs); err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.ID != not && r.Status == "waiting_approval" {
				id = r.ID
				return true
			}
		}
		return false
	})
	return id
}

// TestMCPGatewayWithTheTypeScriptSDK: a coding agent's side written by no
// one here (the official TypeScript SDK, run by node) starts the gateway as
// the entry of docs/mcp.md says, in front of the reference filesystem
// server: its read goes through, its write waits, is approved from another
// process, and the same write again gets the upstream's answer; the file
// was written once.
func TestMCPGatewayWithTheTypeScriptSDK(t *testing.T) {
	node := nodeSDK(t)
	_, server := nodeFilesystem(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "hello.txt"), []byte("hello from disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := gatewayDocConfig(t, dir, []string{node, server, data}, "1s")
	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	mcpDocJSON(t, "A coding agent through the gateway", &doc)
	entry := selfEntry(t, dir, doc.MCPServers["files"].Args)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd, stdin, stdout := startNodeClient(ctx, t, node, "gateway.mjs", string(entry), data)
	lines := bufio.NewScanner(stdout)
	next := func(step string, v any) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the client ended before %s: %v", step, lines.Err())
		}
		var l struct {
			Step  string          `json:"step"`
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil || l.Step != step || json.Unmarshal(l.Value, v) != nil {
			t.Fatalf("line %s, want step %s", lines.Text(), step)
		}
	}
	type result struct {
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
		Run     string `json:"run"`
	}
	var tools []string
	next("tools", &tools)
	if !slices.Contains(tools, "files.write_file") {
		t.Fatalf("tools %v, want files.write_file", tools)
	}
	var read, write, again result
	if next("read", &read); read.IsError || !strings.Contains(read.Text, "hello from disk") {
		t.Fatalf("read = %+v", read)
	}
	if next("write", &write); write.IsError || write.Run == "" || !strings.Contains(write.Text, "waiting for approval") {
		t.Fatalf("write = %+v, want waiting with the run id", write)
	}
	must(t, dir, 0, "--config", cfg, "approve", write.Run, "--as", "U0LEAD0001")
	out := filepath.Join(data, "out.txt")
	if err := os.WriteFile(out, []byte("changed since"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write([]byte("approved\n")); err != nil {
		t.Fatal(err)
	}
	if next("write-again", &again); again.IsError || !strings.Contains(again.Text, "Successfully wrote") {
		t.Fatalf("write again = %+v, want the upstream's stored answer", again)
	}
	if b, _ := os.ReadFile(out); string(b) != "changed since" {
		t.Fatalf("the file holds %q: the upstream was called again", b)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node: %v", err)
	}
}

// TestMCPGatewayTasksOverTheTypeScriptTransport: a client of the Tasks
// extension, speaking the 2026-07-28 revision's JSON-RPC over the
// TypeScript SDK's stdio transport (the SDK's own task methods are those
// of 2025-11-25), starts the gateway as the entry of docs/mcp.md says: its
// write answers a task at once, whose id is the run; tasks/get says it
// works until the approval from another process, then completes with the
// upstream's answer; the file was written once.
func TestMCPGatewayTasksOverTheTypeScriptTransport(t *testing.T) {
	node := nodeSDK(t)
	_, server := nodeFilesystem(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := gatewayDocConfig(t, dir, []string{node, server, data}, "1s")
	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	mcpDocJSON(t, "A coding agent through the gateway", &doc)
	entry := selfEntry(t, dir, doc.MCPServers["files"].Args)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd, stdin, stdout := startNodeClient(ctx, t, node, "tasks.mjs", string(entry), data)
	lines := bufio.NewScanner(stdout)
	type task struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
		Status     string `json:"status"`
		Message    string `json:"statusMessage"`
		TTLMs      *int64 `json:"ttlMs"`
		Result     *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	var raw map[string]any // the last answer, as sent
	next := func(step string) task {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the client ended before %s: %v", step, lines.Err())
		}
		var l struct {
			Step  string `json:"step"`
			Value task   `json:"value"`
		}
		var r struct {
			Value map[string]any `json:"value"`
		}
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil || l.Step != step || json.Unmarshal(lines.Bytes(), &r) != nil {
			t.Fatalf("line %s, want step %s", lines.Text(), step)
		}
		raw = r.Value
		return l.Value
	}
	created := next("task")
	// The task docs/mcp.md shows has the fields the gateway sends.
	var shown map[string]any
	mcpDocJSON(t, "Tasks", &shown)
	for k := range shown {
		if _, ok := raw[k]; !ok {
			t.Errorf("docs/mcp.md, Tasks, shows %s, which the task (%v) has not", k, raw)
		}
	}
	if created.ResultType != "task" || !strings.HasPrefix(created.TaskID, "run_") || created.Status != "working" ||
		created.TTLMs == nil || *created.TTLMs < 3599_000 || *created.TTLMs > 3600_000 || !strings.Contains(created.Message, "team_lead may decide") {
		t.Fatalf("the write answered %+v, want a working task for its run, an hour to live, saying who decides", created)
	}
	if got := next("get"); got.Status != "working" || got.TaskID != created.TaskID {
		t.Fatalf("tasks/get = %+v, want working", got)
	}
	must(t, dir, 0, "--config", cfg, "approve", created.TaskID, "--as", "U0LEAD0001")
	out := filepath.Join(data, "out.txt")
	if err := os.WriteFile(out, []byte("changed since"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write([]byte("approved\n")); err != nil {
		t.Fatal(err)
	}
	got := next("get-after")
	if got.Status != "completed" || got.Result == nil || got.Result.IsError || len(got.Result.Content) == 0 ||
		!strings.Contains(got.Result.Content[0].Text, "Successfully wrote") {
		t.Fatalf("tasks/get after the approval = %+v, want completed with the upstream's stored answer", got)
	}
	if b, _ := os.ReadFile(out); string(b) != "changed since" {
		t.Fatalf("the file holds %q: the upstream was called again", b)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node: %v", err)
	}
}

// TestMCPGatewayOverHTTP runs the gateway on --listen in front of an
// upstream over streamable HTTP whose Authorization header comes from the
// environment, as mcp.upstreams' headers_env says: a request without a
// token of mcp.identities is refused; a call with one reaches the upstream
// with the header, and the header's value is nowhere in the run, the audit
// or the gateway's output.
func TestMCPGatewayOverHTTP(t *testing.T) {
	const upstreamAuth = "Bearer up-s3cret-value"
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	var seen atomic.Value
	mcp.AddTool(srv, &mcp.Tool{Name: "read_text_file"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Path string `json:"path"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "contents of " + in.Path}}}, nil, nil
	})
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != upstreamAuth {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		mh.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)

	dir := t.TempDir()
	cfg := gatewayDocConfig(t, dir, nil, "1s")
	y := strings.Replace(string(mustRead(t, cfg)), `{name: files, command: [npx, -y, "@modelcontextprotocol/server-filesystem@2026.8.31", /srv/data]}`,
		`{name: files, url: "`+up.URL+`", headers_env: {Authorization: FILES_MCP_AUTH}}`, 1)
	// The identities of the docs, added under mcp: as they say, with the
	// hash of this test's token.
	sec := docSection(t, "docs/mcp.md", "The gateway over HTTP")
	ids := blocksOf(sec, "yaml")
	hash := regexp.MustCompile(`token_sha256: ([0-9a-f]{64})`)
	if len(ids) != 1 || !strings.HasPrefix(ids[0], "  identities:") || !hash.MatchString(ids[0]) || !strings.HasSuffix(strings.TrimSpace(y), "hold: 1s") {
		t.Fatalf("docs/mcp.md, The gateway over HTTP: want one yaml block of identities to add under mcp:, got %q", ids)
	}
	sum := sha256.Sum256([]byte("sk_gateway_coder"))
	y += hash.ReplaceAllString(ids[0], "token_sha256: "+hex.EncodeToString(sum[:]))
	if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	must(t, dir, 0, "--config", cfg, "config", "check")
	// The command of the docs, on a free port and this test's config.
	sh := blocksOf(sec, "sh")
	if len(sh) != 1 {
		t.Fatalf("docs/mcp.md, The gateway over HTTP: %d sh blocks, want 1", len(sh))
	}
	args := strings.Fields(strings.TrimSpace(sh[0]))
	if !slices.Equal(args[:4], []string{"signoff", "--config", "signoff.yaml", "mcp"}) || args[len(args)-2] != "--listen" {
		t.Fatalf("command %v", args)
	}
	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	mcpDocJSON(t, "The gateway over HTTP", &doc)
	entry := doc.MCPServers["files"]
	if entry.Type != "http" || entry.URL != "http://"+args[len(args)-1]+"/" {
		t.Fatalf("the entry of the docs %+v, want type http at the address the command listens on", entry)
	}
	addr, documented := freeAddr(t), args[len(args)-1]
	args[2], args[len(args)-1] = cfg, addr
	cmd, _, errb := child(t, dir, []string{"FILES_MCP_AUTH=" + upstreamAuth}, args[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	var res *http.Response
	waitFor(t, "the gateway to listen", func() bool {
		var err error
		res, err = http.Post("http://"+addr+"/", "application/json", strings.NewReader(`{}`))
		return err == nil
	})
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a token: %d, want 401", res.StatusCode)
	}
	// The entry's headers, as Claude Code expands them from the environment.
	headers := map[string]string{}
	for k, v := range entry.Headers {
		headers[k] = os.Expand(v, func(name string) string {
			if name != "SIGNOFF_GATEWAY_TOKEN" {
				t.Fatalf("the entry's headers name $%s", name)
			}
			return "sk_gateway_coder"
		})
	}
	hc := &http.Client{Transport: headerRoundTripper{headers}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: strings.Replace(entry.URL, documented, addr, 1), HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if a := gatewayCall(t, cs, "files.read_text_file", map[string]any{"path": "/notes.txt"}); a.isError || a.text != "contents of /notes.txt" {
		t.Fatalf("read = %+v, want the upstream's answer", a)
	}
	if got, _ := seen.Load().(string); got != upstreamAuth {
		t.Fatalf("the upstream got Authorization %q, want the value of FILES_MCP_AUTH", got)
	}
	cs.Close()
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait() // its output is complete
	runs := must(t, dir, 0, "--config", cfg, "runs", "--json")
	audit := must(t, dir, 0, "--config", cfg, "audit", "--json")
	if !strings.Contains(runs, "agent:coder") {
		t.Fatalf("runs = %s, want the read, agent:coder's", runs)
	}
	for what, s := range map[string]string{"runs": runs, "audit": audit, "the gateway's output": errb.String(), "the config": y} {
		if strings.Contains(s, "s3cret") {
			t.Errorf("the upstream's header value is in %s", what)
		}
	}
}

type headerRoundTripper struct{ headers map[string]string }

func (h headerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPGatewayForTheOpenAIAgentsSDK checks the OpenAI Agents SDK's code of
// docs/mcp.md against the gateway: it reaches the address of the docs'
// command, and its client waits longer than the gateway holds a call.
func TestMCPGatewayForTheOpenAIAgentsSDK(t *testing.T) {
	py := blocksOf(docSection(t, "docs/mcp.md", "An agent SDK through the gateway"), "python")
	if len(py) != 1 {
		t.Fatalf("docs/mcp.md, An agent SDK through the gateway: %d python blocks, want 1", len(py))
	}
	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	mcpDocJSON(t, "The gateway over HTTP", &doc)
	if want := `"url": "` + doc.MCPServers["files"].URL + `"`; !strings.Contains(py[0], want) {
		t.Errorf("the SDK's params do not hold %s:\n%s", want, py[0])
	}
	if !strings.Contains(py[0], `"Authorization": "Bearer " + os.environ["SIGNOFF_GATEWAY_TOKEN"]`) {
		t.Errorf("the SDK's params do not send the token of the coding agent's entry:\n%s", py[0])
	}
	m := regexp.MustCompile(`client_session_timeout_seconds=(\d+)`).FindStringSubmatch(py[0])
	if m == nil {
		t.Fatalf("the SDK's code sets no client_session_timeout_seconds (its default, 5 s, is shorter than a hold):\n%s", py[0])
	}
	if secs, _ := strconv.Atoi(m[1]); time.Duration(secs)*time.Second <= mcpgateway.MaxHold {
		t.Errorf("client_session_timeout_seconds=%d: want more than the longest hold, %s", secs, mcpgateway.MaxHold)
	}
}
