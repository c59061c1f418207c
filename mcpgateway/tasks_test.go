package mcpgateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/internal/bearer"
	"github.com/signoff-dev/signoff/mcpgateway"
	"github.com/signoff-dev/signoff/record"
)

// rawClient speaks JSON-RPC to the gateway over the SDK's in-memory
// transport, as a client of the 2026-07-28 revision does (each request
// carries its protocol version and capabilities in _meta): the Go SDK's
// client has no method of the Tasks extension.
type rawClient struct {
	t    testing.TB
	conn mcp.Connection
	id   int64
	// tasks says whether each request declares the extension.
	tasks bool
}

func (h *harness) raw(g *mcpgateway.Gateway, requester string, tasks bool) *rawClient {
	h.t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := g.Connect(ctx, requester, st)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { ss.Close() })
	conn, err := ct.Connect(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { conn.Close() })
	return &rawClient{t: h.t, conn: conn, tasks: tasks}
}

type taskView struct {
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage"`
	CreatedAt      time.Time           `json:"createdAt"`
	LastUpdatedAt  time.Time           `json:"lastUpdatedAt"`
	TTLMs          *int64              `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs"`
	Result         *mcp.CallToolResult `json:"result"`
	Meta           map[string]any      `json:"_meta"`
}

// call sends method with params and returns its result, or its error.
func (c *rawClient) call(method string, params map[string]any) (json.RawMessage, *jsonrpc.Error) {
	c.t.Helper()
	ctx := context.Background()
	caps := map[string]any{}
	if c.tasks {
		caps["extensions"] = map[string]any{mcpgateway.TasksExtension: map[string]any{}}
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps}
	b, err := json.Marshal(params)
	if err != nil {
		c.t.Fatal(err)
	}
	c.id++
	id, err := jsonrpc.MakeID(float64(c.id))
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.conn.Write(ctx, &jsonrpc.Request{ID: id, Method: method, Params: b}); err != nil {
		c.t.Fatal(err)
	}
	for {
		msg, err := c.conn.Read(ctx)
		if err != nil {
			c.t.Fatalf("%s: %v", method, err)
		}
		res, ok := msg.(*jsonrpc.Response)
		if !ok || res.ID != id {
			continue
		}
		if res.Error != nil {
			var we *jsonrpc.Error
			if b, err := json.Marshal(res.Error); err == nil && json.Unmarshal(b, &we) == nil && we.Code != 0 {
				return nil, we
			}
			return nil, &jsonrpc.Error{Message: res.Error.Error()}
		}
		return res.Result, nil
	}
}

// task sends method and reads its answer as a task.
func (c *rawClient) task(method string, params map[string]any) taskView {
	c.t.Helper()
	res, rerr := c.call(method, params)
	if rerr != nil {
		c.t.Fatalf("%s: %d %s", method, rerr.Code, rerr.Message)
	}
	var tv taskView
	if err := json.Unmarshal(res, &tv); err != nil {
		c.t.Fatalf("%s answered %s: %v", method, res, err)
	}
	return tv
}

func (c *rawClient) write() taskView {
	c.t.Helper()
	return c.task("tools/call", map[string]any{"name": "notes.write_note", "arguments": note})
}

func (c *rawClient) get(id string) taskView {
	c.t.Helper()
	return c.task("tasks/get", map[string]any{"taskId": id})
}

func resultText(res *mcp.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			s += t.Text
		}
	}
	return s
}

// TestGatedCallIsATask: a client that declares the Tasks extension gets a
// task at once for a gated call: its id is the run id, its TTL runs to the
// approval's deadline, it says who may decide; tasks/get says it still
// works; the same call made again is the same task; nothing ran.
func TestGatedCallIsATask(t *testing.T) {
	h := newHarness(t)
	c := h.raw(h.gateway(30*time.Second, 0), "agent:coder", true)
	start := time.Now()
	tk := c.write()
	if time.Since(start) > 10*time.Second {
		t.Fatalf("the task came after %s: want it at once, not after the hold", time.Since(start))
	}
	v, err := h.engine.Get(context.Background(), tk.TaskID)
	if err != nil {
		t.Fatalf("task %+v: its id is no run: %v", tk, err)
	}
	if tk.ResultType != "task" || tk.Status != "working" || v.Status != record.StatusWaitingApproval {
		t.Fatalf("task = %+v (run %s), want resultType task, working, its run waiting", tk, v.Status)
	}
	if tk.TTLMs == nil || *tk.TTLMs < 3599_000 || *tk.TTLMs > 3600_000 {
		t.Fatalf("ttlMs = %v, want the hour to the approval's deadline", tk.TTLMs)
	}
	if tk.PollIntervalMs != mcpgateway.PollInterval.Milliseconds() || tk.CreatedAt.IsZero() || tk.LastUpdatedAt.IsZero() {
		t.Fatalf("task = %+v, want a poll interval and its times", tk)
	}
	if !strings.Contains(tk.StatusMessage, "team_lead may decide") || !strings.Contains(tk.StatusMessage, tk.TaskID) {
		t.Fatalf("statusMessage = %q, want who may decide, and the run", tk.StatusMessage)
	}
	got := c.get(tk.TaskID)
	if got.ResultType != "complete" || got.Status != "working" || got.TaskID != tk.TaskID || got.Result != nil {
		t.Fatalf("tasks/get = %+v, want the task still working", got)
	}
	if again := c.write(); again.TaskID != tk.TaskID {
		t.Fatalf("the same call again is task %s, want %s", again.TaskID, tk.TaskID)
	}
	if n := h.notes.writes.Load(); n != 0 {
		t.Fatalf("the upstream was called %d times, want never", n)
	}
}

// TestApprovedTaskCompletesWithTheStoredAnswer: once approved, tasks/get
// carries the call out and the task is completed with the upstream's
// answer; polled again it is the stored answer: the upstream was called once.
func TestApprovedTaskCompletesWithTheStoredAnswer(t *testing.T) {
	h := newHarness(t)
	c := h.raw(h.gateway(time.Second, 0), "agent:coder", true)
	tk := c.write()
	h.decide(tk.TaskID, record.VerdictApprove, "")
	for i := 0; i < 2; i++ {
		got := c.get(tk.TaskID)
		if got.Status != "completed" || got.Result == nil || got.Result.IsError || resultText(got.Result) != "wrote plan" {
			t.Fatalf("tasks/get %d after the approval = %+v, want completed with the upstream's answer", i, got)
		}
	}
	if n := h.notes.writes.Load(); n != 1 {
		t.Fatalf("the upstream was called %d times, want once", n)
	}
	if st := h.status(tk.TaskID); st != record.StatusDone {
		t.Fatalf("run is %s, want done", st)
	}
}

// TestRejectedTaskCompletesWithTheReason: a rejected call's task is
// completed, its result the tool error a call made again gets, with the
// reason (the extension keeps failed for JSON-RPC errors); nothing ran.
func TestRejectedTaskCompletesWithTheReason(t *testing.T) {
	h := newHarness(t)
	c := h.raw(h.gateway(time.Second, 0), "agent:coder", true)
	tk := c.write()
	h.decide(tk.TaskID, record.VerdictReject, "not before the review")
	got := c.get(tk.TaskID)
	if got.Status != "completed" || got.Result == nil || !got.Result.IsError ||
		!strings.Contains(resultText(got.Result), "not before the review") || !strings.Contains(got.StatusMessage, "rejected") {
		t.Fatalf("tasks/get after the rejection = %+v, want completed with a tool error giving the reason", got)
	}
	if n := h.notes.writes.Load(); n != 0 {
		t.Fatalf("the upstream was called %d times, want never", n)
	}
}

// TestTaskCancelEndsTheRunOfItsRequesterOnly: tasks/cancel of another
// identity is not found and changes nothing; the requester's cancels the
// run through the engine; a second cancel is refused: the run has ended.
func TestTaskCancelEndsTheRunOfItsRequesterOnly(t *testing.T) {
	h := newHarness(t)
	g := h.gateway(time.Second, 0)
	c := h.raw(g, "agent:coder", true)
	tk := c.write()
	stranger := h.raw(g, "agent:stranger", true)
	if _, rerr := stranger.call("tasks/cancel", map[string]any{"taskId": tk.TaskID}); rerr == nil || rerr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rerr.Message, "not found") {
		t.Fatalf("another identity's tasks/cancel = %+v, want not found", rerr)
	}
	if st := h.status(tk.TaskID); st != record.StatusWaitingApproval {
		t.Fatalf("after another identity's cancel the run is %s, want waiting", st)
	}
	if res, rerr := c.call("tasks/cancel", map[string]any{"taskId": tk.TaskID}); rerr != nil || !strings.Contains(string(res), `"resultType":"complete"`) {
		t.Fatalf("tasks/cancel = %s %+v, want an acknowledgement", res, rerr)
	}
	v, err := h.engine.Get(context.Background(), tk.TaskID)
	if err != nil || v.Status != record.StatusCancelled || !strings.Contains(v.Reason, "cancelled by agent:coder") {
		t.Fatalf("run after tasks/cancel = %v (%v), want cancelled by its requester", v, err)
	}
	if got := c.get(tk.TaskID); got.Status != "cancelled" {
		t.Fatalf("tasks/get after the cancel = %+v, want cancelled", got)
	}
	if _, rerr := c.call("tasks/cancel", map[string]any{"taskId": tk.TaskID}); rerr == nil || !strings.Contains(rerr.Message, "cannot be cancelled") {
		t.Fatalf("tasks/cancel of an ended task = %+v, want refused", rerr)
	}
}

// TestTaskIDsAreTheirRequestersOnly: an unknown id, and another identity's
// task, are both not found; tasks/update of one's own task is acknowledged
// (no task asks for input); a client that does not declare the extension
// is told to.
func TestTaskIDsAreTheirRequestersOnly(t *testing.T) {
	h := newHarness(t)
	g := h.gateway(time.Second, 0)
	c := h.raw(g, "agent:coder", true)
	tk := c.write()
	stranger := h.raw(g, "agent:stranger", true)
	for _, tc := range []struct {
		name   string
		client *rawClient
		method string
		id     string
		code   int64
		want   string
	}{
		{"unknown id", c, "tasks/get", "run_doesnotexist", jsonrpc.CodeInvalidParams, "Task not found"},
		{"an id too long", c, "tasks/get", strings.Repeat("x", 500), jsonrpc.CodeInvalidParams, "Task not found"},
		{"another identity's get", stranger, "tasks/get", tk.TaskID, jsonrpc.CodeInvalidParams, "Task not found"},
		{"another identity's update", stranger, "tasks/update", tk.TaskID, jsonrpc.CodeInvalidParams, "Task not found"},
		{"without the extension", h.raw(g, "agent:coder", false), "tasks/get", tk.TaskID, -32021, "Missing required client capability"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, rerr := tc.client.call(tc.method, map[string]any{"taskId": tc.id})
			if rerr == nil || rerr.Code != tc.code || !strings.Contains(rerr.Message, tc.want) {
				t.Fatalf("%s = %s %+v, want error %d %q", tc.method, res, rerr, tc.code, tc.want)
			}
			if strings.Contains(string(res), tk.TaskID) {
				t.Fatalf("the answer names the task: %s", res)
			}
		})
	}
	if res, rerr := c.call("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{"x": map[string]any{"action": "accept"}}}); rerr != nil || !strings.Contains(string(res), `"resultType":"complete"`) {
		t.Fatalf("tasks/update of one's own task = %s %+v, want an acknowledgement", res, rerr)
	}
	if st := h.status(tk.TaskID); st != record.StatusWaitingApproval {
		t.Fatalf("run is %s, want it still waiting", st)
	}
	// A call the engine refuses (a requester without a role) is the tool
	// error a call without the extension gets, not a task.
	res, rerr := stranger.call("tools/call", map[string]any{"name": "notes.write_note", "arguments": note})
	if rerr != nil || strings.Contains(string(res), `"taskId"`) || !strings.Contains(string(res), `"isError":true`) ||
		!strings.Contains(string(res), "signoff refused the call") || !strings.Contains(string(res), `"resultType":"complete"`) {
		t.Fatalf("a refused call with the extension = %s %+v, want a tool error", res, rerr)
	}
}

// TestWithoutTheExtensionTheCallIsHeld: a 2026-07-28 client that does not
// declare the extension gets the hold and then the waiting answer, not a
// task; an allowed call of a client that declares it is answered at once
// by the upstream, not as a task.
func TestWithoutTheExtensionTheCallIsHeld(t *testing.T) {
	h := newHarness(t)
	g := h.gateway(time.Nanosecond, 0)
	res, rerr := h.raw(g, "agent:coder", false).call("tools/call", map[string]any{"name": "notes.write_note", "arguments": note})
	if rerr != nil {
		t.Fatal(rerr.Message)
	}
	var plain mcp.CallToolResult
	if err := json.Unmarshal(res, &plain); err != nil || strings.Contains(string(res), `"resultType":"task"`) ||
		!strings.Contains(resultText(&plain), "waiting for approval") || plain.Meta["signoff/run_id"] == nil {
		t.Fatalf("without the extension = %s (%v), want the waiting answer with the run id", res, err)
	}
	res, rerr = h.raw(g, "agent:coder", true).call("tools/call", map[string]any{"name": "notes.read_note", "arguments": map[string]any{"title": "plan"}})
	if rerr != nil || strings.Contains(string(res), `"taskId"`) || !strings.Contains(string(res), "note plan: ") || h.notes.reads.Load() != 1 {
		t.Fatalf("an allowed call with the extension = %s %+v, want the upstream's answer", res, rerr)
	}
}

// TestWaitingAnswerLinksTheApprovalMessage: once the approval request is
// posted in Slack, the waiting answer and the task carry its link and
// where it is.
func TestWaitingAnswerLinksTheApprovalMessage(t *testing.T) {
	h := newHarness(t)
	g := h.gateway(time.Nanosecond, 0)
	first := call(t, h.client(g, nil), "notes.write_note", note)
	v, err := h.engine.Get(context.Background(), first.runID)
	if err != nil || len(v.Requests) != 1 {
		t.Fatalf("run %v (%v), want one request", v, err)
	}
	if err := h.engine.Outbox().Posted(context.Background(), &record.MessageLocation{RequestID: v.Requests[0].ID, RunID: v.ID,
		Channel: "C0APPROVALS", TS: "1764633600.000100", PostedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	const link = "https://slack.com/archives/C0APPROVALS/p1764633600000100"
	res, err := h.client(g, nil).CallTool(context.Background(), &mcp.CallToolParams{Name: "notes.write_note", Arguments: note})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(read(t, res).text, link) || res.Meta["signoff/approval_url"] != link ||
		res.Meta["signoff/slack_channel"] != "C0APPROVALS" || res.Meta["signoff/slack_ts"] != "1764633600.000100" {
		t.Fatalf("waiting answer = %+v %v, want the message's link, channel and ts", read(t, res), res.Meta)
	}
	tk := h.raw(g, "agent:coder", true).write()
	if tk.TaskID != first.runID || !strings.Contains(tk.StatusMessage, link) || tk.Meta["signoff/approval_url"] != link {
		t.Fatalf("task = %+v, want the message's link", tk)
	}
}

// TestTasksOverHTTPAreTheTokensOwn: over streamable HTTP a gated call of a
// client declaring the extension is a task of its token's requester;
// tasks/get with that token reads it, with another token it is not found.
func TestTasksOverHTTPAreTheTokensOwn(t *testing.T) {
	h := newHarness(t)
	handler, err := h.gateway(time.Second, 0).Handler(mcpgateway.HTTPConfig{Tokens: []bearer.Token{
		{ID: "coder", SHA256: sha256.Sum256([]byte("sk_coder")), Requester: "agent:coder"},
		{ID: "other", SHA256: sha256.Sum256([]byte("sk_other")), Requester: "agent:other"}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(handler)
	t.Cleanup(hs.Close)
	post := func(secret, method string, params map[string]any) map[string]any {
		t.Helper()
		params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{mcpgateway.TasksExtension: map[string]any{}}}}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		req, _ := http.NewRequest(http.MethodPost, hs.URL, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			t.Fatalf("%s: %d %v", method, res.StatusCode, err)
		}
		return out
	}
	created := post("sk_coder", "tools/call", map[string]any{"name": "notes.write_note", "arguments": note})
	res, _ := created["result"].(map[string]any)
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || id == "" || h.status(id) != record.StatusWaitingApproval {
		t.Fatalf("tools/call over HTTP = %v, want a task for a waiting run", created)
	}
	if got := post("sk_coder", "tasks/get", map[string]any{"taskId": id}); got["result"].(map[string]any)["status"] != "working" {
		t.Fatalf("tasks/get with the token = %v, want working", got)
	}
	got := post("sk_other", "tasks/get", map[string]any{"taskId": id})
	if e, _ := got["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "Task not found") {
		t.Fatalf("tasks/get with another token = %v, want not found", got)
	}
}
