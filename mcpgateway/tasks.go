package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// TasksExtension names MCP's Tasks extension (revision 2026-07-28). A
// client that declares it on a gated tools/call (in the request's
// _meta["io.modelcontextprotocol/clientCapabilities"].extensions) gets a
// task at once instead of a held call: the task id is the run id, and
// tasks/get, tasks/update and tasks/cancel read and end it from the run.
const TasksExtension = "io.modelcontextprotocol/tasks"

// PollInterval is how often a task asks its client to poll: a decision
// takes a person minutes, not milliseconds.
const PollInterval = 5 * time.Second

const (
	methodCallTool   = "tools/call"
	methodTaskGet    = "tasks/get"
	methodTaskUpdate = "tasks/update"
	methodTaskCancel = "tasks/cancel"
	// codeMissingCapability is the extension's error for a client that
	// did not declare it.
	codeMissingCapability = -32021
	// maxTaskID bounds a task id a client sends: a run id is far shorter.
	maxTaskID = 128
)

// task is the extension's Task, detailed as tasks/get answers it.
type task struct {
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          *int64              `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs"`
	Result         *mcp.CallToolResult `json:"result,omitempty"`
	Error          *jsonrpc.Error      `json:"error,omitempty"`
	Meta           mcp.Meta            `json:"_meta,omitempty"`
}

// taskParams are the params of tasks/get, tasks/update and tasks/cancel,
// and of tools/call (name and arguments).
type taskParams struct {
	TaskID    string          `json:"taskId"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      struct {
		Capabilities struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"io.modelcontextprotocol/clientCapabilities"`
	} `json:"_meta"`
}

// declares says whether the request declares the extension, as an object.
func (p *taskParams) declares() bool {
	v, ok := p.Meta.Capabilities.Extensions[TasksExtension]
	return ok && strings.HasPrefix(strings.TrimSpace(string(v)), "{")
}

// intercept takes a request that is the extension's: a tasks/ method, or a
// tools/call that declares it and that the policy gates. It returns the
// answer to compute (it may wait on the engine or an upstream); ok false
// leaves the request to the SDK, as any other.
func (g *Gateway) intercept(ctx context.Context, requester string, req *jsonrpc.Request) (answer func(context.Context) *jsonrpc.Response, ok bool) {
	if !req.IsCall() {
		return nil, false
	}
	var p taskParams
	switch req.Method {
	case methodTaskGet, methodTaskUpdate, methodTaskCancel:
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return reply(req.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: " + err.Error()}), true
		}
		return func(ctx context.Context) *jsonrpc.Response {
			res, rerr := g.taskMethod(ctx, requester, req.Method, &p)
			return reply(req.ID, res, rerr)(ctx)
		}, true
	case methodCallTool:
		if json.Unmarshal(req.Params, &p) != nil || !p.declares() {
			return nil, false
		}
		t := g.cfg.Upstreams.tool(p.Name)
		if t == nil {
			return nil, false
		}
		// A call the SDK would refuse or the policy lets through is left to it.
		args, err := callArgs(p.Arguments)
		if err != nil {
			return nil, false
		}
		prop, err := proposal(requester, t, args)
		if err != nil || g.allowed(ctx, prop) {
			return nil, false
		}
		return func(ctx context.Context) *jsonrpc.Response {
			v, err := g.attach(ctx, t, prop)
			if err != nil {
				return reply(req.ID, complete(g.failed(t, err)), nil)(ctx)
			}
			tk := g.task(v)
			tk.ResultType, tk.Result, tk.Error = "task", nil, nil
			return reply(req.ID, tk, nil)(ctx)
		}, true
	}
	return nil, false
}

func reply(id jsonrpc.ID, res any, rerr *jsonrpc.Error) func(context.Context) *jsonrpc.Response {
	return func(context.Context) *jsonrpc.Response {
		if rerr != nil {
			return &jsonrpc.Response{ID: id, Error: rerr}
		}
		b, err := json.Marshal(res)
		if err != nil {
			return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: the answer cannot be encoded"}}
		}
		return &jsonrpc.Response{ID: id, Result: b}
	}
}

// complete is a tool's answer as the 2026-07-28 revision sends a standard
// result: marked resultType "complete".
func complete(res *mcp.CallToolResult) any {
	b, err := json.Marshal(res)
	var m map[string]any
	if err != nil || json.Unmarshal(b, &m) != nil {
		return res
	}
	m["resultType"] = "complete"
	return m
}

type ack struct {
	ResultType string `json:"resultType"`
}

// taskMethod serves tasks/get, tasks/update and tasks/cancel for
// requester: a task is the requester's own run, or not found.
func (g *Gateway) taskMethod(ctx context.Context, requester, method string, p *taskParams) (any, *jsonrpc.Error) {
	if !p.declares() {
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}})
		return nil, &jsonrpc.Error{Code: codeMissingCapability, Message: "Missing required client capability: declare " + TasksExtension, Data: data}
	}
	v, rerr := g.owned(ctx, requester, p.TaskID)
	if rerr != nil {
		return nil, rerr
	}
	switch method {
	case methodTaskUpdate:
		// No task of the gateway asks its client for input: an update has
		// nothing to answer, and is acknowledged.
		return ack{ResultType: "complete"}, nil
	case methodTaskCancel:
		if _, err := g.cfg.Engine.Cancel(ctx, v.ID, record.Person{ID: requester}, "the requester cancelled the call (MCP tasks/cancel)"); err != nil {
			var re *record.RefusedError
			if errors.As(err, &re) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to cancel task: " + re.Error()}
			}
			g.log.Error("mcp task not cancelled", "run_id", v.ID, "err", err)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: the task could not be cancelled; try again"}
		}
		return ack{ResultType: "complete"}, nil
	}
	// tasks/get carries out an approved call, as a call made again does.
	if v.Status == record.StatusExecuting && v.Problem == "" {
		if _, err := g.cfg.Engine.Follow(context.WithoutCancel(ctx), v.ID); err != nil {
			g.log.Error("mcp task not carried out", "run_id", v.ID, "err", err)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: the approved call could not be carried out; try again"}
		}
		if v, rerr = g.owned(ctx, requester, v.ID); rerr != nil {
			return nil, rerr
		}
	}
	tk := g.task(v)
	tk.ResultType = "complete"
	return tk, nil
}

var errTaskNotFound = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}

// owned is the run of the task id when it is a gateway call of requester;
// any other run is not found, as one that does not exist.
func (g *Gateway) owned(ctx context.Context, requester, id string) (*workflow.RunView, *jsonrpc.Error) {
	if id == "" || len(id) > maxTaskID {
		return nil, errTaskNotFound
	}
	v, err := g.cfg.Engine.Get(ctx, id)
	switch {
	case errors.Is(err, storage.ErrNotFound) || record.IsRefused(err, record.CodeUnknownRun):
		return nil, errTaskNotFound
	case err != nil:
		g.log.Error("mcp task not read", "run_id", id, "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: the task could not be read; try again"}
	case v.Requester.ID != requester || !strings.HasPrefix(v.TaskID, "mcp:"):
		return nil, errTaskNotFound
	}
	return v, nil
}

// task is the run as a task: waiting, approved or needing a person is
// working; done, rejected, expired or failed is completed, its result the
// answer a call made again gets (the stored answer, or a tool error with
// the reason); cancelled is cancelled; a run that failed its integrity
// check is failed.
func (g *Gateway) task(v *workflow.RunView) *task {
	tk := &task{TaskID: v.ID, CreatedAt: v.CreatedAt.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: v.UpdatedAt.UTC().Format(time.RFC3339Nano), TTLMs: ttl(v), PollIntervalMs: PollInterval.Milliseconds(),
		Meta: mcp.Meta{"signoff/run_id": v.ID, "signoff/status": string(v.Status)}}
	if m, ok := posted(v); ok {
		tk.Meta["signoff/approval_url"], tk.Meta["signoff/slack_channel"], tk.Meta["signoff/slack_ts"] = m.link, m.channel, m.ts
	}
	switch {
	case v.Problem != "":
		tk.Status, tk.StatusMessage = "failed", fmt.Sprintf("run %s failed its integrity check", v.ID)
		tk.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("run %s failed its integrity check: %s", v.ID, v.Problem)}
	case v.Status == record.StatusCancelled:
		tk.Status, tk.StatusMessage = "cancelled", v.Reason
	case v.Status == record.StatusNeedsAttention:
		tk.Status, tk.StatusMessage = "working", fmt.Sprintf("run %s needs a person: %s", v.ID, v.Reason)
	case v.Status.Terminal():
		tk.Status, tk.Result = "completed", g.answer(v)
		tk.StatusMessage = string(v.Status)
		if v.Reason != "" {
			tk.StatusMessage += ": " + v.Reason
		}
	default:
		tk.Status, tk.StatusMessage = "working", waitingMessage(v)
	}
	return tk
}

// waitingMessage says what a run that has not ended waits for, and who may
// decide it.
func waitingMessage(v *workflow.RunView) string {
	switch v.Status {
	case record.StatusScheduled:
		return fmt.Sprintf("approved; it runs when its execution window opens (run %s)", v.ID)
	case record.StatusExecuting:
		return fmt.Sprintf("approved and being carried out (run %s)", v.ID)
	}
	msg := fmt.Sprintf("waiting for approval in Slack (run %s); nothing ran yet", v.ID)
	if v.Gate != nil && v.Gate.Approval != nil {
		who := "someone with role " + v.Gate.Approval.Role
		if n := v.Gate.Approval.Count; n > 1 {
			who = fmt.Sprintf("%d people with role %s", n, v.Gate.Approval.Role)
		}
		if v.Gate.Assignee != "" {
			who = v.Gate.Assignee + " (or " + who + " above)"
		}
		msg += "; " + who + " may decide"
	}
	if m, ok := posted(v); ok {
		msg += ". The approval message: " + m.link
	}
	return msg
}

// ttl is the task's time to live from its creation: until the run's
// deadline, or unlimited (nil) for a run without one.
func ttl(v *workflow.RunView) *int64 {
	d := v.Deadline
	if d == nil && v.Gate != nil {
		d = v.Gate.Deadline
	}
	if d == nil {
		return nil
	}
	ms := max(d.Sub(v.CreatedAt).Milliseconds(), 0)
	return &ms
}

// taskTransport is a transport whose connections serve the extension for
// requester, ahead of the SDK: its version defines no method beyond the
// protocol's own.
type taskTransport struct {
	inner     mcp.Transport
	g         *Gateway
	requester string
}

func (t *taskTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &taskConn{Connection: c, g: t.g, requester: t.requester, ctx: cctx, cancel: cancel}, nil
}

// taskConn answers the extension's requests itself, each in its own
// goroutine (a tasks/get may carry out a call), and passes every other
// message on to the SDK.
type taskConn struct {
	mcp.Connection
	g         *Gateway
	requester string
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

func (c *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			return msg, nil
		}
		answer, ok := c.g.intercept(ctx, c.requester, req)
		if !ok {
			return msg, nil
		}
		c.wg.Go(func() {
			if err := c.Connection.Write(c.ctx, answer(c.ctx)); err != nil && c.ctx.Err() == nil {
				c.g.log.Debug("mcp task answer not sent", "method", req.Method, "err", err)
			}
		})
	}
}

func (c *taskConn) Close() error {
	c.cancel()
	err := c.Connection.Close()
	c.wg.Wait()
	return err
}
