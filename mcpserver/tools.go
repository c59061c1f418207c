package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// tools are the server's tools, speaking for who.
type tools struct {
	s   *Server
	who identity
}

type namedTool struct {
	tool    *mcp.Tool
	handler mcp.ToolHandler
}

// handle wraps a tool's function: the caller is named (with the scope the
// tool needs), and a failure is a tool error (isError), which the agent
// reads, rather than a protocol error.
func (t *tools) handle(name, scope string, f func(ctx context.Context, requester string, args json.RawMessage) (any, error)) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		requester, err := t.who(req, scope)
		if err != nil {
			return t.s.toolError(name, badInput{err.Error()}), nil
		}
		out, err := f(ctx, requester, req.Params.Arguments)
		if err != nil {
			return t.s.toolError(name, err), nil
		}
		if r, ok := out.(*mcp.CallToolResult); ok {
			return r, nil
		}
		r, err := result(out)
		if err != nil {
			return t.s.toolError(name, err), nil
		}
		return r, nil
	}
}

func (t *tools) list() []namedTool {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	no := false
	return []namedTool{
		{&mcp.Tool{Name: "request_approval", Title: "Request approval",
			Description: "Propose actions for human approval. The policy lets low-risk actions through at once and gates the others: " +
				"the answer says the run's status and, while it waits, who may decide and by when. Retrying with the same idempotency_key returns the same run.",
			InputSchema: json.RawMessage(requestSchema), Annotations: &mcp.ToolAnnotations{DestructiveHint: &no}},
			t.handle("request_approval", scopeSubmit, t.requestApproval)},
		{&mcp.Tool{Name: "get_run", Title: "Show a run", Description: "Show one of your runs: status, actions (redacted as configured), gate, decisions, operations.",
			InputSchema: json.RawMessage(runIDSchema), Annotations: ro},
			t.handle("get_run", scopeRead, t.getRun)},
		{&mcp.Tool{Name: "wait_run", Title: "Wait for a run",
			Description: "Wait until one of your runs is finished or needs a person (done, failed, rejected, expired, cancelled, needs_attention), " +
				"at most timeout_seconds (default 30, at most 50); then show it. settled is false when the wait ended first.",
			InputSchema: json.RawMessage(waitSchema), Annotations: ro},
			t.handle("wait_run", scopeRead, t.waitRun)},
		{&mcp.Tool{Name: "cancel_run", Title: "Cancel a run", Description: "Cancel one of your runs that waits for approval, with the reason.",
			InputSchema: json.RawMessage(cancelSchema), Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true}},
			t.handle("cancel_run", scopeCancel, t.cancelRun)},
		{&mcp.Tool{Name: "permission_prompt", Title: "Ask whether a tool call may run",
			Description: "The permission-prompt tool of a coding agent: input {tool_name, input}; the answer is " +
				`{"behavior":"allow","updatedInput":{...}} or {"behavior":"deny","message":"..."} as JSON text.`,
			InputSchema: json.RawMessage(permissionSchema)},
			t.handle("permission_prompt", scopeSubmit, t.permissionPrompt)},
	}
}

const (
	requestSchema = `{"type":"object","additionalProperties":false,"required":["actions"],"properties":{
"task_id":{"type":"string","description":"your task's id, shown to approvers"},
"summary":{"type":"string","description":"what and why, shown to approvers"},
"actions":{"type":"array","minItems":1,"items":{"type":"object","additionalProperties":false,"required":["name"],"properties":{
  "name":{"type":"string","description":"a configured action"},"args":{"description":"the action's arguments (its schema's)"}}}},
"evidence":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["source"],"properties":{"source":{"type":"string"},"data":{}}}},
"idempotency_key":{"type":"string","description":"the same key and proposal return the same run"},
"callback_url":{"type":"string","description":"sent a signed event at each status change (must be allowed by the config)"}}}`
	runIDSchema = `{"type":"object","additionalProperties":false,"required":["run_id"],"properties":{"run_id":{"type":"string"}}}`
	waitSchema  = `{"type":"object","additionalProperties":false,"required":["run_id"],"properties":{"run_id":{"type":"string"},
"timeout_seconds":{"type":"integer","minimum":0,"maximum":50}}}`
	cancelSchema     = `{"type":"object","additionalProperties":false,"required":["run_id","reason"],"properties":{"run_id":{"type":"string"},"reason":{"type":"string"}}}`
	permissionSchema = `{"type":"object","required":["tool_name","input"],"properties":{"tool_name":{"type":"string"},"input":{"type":"object"},"tool_use_id":{"type":"string"}}}`
)

// requestIn is request_approval's input: a proposal without its requester,
// which is the caller's.
type requestIn struct {
	TaskID         string            `json:"task_id,omitempty"`
	Summary        string            `json:"summary,omitempty"`
	Actions        []record.Action   `json:"actions"`
	Evidence       []record.Evidence `json:"evidence,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	CallbackURL    string            `json:"callback_url,omitempty"`
}

// Approval is who may still decide a waiting run, and by when.
type Approval struct {
	Role      string    `json:"role"`
	Count     int       `json:"count"`
	Remaining int       `json:"remaining"`
	Assignee  string    `json:"assignee,omitempty"`
	Deadline  time.Time `json:"deadline"`
}

// Submitted is request_approval's answer.
type Submitted struct {
	RunID       string        `json:"run_id"`
	Status      record.Status `json:"status"`
	Replayed    bool          `json:"replayed"`
	Reason      string        `json:"reason,omitempty"`
	Fingerprint string        `json:"fingerprint,omitempty"` // its short form, as approvers see it
	Approval    *Approval     `json:"approval,omitempty"`
}

func (t *tools) requestApproval(ctx context.Context, requester string, raw json.RawMessage) (any, error) {
	var in requestIn
	if err := decodeArgs(raw, &in); err != nil {
		return nil, err
	}
	p := &workflow.Proposal{TaskID: in.TaskID, Requester: record.Person{ID: requester}, Summary: in.Summary, Actions: in.Actions,
		Evidence: in.Evidence, IdempotencyKey: in.IdempotencyKey, CallbackURL: in.CallbackURL}
	run, replayed, err := t.s.engine.SubmitReplay(ctx, p)
	if err != nil {
		return nil, err
	}
	v, err := t.s.engine.Get(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	return submitted(v, replayed), nil
}

// submitted is the short answer to a submit: where the run stands and, while
// it waits, who may approve it and by when.
func submitted(v *workflow.RunView, replayed bool) Submitted {
	out := Submitted{RunID: v.ID, Status: v.Status, Replayed: replayed, Reason: v.Reason, Fingerprint: short(v.Fingerprint)}
	if g := v.Gate; v.Status == record.StatusWaitingApproval && g != nil && g.Approval != nil && v.Deadline != nil {
		approved := 0
		for _, d := range v.Decisions {
			if d.RequestID == g.RequestID && d.Decision == record.VerdictApprove {
				approved++
			}
		}
		out.Approval = &Approval{Role: g.Approval.Role, Count: g.Approval.Count, Remaining: max(g.Approval.Count-approved, 0),
			Assignee: g.Assignee, Deadline: *v.Deadline}
	}
	return out
}

func short(fp string) string {
	if len(fp) > policy.ShortFingerprintLen {
		return fp[:policy.ShortFingerprintLen]
	}
	return fp
}

type runIn struct {
	RunID string `json:"run_id"`
}

// own reads a run of requester. Another requester's run is refused exactly
// as a run that does not exist, so that a caller learns nothing of runs it
// did not submit.
func (t *tools) own(ctx context.Context, requester, id string) (*workflow.RunView, error) {
	if strings.TrimSpace(id) == "" {
		return nil, badf("run_id is required")
	}
	v, err := t.s.engine.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if v.Requester.ID != requester {
		return nil, workflow.UnknownRun(id)
	}
	return v, nil
}

// shown is a run as its requester is shown it: redacted as configured; a
// run that failed its integrity check shows that and no more.
func (t *tools) shown(v *workflow.RunView) *workflow.RunView {
	if v.Problem != "" {
		return &workflow.RunView{ID: v.ID, Workflow: v.Workflow, Status: record.StatusNeedsAttention, Problem: v.Problem,
			Requester: v.Requester, Actions: []record.Action{}, Evidence: []record.Evidence{}, Checks: []record.Check{},
			Requests: []workflow.RequestView{}, Decisions: []workflow.DecisionView{}, Operations: []workflow.OperationView{},
			CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt}
	}
	return workflow.RedactedView(v, t.s.engine.Action)
}

func (t *tools) getRun(ctx context.Context, requester string, raw json.RawMessage) (any, error) {
	var in runIn
	if err := decodeArgs(raw, &in); err != nil {
		return nil, err
	}
	v, err := t.own(ctx, requester, in.RunID)
	if err != nil {
		return nil, err
	}
	return t.shown(v), nil
}

type waitIn struct {
	RunID          string `json:"run_id"`
	TimeoutSeconds *int   `json:"timeout_seconds,omitempty"`
}

// Waited is wait_run's answer: the run as it is, and whether it is settled
// (finished or needing a person) or was still pending when the wait ended.
type Waited struct {
	Settled bool              `json:"settled"`
	Run     *workflow.RunView `json:"run"`
}

func (t *tools) waitRun(ctx context.Context, requester string, raw json.RawMessage) (any, error) {
	var in waitIn
	if err := decodeArgs(raw, &in); err != nil {
		return nil, err
	}
	d := DefaultWait
	if in.TimeoutSeconds != nil {
		if *in.TimeoutSeconds < 0 || time.Duration(*in.TimeoutSeconds)*time.Second > MaxWait {
			return nil, badf("timeout_seconds: want 0 to %d", int(MaxWait/time.Second))
		}
		d = time.Duration(*in.TimeoutSeconds) * time.Second
	}
	v, err := t.own(ctx, requester, in.RunID)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if v, err = t.s.settle(wctx, v); err != nil {
		return nil, err
	}
	return Waited{Settled: !pending(v.Status) || v.Problem != "", Run: t.shown(v)}, nil
}

// pending says whether a run in status st may still move on without anyone
// acting on it but the approvers and the workers.
func pending(st record.Status) bool {
	switch st {
	case record.StatusRunning, record.StatusWaitingApproval, record.StatusExecuting:
		return true
	}
	return false
}

// settle waits, on the engine's change feed, until v's run is no longer
// pending (it is finished or needs a person) or ctx ends, and returns the
// run as it is then.
func (s *Server) settle(ctx context.Context, v *workflow.RunView) (*workflow.RunView, error) {
	for pending(v.Status) && v.Problem == "" {
		next, changed, err := s.engine.WaitRun(ctx, v.ID, v.Status)
		if err != nil {
			return nil, err
		}
		v = next
		if !changed {
			break // the wait ended: v is the run as it is now
		}
	}
	return v, nil
}

type cancelIn struct {
	RunID  string `json:"run_id"`
	Reason string `json:"reason"`
}

func (t *tools) cancelRun(ctx context.Context, requester string, raw json.RawMessage) (any, error) {
	var in cancelIn
	if err := decodeArgs(raw, &in); err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.Reason) == "" {
		return nil, badf("reason: required: why the run is cancelled")
	}
	// Checked before the engine is asked, so that a refused cancel of a run
	// the caller may not see leaves no trace of it either.
	if _, err := t.own(ctx, requester, in.RunID); err != nil {
		return nil, err
	}
	if _, err := t.s.engine.Cancel(ctx, in.RunID, record.Person{ID: requester}, in.Reason); err != nil {
		return nil, err
	}
	v, err := t.s.engine.Get(ctx, in.RunID)
	if err != nil {
		return nil, err
	}
	return t.shown(v), nil
}
