package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// maxToolName bounds a permission prompt's tool name.
const maxToolName = 200

// Permission is the answer of the permission-prompt contract of coding
// agents: allow with the input to run (the stored, possibly edited one), or
// deny with a message the agent reads.
type Permission struct {
	Behavior     string          `json:"behavior"`
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	Message      string          `json:"message,omitempty"`
}

// permissionArgs are the arguments of the action a permission prompt
// proposes: the tool the agent means to call and its input, as given. The
// policy reads them as action.args.tool_name and action.args.input.
type permissionArgs struct {
	ToolName string          `json:"tool_name"`
	Input    json.RawMessage `json:"input"`
}

// permissionPrompt proposes the configured permission action with the
// tool's name and input as its arguments. Allowed at once: allow. Gated: it
// waits up to the hold for the decision, then denies as waiting, naming the
// run; the same call again (same requester, tool and canonical input) is
// the same run (promptRun), so that a retry after the approval is allowed
// with the stored arguments and never makes a second run.
func (t *tools) permissionPrompt(ctx context.Context, requester string, raw json.RawMessage) (any, error) {
	args, err := readPermission(raw)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encode the permission's arguments: %w", err)
	}
	digest, err := jsonvalue.Digest(b)
	if err != nil {
		return nil, badf("invalid arguments: input: %v", err)
	}
	p := &workflow.Proposal{TaskID: "permission:" + digest, Requester: record.Person{ID: requester},
		Summary: "Permission to run the tool " + args.ToolName, Actions: []record.Action{{Name: t.s.cfg.PermissionAction, Args: b}}}
	run, err := t.s.promptRun(ctx, p)
	if err != nil {
		// A refusal (the action not configured, the requester unknown, a
		// rate) is the agent's answer, not a failure of the tool.
		var re *record.RefusedError
		if errors.As(err, &re) {
			return answer(Permission{Behavior: "deny", Message: "signoff refused the request: " + re.Error()})
		}
		return nil, err
	}
	v, err := t.s.engine.Get(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, t.s.cfg.Hold)
	v, err = t.s.settle(hctx, v)
	cancel()
	if err != nil {
		return nil, err
	}
	return answer(t.s.permission(v, args.ToolName))
}

// promptRun is the run of prompt p: the one its task already is while it
// is active or within Reattach of its end, else a new one under the next
// idempotency key (two prompts racing make one run). A grant answers its
// call and the call's retries; the same call much later is asked anew.
func (s *Server) promptRun(ctx context.Context, p *workflow.Proposal) (*record.Run, error) {
	runs, err := s.engine.List(ctx, storage.RunFilter{TaskID: p.TaskID, RequesterID: p.Requester.ID})
	if err != nil {
		return nil, fmt.Errorf("find the runs of %s: %w", p.TaskID, err)
	}
	if len(runs) > 0 {
		last := runs[0]
		for _, r := range runs[1:] {
			if r.CreatedAt.After(last.CreatedAt) || (r.CreatedAt.Equal(last.CreatedAt) && r.ID > last.ID) {
				last = r
			}
		}
		if !last.Status.Terminal() || s.cfg.Now().Sub(last.UpdatedAt) < s.cfg.Reattach {
			return last, nil
		}
	}
	p.IdempotencyKey = fmt.Sprintf("%s/%d", p.TaskID, len(runs))
	run, _, err := s.engine.SubmitReplay(ctx, p)
	return run, err
}

// readPermission reads a permission prompt: tool_name, and input, a JSON
// object; other fields (a tool_use_id) are let be. Duplicate keys are
// refused.
func readPermission(raw json.RawMessage) (permissionArgs, error) {
	var in map[string]json.RawMessage
	if err := decodeArgs(raw, &in); err != nil {
		return permissionArgs{}, err
	}
	var name string
	if err := json.Unmarshal(in["tool_name"], &name); err != nil || name == "" {
		return permissionArgs{}, badf("invalid arguments: tool_name: required, a string")
	}
	if len(name) > maxToolName || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return permissionArgs{}, badf("invalid arguments: tool_name: at most %d bytes, without control characters", maxToolName)
	}
	input := in["input"]
	if len(input) == 0 || !strings.HasPrefix(strings.TrimSpace(string(input)), "{") {
		return permissionArgs{}, badf("invalid arguments: input: required, a JSON object")
	}
	c, err := jsonvalue.Canonical(input)
	if err != nil {
		return permissionArgs{}, badf("invalid arguments: input: %v", err)
	}
	return permissionArgs{ToolName: name, Input: c}, nil
}

// permission is the answer for run v, what the engine stored of it.
func (s *Server) permission(v *workflow.RunView, toolName string) Permission {
	switch {
	case v.Problem != "":
		return Permission{Behavior: "deny", Message: fmt.Sprintf("run %s failed its integrity check: %s", v.ID, v.Problem)}
	case v.Status == record.StatusDone:
		return s.allowed(v, toolName)
	case pending(v.Status):
		return Permission{Behavior: "deny", Message: fmt.Sprintf("waiting for approval in Slack, run %s: ask again with the same call once it is decided", v.ID)}
	}
	msg := fmt.Sprintf("not allowed: run %s is %s", v.ID, v.Status)
	if v.Reason != "" {
		msg += ": " + v.Reason
	}
	return Permission{Behavior: "deny", Message: msg}
}

// allowed allows with the input the run stored, which an approver may have
// edited; an edit that names another tool is denied, since the agent would
// run the tool it asked for with another's input.
func (s *Server) allowed(v *workflow.RunView, toolName string) Permission {
	if len(v.Actions) != 1 {
		return Permission{Behavior: "deny", Message: fmt.Sprintf("run %s holds %d actions, not the one asked for", v.ID, len(v.Actions))}
	}
	var stored permissionArgs
	if err := json.Unmarshal(v.Actions[0].Args, &stored); err != nil || len(stored.Input) == 0 {
		return Permission{Behavior: "deny", Message: fmt.Sprintf("run %s: the stored arguments are not a tool's input", v.ID)}
	}
	if stored.ToolName != toolName {
		return Permission{Behavior: "deny", Message: fmt.Sprintf("run %s was approved for the tool %s, not %s", v.ID, stored.ToolName, toolName)}
	}
	return Permission{Behavior: "allow", UpdatedInput: stored.Input}
}

// answer is the permission as the contract wants it: its JSON as text.
func answer(p Permission) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode the permission: %w", err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
}
