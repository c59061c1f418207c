package app

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// slackGateway is the whole path of a gated MCP call, each part a real
// process: the TypeScript SDK's agent (testdata/mcpclient/steps.mjs,
// driven a step at a time) starts the gateway as the entry of docs/mcp.md
// says, in front of the reference filesystem server; `signoff serve`, on
// the same store, posts the approval to a fake Slack Web API and takes
// the clicks Slack would send it, signed as Slack signs them.
type slackGateway struct {
	dir, cfg, data string
	slack          *fakeslack.Server
	serve          string // serve's address
	stdin          io.WriteCloser
	lines          chan tsStep
	seen           map[string]json.RawMessage // step/id → value, read but not yet asked for
}

// tsStep is one line of steps.mjs.
type tsStep struct {
	Step  string          `json:"step"`
	ID    string          `json:"id"`
	Value json.RawMessage `json:"value"`
}

// tsAnswer is what the agent got of a call: the gateway's answer, or, for a
// call cut off, why the SDK gave up on it.
type tsAnswer struct {
	IsError bool   `json:"isError"`
	Text    string `json:"text"`
	Run     string `json:"run"`
	Failed  string `json:"failed"`
}

// startSlackGateway starts serve with a fake Slack and the agent on a dir
// of newDir's store, with the gateway's config of the docs (a hold of 30s)
// and its slack section; the agent is not connected yet.
func startSlackGateway(t *testing.T, newDir func(*testing.T) string) *slackGateway {
	t.Helper()
	node := nodeSDK(t)
	dir, cfg, data := gatewayStore(t, newDir)
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	if err := os.WriteFile(cfg, []byte(readFile(t, cfg)+slackSection(fs)), 0o600); err != nil {
		t.Fatal(err)
	}
	// A lease long enough for the upstream's call.
	addr := startServeChild(t, dir, cfg, fs, "SIGNOFF_LEASE_TTL=10s").addr(t)

	var doc struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	mcpDocJSON(t, "A coding agent through the gateway", &doc)
	args := slices.Clone(doc.MCPServers["files"].Args)
	if _, ok := pgStores.Load(dir); ok {
		args = append(args, storeArgs(dir)...)
	}
	entry := selfEntry(t, dir, args)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd, stdin, stdout := startNodeClient(ctx, t, node, "steps.mjs", string(entry))
	g := &slackGateway{dir: dir, cfg: cfg, data: data, slack: fs, serve: addr, stdin: stdin,
		lines: make(chan tsStep), seen: map[string]json.RawMessage{}}
	go func() {
		defer close(g.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l tsStep
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				q, _ := json.Marshal(sc.Text())
				l = tsStep{Step: "unreadable", Value: q}
			}
			g.lines <- l
		}
	}()
	t.Cleanup(func() {
		defer cancel()
		stdin.Close()
		for range g.lines { // what the agent says as it closes
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("the agent (node steps.mjs): %v", err)
		}
	})
	return g
}

// do sends the agent one command.
func (g *slackGateway) do(t *testing.T, cmd map[string]any) {
	t.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.stdin.Write(append(b, '\n')); err != nil {
		t.Fatalf("the agent takes no more commands: %v", err)
	}
}

// await is the value of the agent's line of step and id, once it said it;
// lines of other steps said meanwhile are kept for later.
func (g *slackGateway) await(t *testing.T, step, id string) json.RawMessage {
	t.Helper()
	key := step + "/" + id
	deadline := time.After(time.Minute)
	for {
		if v, ok := g.seen[key]; ok {
			delete(g.seen, key)
			return v
		}
		select {
		case l, ok := <-g.lines:
			if !ok {
				t.Fatalf("the agent ended before %s", key)
			}
			if l.Step == "unreadable" {
				t.Fatalf("the agent said %s", l.Value)
			}
			g.seen[l.Step+"/"+l.ID] = l.Value
		case <-deadline:
			t.Fatalf("timed out waiting for the agent's %s", key)
		}
	}
}

// connect makes the agent start a gateway anew and connect to it; it
// returns the gateway's process id.
func (g *slackGateway) connect(t *testing.T) int {
	t.Helper()
	g.do(t, map[string]any{"do": "connect"})
	var c struct {
		PID   int      `json:"pid"`
		Tools []string `json:"tools"`
	}
	if err := json.Unmarshal(g.await(t, "connected", ""), &c); err != nil || c.PID == 0 {
		t.Fatalf("connected: %+v (%v), want the gateway's pid", c, err)
	}
	if !slices.Contains(c.Tools, "files.write_file") || !slices.Contains(c.Tools, "files.read_text_file") {
		t.Fatalf("tools %v, want the upstream's, named after it", c.Tools)
	}
	return c.PID
}

// call makes the agent call a tool without waiting for its answer.
func (g *slackGateway) call(t *testing.T, id, tool string, args map[string]any) {
	t.Helper()
	g.do(t, map[string]any{"do": "call", "id": id, "tool": tool, "args": args})
}

// answer is what the agent got of its call id.
func (g *slackGateway) answer(t *testing.T, id string) tsAnswer {
	t.Helper()
	var a tsAnswer
	if v := g.await(t, "answer", id); json.Unmarshal(v, &a) != nil {
		t.Fatalf("answer %s: %s", id, v)
	}
	return a
}

// run is the run as `show --json` prints it.
func (g *slackGateway) run(t *testing.T, id string) workflow.RunView {
	t.Helper()
	_, out, errs := signoff(t, g.dir, "--config", g.cfg, "show", id, "--json")
	var v workflow.RunView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("show %s --json: %v\n%s%s", id, err, out, errs)
	}
	return v
}

// runs are every run of the store.
func (g *slackGateway) runs(t *testing.T) []workflow.RunView {
	t.Helper()
	var vs []workflow.RunView
	if out := must(t, g.dir, 0, "--config", g.cfg, "runs", "--json"); json.Unmarshal([]byte(out), &vs) != nil {
		t.Fatalf("runs --json: %s", out)
	}
	return vs
}

// posted waits for the run's approval message in Slack, its ts stored on
// the run's request, and returns the run as the message shows it.
func (g *slackGateway) posted(t *testing.T, id string) *workflow.RunView {
	t.Helper()
	var v workflow.RunView
	waitFor(t, "the approval message of "+id, func() bool {
		for _, m := range g.slack.Posts() {
			if strings.Contains(m.Blocks, id) {
				v = g.run(t, id)
				return len(v.Requests) == 1 && v.Requests[0].MessageTS == m.TS
			}
		}
		return false
	})
	return &v
}

// postsOf counts the messages posted in the channel (not in a thread)
// that name the run.
func (g *slackGateway) postsOf(id string) int {
	n := 0
	for _, m := range g.slack.Posts() {
		if strings.Contains(m.Blocks, id) {
			n++
		}
	}
	return n
}

// approve sends serve a team lead's click on Approve of the run's message,
// signed as Slack signs it.
func (g *slackGateway) approve(t *testing.T, id string) {
	t.Helper()
	g.interact(t, "block_actions_approve.json", g.posted(t, id), "")
}

// reject sends serve a team lead's click on Reject of the run's message,
// then the modal it opens submitted with reason, each signed.
func (g *slackGateway) reject(t *testing.T, id, reason string) {
	t.Helper()
	v := g.posted(t, id)
	g.interact(t, "block_actions_reject.json", v, "")
	g.interact(t, "view_submission_reject.json", v, reason)
}

func (g *slackGateway) interact(t *testing.T, fixture string, v *workflow.RunView, reason string) {
	t.Helper()
	form := interaction(readSlackFixture(t, fixture), v, lead1, reason)
	if a := sendSigned(t, http.DefaultClient, "serve", g.serve, signNow("/slack/interactions", form)); a.status != http.StatusOK || a.body != "" {
		t.Fatalf("%s answered %d %q, want 200 and nothing to show", fixture, a.status, a.body)
	}
}

// fileHolds fails unless the file holds want.
func fileHolds(t *testing.T, path, want, when string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != want {
		t.Fatalf("%s the file holds %q (%v), want %q", when, b, err, want)
	}
}

// noFile fails if the file exists.
func noFile(t *testing.T, path, when string) {
	t.Helper()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("%s the file exists (%v)", when, err)
	}
}

// TestMCPGatewayWithTheTypeScriptSDKApprovedInSlack: the agent's read goes
// through; its write is held, waits for a team lead, who approves it with a
// click in Slack; the held call gets the upstream's answer, the file was
// written, and the same call again gets the stored answer without writing
// again. One message was posted. On each store.
func TestMCPGatewayWithTheTypeScriptSDKApprovedInSlack(t *testing.T) {
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		g := startSlackGateway(t, newDir)
		if err := os.WriteFile(filepath.Join(g.data, "hello.txt"), []byte("hello from disk"), 0o600); err != nil {
			t.Fatal(err)
		}
		g.connect(t)
		g.call(t, "read", "files.read_text_file", map[string]any{"path": filepath.Join(g.data, "hello.txt")})
		if a := g.answer(t, "read"); a.IsError || !strings.Contains(a.Text, "hello from disk") {
			t.Fatalf("read = %+v, want the file's text", a)
		}

		out := filepath.Join(g.data, "out.txt")
		write := map[string]any{"path": out, "content": "approved in slack"}
		g.call(t, "write", "files.write_file", write)
		id := waitingRun(t, g.dir, g.cfg, "")
		noFile(t, out, "before the approval")
		g.approve(t, id)
		if a := g.answer(t, "write"); a.IsError || !strings.Contains(a.Text, "Successfully wrote") {
			t.Fatalf("the held write = %+v, want the upstream's answer once approved", a)
		}
		fileHolds(t, out, "approved in slack", "after the approval")
		if v := g.run(t, id); v.Status != record.StatusDone {
			t.Fatalf("run %s is %s, want done", id, v.Status)
		}

		// Changed on disk: a second write would undo the change.
		if err := os.WriteFile(out, []byte("changed since"), 0o600); err != nil {
			t.Fatal(err)
		}
		g.call(t, "again", "files.write_file", map[string]any{"content": "approved in slack", "path": out})
		if a := g.answer(t, "again"); a.IsError || !strings.Contains(a.Text, "Successfully wrote") {
			t.Fatalf("the same write again = %+v, want the stored answer", a)
		}
		fileHolds(t, out, "changed since", "after the same write again")
		if n := len(g.slack.Posts()); n != 1 || g.postsOf(id) != 1 {
			t.Fatalf("%d messages posted, want the one of %s", n, id)
		}
	})
}

// TestMCPGatewayWithTheTypeScriptSDKRejectedInSlack: a team lead rejects
// the held write in Slack with a reason; the held call and the same call
// made again are tool errors that give the reason, and the upstream never
// wrote the file. On each store.
func TestMCPGatewayWithTheTypeScriptSDKRejectedInSlack(t *testing.T) {
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		g := startSlackGateway(t, newDir)
		g.connect(t)
		no := filepath.Join(g.data, "no.txt")
		write := map[string]any{"path": no, "content": "never"}
		g.call(t, "write", "files.write_file", write)
		id := waitingRun(t, g.dir, g.cfg, "")
		g.reject(t, id, "not this file")
		if a := g.answer(t, "write"); !a.IsError || !strings.Contains(a.Text, "not this file") || !strings.Contains(a.Text, "not run") {
			t.Fatalf("the held write = %+v, want isError with the reason", a)
		}
		g.call(t, "again", "files.write_file", write)
		if a := g.answer(t, "again"); !a.IsError || !strings.Contains(a.Text, "not this file") {
			t.Fatalf("the same write again = %+v, want isError with the reason", a)
		}
		noFile(t, no, "after the rejection")
		if v := g.run(t, id); v.Status != record.StatusRejected {
			t.Fatalf("run %s is %s, want rejected", id, v.Status)
		}
		if n := len(g.runs(t)); n != 1 {
			t.Fatalf("%d runs, want the one rejected", n)
		}
	})
}

// TestMCPGatewayWithTheTypeScriptSDKCallMadeAgain: the agent stops its
// held write and makes it again; then it closes its transport (the gateway
// goes with it) while the write is held, and makes the same write to a
// gateway started anew. Each time the call is the same run: one run, one
// message in Slack, whose approval answers the last call, and the file
// was written once. On each store.
func TestMCPGatewayWithTheTypeScriptSDKCallMadeAgain(t *testing.T) {
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		g := startSlackGateway(t, newDir)
		g.connect(t)
		out := filepath.Join(g.data, "out.txt")
		write := map[string]any{"path": out, "content": "asked three times"}
		g.call(t, "first", "files.write_file", write)
		id := waitingRun(t, g.dir, g.cfg, "")
		g.posted(t, id)
		g.do(t, map[string]any{"do": "abort", "id": "first"})
		if a := g.answer(t, "first"); a.Failed == "" {
			t.Fatalf("the stopped call = %+v, want it cut off", a)
		}
		g.call(t, "second", "files.write_file", write)
		g.do(t, map[string]any{"do": "close"})
		if a := g.answer(t, "second"); a.Failed == "" {
			t.Fatalf("the call held when the transport closed = %+v, want it cut off", a)
		}
		g.await(t, "closed", "")
		noFile(t, out, "before the approval")

		g.connect(t)
		g.call(t, "third", "files.write_file", write)
		g.approve(t, id)
		if a := g.answer(t, "third"); a.IsError || !strings.Contains(a.Text, "Successfully wrote") {
			t.Fatalf("the call made a third time = %+v, want the upstream's answer once approved", a)
		}
		fileHolds(t, out, "asked three times", "after the approval")
		if vs := g.runs(t); len(vs) != 1 || vs[0].ID != id || vs[0].Status != record.StatusDone {
			t.Fatalf("runs %+v, want %s alone, done", vs, id)
		}
		if n := len(g.slack.Posts()); n != 1 || g.postsOf(id) != 1 {
			t.Fatalf("%d messages posted, want the one of %s", n, id)
		}
	})
}

// TestMCPGatewayCrashWithTheTypeScriptSDK: the gateway the agent started
// is killed (SIGKILL) while it holds the write; the team lead's click in
// Slack still carries the write out, once, through serve; the agent starts
// a gateway anew, makes the same call again and gets the upstream's stored
// answer, and the upstream is not called again. On each store.
func TestMCPGatewayCrashWithTheTypeScriptSDK(t *testing.T) {
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		g := startSlackGateway(t, newDir)
		pid := g.connect(t)
		out := filepath.Join(g.data, "out.txt")
		write := map[string]any{"path": out, "content": "approved once"}
		g.call(t, "held", "files.write_file", write)
		id := waitingRun(t, g.dir, g.cfg, "")
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if a := g.answer(t, "held"); a.Failed == "" {
			t.Fatalf("the held call = %+v, answered by a gateway that was killed", a)
		}
		noFile(t, out, "before the approval")

		g.approve(t, id)
		waitFor(t, "the approved run to be done", func() bool { return g.run(t, id).Status == record.StatusDone })
		fileHolds(t, out, "approved once", "after the approval")
		// Changed on disk: a second write would undo the change.
		if err := os.WriteFile(out, []byte("changed since"), 0o600); err != nil {
			t.Fatal(err)
		}
		if again := g.connect(t); again == pid {
			t.Fatalf("the agent connected to gateway %d again, want a new one", pid)
		}
		g.call(t, "again", "files.write_file", write)
		if a := g.answer(t, "again"); a.IsError || !strings.Contains(a.Text, "Successfully wrote") {
			t.Fatalf("the same call to a new gateway = %+v, want the upstream's stored answer", a)
		}
		fileHolds(t, out, "changed since", "after the same call again")
		if vs := g.runs(t); len(vs) != 1 {
			t.Fatalf("%d runs, want the one approved", len(vs))
		}
		if n := len(g.slack.Posts()); n != 1 || g.postsOf(id) != 1 {
			t.Fatalf("%d messages posted, want the one of %s", n, id)
		}
	})
}
