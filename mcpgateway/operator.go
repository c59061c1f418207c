package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/show"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// The operator tools: a person of the config lists, reads and decides
// waiting runs from an MCP client. A decision goes through the engine's
// Decide with that person as the one deciding, exactly as a click in
// Slack: role, the self-approval ban, the deadline and the fingerprint are
// the engine's to check.
const (
	OperatorPrefix    = "signoff.approvals."
	ToolListPending   = OperatorPrefix + "list_pending"
	ToolShow          = OperatorPrefix + "show"
	ToolApprove       = OperatorPrefix + "approve"
	ToolReject        = OperatorPrefix + "reject"
	maxPendingListed  = 100
	maxShownText      = 2000 // runes of a summary, a reason, a name as shown
	maxShownArgs      = 8000 // runes of an action's arguments as shown
	maxShownEvidence  = 4000 // runes of one evidence's data as shown
	maxShownDecisions = 50
)

// OperatorScope marks, over HTTP, a token of mcp.operators: its requester
// is the person who decides, and it is served the operator tools alone.
const OperatorScope = "mcp.operator"

// operator says who decides through the operator tools of one server, and
// which requester that server's own calls speak for (a stdio session that
// proposes as an agent and decides as a person; "" for none).
type operator struct {
	member string
	agent  string
}

func (g *Gateway) addOperatorTools(srv *mcp.Server, op operator) {
	empty := json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
	runID := json.RawMessage(`{"type":"object","required":["run_id"],"properties":{"run_id":{"type":"string"}},"additionalProperties":false}`)
	srv.AddTool(&mcp.Tool{Name: ToolListPending, Title: "Runs waiting for approval",
		Description: "List the runs that wait for approval, oldest first: who asked, the actions, who may decide and by when.",
		InputSchema: empty, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, g.opHandler(op, g.listPending))
	srv.AddTool(&mcp.Tool{Name: ToolShow, Title: "Show a run",
		Description: "Show one run: its actions and arguments (as text, redacted as configured), evidence, who may decide, the progress of its approval and the fingerprint an approval must name.",
		InputSchema: runID, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, g.opHandler(op, g.showRun))
	srv.AddTool(&mcp.Tool{Name: ToolApprove, Title: "Approve a run",
		Description: "Approve a waiting run as " + op.member + ". The fingerprint (from show) is required: an approval of a proposal that changed since is refused.",
		InputSchema: json.RawMessage(`{"type":"object","required":["run_id","fingerprint"],"properties":{"run_id":{"type":"string"},"fingerprint":{"type":"string"},"reason":{"type":"string"}},"additionalProperties":false}`)},
		g.opHandler(op, g.approve))
	srv.AddTool(&mcp.Tool{Name: ToolReject, Title: "Reject a run",
		Description: "Reject a waiting run as " + op.member + ", with the reason.",
		InputSchema: json.RawMessage(`{"type":"object","required":["run_id","reason"],"properties":{"run_id":{"type":"string"},"reason":{"type":"string"}},"additionalProperties":false}`)},
		g.opHandler(op, g.reject))
}

type opIn struct {
	RunID       string `json:"run_id"`
	Fingerprint string `json:"fingerprint"`
	Reason      string `json:"reason"`
}

type opFunc func(ctx context.Context, op operator, in opIn) (any, error)

// opHandler decodes the input strictly and answers the result as JSON
// text; a refusal (or bad input) is a tool error that says it in words.
func (g *Gateway) opHandler(op operator, f opFunc) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		raw := req.Params.Arguments
		if len(strings.TrimSpace(string(raw))) == 0 || string(raw) == "null" {
			raw = json.RawMessage("{}")
		}
		var in opIn
		if len(raw) > maxArgs {
			return toolError(fmt.Sprintf("invalid arguments: larger than %d bytes", maxArgs)), nil
		}
		if err := workflow.DecodeStrict(raw, &in); err != nil {
			return toolError("invalid arguments: " + err.Error()), nil
		}
		out, err := f(ctx, op, in)
		if err != nil {
			return g.opFailed(req.Params.Name, err), nil
		}
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return g.opFailed(req.Params.Name, err), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	}
}

// badInput is an operator's input refused before the engine is asked.
type badInput string

func (b badInput) Error() string { return string(b) }

func (g *Gateway) opFailed(tool string, err error) *mcp.CallToolResult {
	var re *record.RefusedError
	var bad badInput
	switch {
	case errors.As(err, &re):
		return toolError("refused: " + show.Inert(re.Error()))
	case errors.As(err, &bad):
		return toolError(string(bad))
	case errors.Is(err, storage.ErrNotFound):
		return toolError("no such run")
	}
	g.log.Error("mcp operator tool failed", "tool", tool, "err", err)
	return toolError("internal error: signoff could not answer; try again")
}

// Pending is one waiting run as list_pending lists it.
type Pending struct {
	RunID     string    `json:"run_id"`
	Summary   string    `json:"summary"`
	Requester string    `json:"requester"`
	Actions   []string  `json:"actions"`
	Approval  *Approval `json:"approval,omitempty"`
}

// Approval is who may decide a waiting run, how far its approval is, and by when.
type Approval struct {
	Role      string    `json:"role"`
	Count     int       `json:"count"`
	Remaining int       `json:"remaining"`
	Assignee  string    `json:"assignee,omitempty"`
	Deadline  time.Time `json:"deadline"`
	// RequesterMayApprove is the rule's self_approval: false means the
	// person who asked may not approve.
	RequesterMayApprove bool `json:"requester_may_approve"`
}

func (g *Gateway) listPending(ctx context.Context, _ operator, _ opIn) (any, error) {
	views, err := g.cfg.Engine.ListViews(ctx, storage.RunFilter{Statuses: []record.Status{record.StatusWaitingApproval}, Limit: maxPendingListed + 1})
	if err != nil {
		return nil, fmt.Errorf("list the waiting runs: %w", err)
	}
	out := struct {
		Runs []Pending `json:"runs"`
		More bool      `json:"more,omitempty"`
	}{Runs: []Pending{}}
	if len(views) > maxPendingListed {
		views, out.More = views[:maxPendingListed], true
	}
	for _, v := range views {
		p := Pending{RunID: v.ID, Summary: shownText(v.Summary), Requester: shownText(v.Requester.ID), Actions: []string{}, Approval: approvalOf(v)}
		for _, a := range v.Actions {
			p.Actions = append(p.Actions, shownText(a.Name))
		}
		out.Runs = append(out.Runs, p)
	}
	return out, nil
}

// Shown is one run as show shows it. Every string a requester, an agent or
// a server wrote is shown inert (no control, format or bidirectional
// character acts) and bounded; arguments and evidence are their JSON as an
// approver reads it in Slack, a string always quoted.
type Shown struct {
	RunID       string          `json:"run_id"`
	Status      record.Status   `json:"status"`
	Reason      string          `json:"reason,omitempty"`
	Summary     string          `json:"summary"`
	Requester   string          `json:"requester"`
	Actions     []ShownAction   `json:"actions"`
	Evidence    []ShownEvidence `json:"evidence"`
	Approval    *Approval       `json:"approval,omitempty"`
	Decisions   []ShownDecision `json:"decisions"`
	Fingerprint string          `json:"fingerprint,omitempty"`
	Problem     string          `json:"problem,omitempty"`
}

// ShownAction is an action and its arguments, as text.
type ShownAction struct {
	Name string `json:"name"`
	Args string `json:"args"`
}

// ShownEvidence is one piece of evidence, as text.
type ShownEvidence struct {
	Source string `json:"source"`
	Data   string `json:"data"`
}

// ShownDecision is one decision so far.
type ShownDecision struct {
	By       string         `json:"by"`
	Decision record.Verdict `json:"decision"`
	Reason   string         `json:"reason,omitempty"`
	Via      record.Via     `json:"via"`
}

func (g *Gateway) showRun(ctx context.Context, _ operator, in opIn) (any, error) {
	v, err := g.run(ctx, in.RunID)
	if err != nil {
		return nil, err
	}
	if v.Problem != "" {
		// A run that fails its integrity check shows that and no more.
		return Shown{RunID: v.ID, Status: record.StatusNeedsAttention, Problem: shownText(v.Problem), Actions: []ShownAction{},
			Evidence: []ShownEvidence{}, Decisions: []ShownDecision{}}, nil
	}
	v = workflow.RedactedView(v, g.cfg.Engine.Action)
	out := Shown{RunID: v.ID, Status: v.Status, Reason: shownText(v.Reason), Summary: shownText(v.Summary),
		Requester: shownText(v.Requester.ID), Approval: approvalOf(v), Actions: []ShownAction{}, Evidence: []ShownEvidence{},
		Decisions: []ShownDecision{}}
	if v.Status == record.StatusWaitingApproval {
		out.Fingerprint = v.Fingerprint
	}
	for _, a := range v.Actions {
		out.Actions = append(out.Actions, ShownAction{Name: shownText(a.Name), Args: cut(show.Value(a.Args), maxShownArgs)})
	}
	for _, e := range v.Evidence {
		out.Evidence = append(out.Evidence, ShownEvidence{Source: shownText(e.Source), Data: cut(show.Value(e.Data), maxShownEvidence)})
	}
	for i, d := range v.Decisions {
		if i == maxShownDecisions {
			break
		}
		out.Decisions = append(out.Decisions, ShownDecision{By: shownText(d.By), Decision: d.Decision, Reason: shownText(d.Reason), Via: d.Via})
	}
	return out, nil
}

// Decided is approve's and reject's answer: where the run stands now.
type Decided struct {
	RunID    string        `json:"run_id"`
	Status   record.Status `json:"status"`
	Approval *Approval     `json:"approval,omitempty"`
}

func (g *Gateway) approve(ctx context.Context, op operator, in opIn) (any, error) {
	if strings.TrimSpace(in.Fingerprint) == "" {
		return nil, badInput("fingerprint is required: the one " + ToolShow + " gives, so that what is approved is what was read")
	}
	if op.agent != "" {
		v, err := g.run(ctx, in.RunID)
		if err != nil {
			return nil, err
		}
		if v.Requester.ID == op.agent {
			return nil, badInput(fmt.Sprintf("run %s was proposed by %s, whom this session speaks for: it is decided elsewhere (Slack, another operator), never by the session that asked",
				v.ID, shownText(op.agent)))
		}
	}
	return g.decide(ctx, op, in, record.VerdictApprove)
}

func (g *Gateway) reject(ctx context.Context, op operator, in opIn) (any, error) {
	if strings.TrimSpace(in.Reason) == "" {
		return nil, badInput("reason is required: the requester reads it")
	}
	return g.decide(ctx, op, in, record.VerdictReject)
}

func (g *Gateway) decide(ctx context.Context, op operator, in opIn, verdict record.Verdict) (any, error) {
	if strings.TrimSpace(in.RunID) == "" {
		return nil, badInput("run_id is required")
	}
	if _, err := g.cfg.Engine.Decide(ctx, workflow.DecideInput{RunID: in.RunID, Approver: record.Person{ID: op.member},
		Verdict: verdict, Reason: in.Reason, Fingerprint: strings.TrimSpace(in.Fingerprint), Via: record.ViaMCP}); err != nil {
		return nil, err
	}
	v, err := g.run(ctx, in.RunID)
	if err != nil {
		return nil, err
	}
	return Decided{RunID: v.ID, Status: v.Status, Approval: approvalOf(v)}, nil
}

func (g *Gateway) run(ctx context.Context, id string) (*workflow.RunView, error) {
	if strings.TrimSpace(id) == "" {
		return nil, badInput("run_id is required")
	}
	v, err := g.cfg.Engine.Get(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, workflow.UnknownRun(id)
	}
	return v, err
}

// approvalOf is who may decide v while it waits, and how far it is.
func approvalOf(v *workflow.RunView) *Approval {
	g := v.Gate
	if v.Status != record.StatusWaitingApproval || g == nil || g.Approval == nil || v.Deadline == nil {
		return nil
	}
	approved := 0
	for _, d := range v.Decisions {
		if d.RequestID == g.RequestID && d.Decision == record.VerdictApprove {
			approved++
		}
	}
	a := &Approval{Role: g.Approval.Role, Count: g.Approval.Count, Remaining: max(g.Approval.Count-approved, 0),
		Assignee: shownText(g.Assignee), Deadline: *v.Deadline, RequesterMayApprove: g.Approval.SelfApproval}
	if v.Progress != nil {
		a.Remaining = v.Progress.Remaining
	}
	return a
}

// shownText is a string of a run as an operator reads it: inert, bounded.
func shownText(s string) string { return cut(show.Inert(s), maxShownText) }

func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + fmt.Sprintf("… [cut: %d characters in all]", utf8.RuneCountInString(s))
}
