// Package mcpserver is signoff's approval tools over the Model Context
// Protocol: an agent that speaks MCP asks for approval (request_approval),
// reads and waits on its runs (get_run, wait_run), cancels them
// (cancel_run), and a coding agent asks whether it may run a tool
// (permission_prompt), each gated by the same policy and decided in Slack as
// any proposal. It is an edge: it uses the engine, never the store, and it is
// the only importer of the MCP SDK.
//
// Over stdio the server speaks for one requester fixed when it starts; over
// HTTP each request carries a bearer token of the agent API's kind, which
// names the requester and the scopes.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// Scopes the tools need of an HTTP caller's token (the agent API's).
const (
	scopeSubmit = "submit"
	scopeRead   = "read"
	scopeCancel = "cancel"
)

// Bounds of the waits and of what a caller sends.
const (
	// MaxWait bounds wait_run: a client's request timeout is often a
	// minute, and an answer before it is worth more than a longer wait.
	MaxWait = 50 * time.Second
	// DefaultWait is wait_run's wait when the call names none.
	DefaultWait = 30 * time.Second
	// DefaultHold is how long permission_prompt waits for a decision before
	// it denies with "waiting for approval", for the agent to ask again.
	DefaultHold = 50 * time.Second
	// DefaultPermissionAction is the action a permission prompt proposes.
	DefaultPermissionAction = "permission_prompt"
	// maxArgs bounds a tool call's arguments, as a proposal is bounded.
	maxArgs = workflow.MaxProposalBytes
)

// Config is what the server is built from.
type Config struct {
	Engine *workflow.Engine
	Logger *slog.Logger // defaults to discarding
	// Version is the implementation version the server announces.
	Version string
	// PermissionAction is the configured action a permission prompt
	// proposes (DefaultPermissionAction when empty).
	PermissionAction string
	// Hold is how long permission_prompt waits for the decision of a gated
	// call before denying it as waiting (DefaultHold when 0; at most MaxWait).
	Hold time.Duration
	// Reattach is how long after its run ended a permission prompt asked
	// again is answered by that run (DefaultReattach when 0): a grant is for
	// the call it was asked for and its retries, not for ever.
	Reattach time.Duration
	Now      func() time.Time // defaults to time.Now
}

// DefaultReattach is how long after its run ended the same permission
// prompt is still answered by it.
const DefaultReattach = 10 * time.Minute

// Server holds the engine and builds MCP servers over it.
type Server struct {
	engine *workflow.Engine
	log    *slog.Logger
	cfg    Config
}

// New checks cfg and returns the server.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil {
		return nil, errors.New("new mcp server: an engine is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PermissionAction == "" {
		cfg.PermissionAction = DefaultPermissionAction
	}
	if _, ok := cfg.Engine.Action(cfg.PermissionAction); !ok {
		cfg.Logger.Debug("permission prompts are refused: the action is not configured", "action", cfg.PermissionAction)
	}
	switch {
	case cfg.Hold == 0:
		cfg.Hold = DefaultHold
	case cfg.Hold < 0 || cfg.Hold > MaxWait:
		return nil, fmt.Errorf("new mcp server: hold %s: want more than 0 and at most %s", cfg.Hold, MaxWait)
	}
	if cfg.Reattach <= 0 {
		cfg.Reattach = DefaultReattach
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	return &Server{engine: cfg.Engine, log: cfg.Logger, cfg: cfg}, nil
}

// identity says who calls a tool: the fixed requester of a stdio server, or
// the requester and scopes of an HTTP caller's token.
type identity func(req *mcp.CallToolRequest, scope string) (string, error)

// fixed is the identity of a stdio server: one requester, every scope.
func fixed(requester string) identity {
	return func(*mcp.CallToolRequest, string) (string, error) { return requester, nil }
}

// fromToken is the identity of an HTTP server: the token's requester, when
// the token holds the scope the tool needs.
func fromToken(req *mcp.CallToolRequest, scope string) (string, error) {
	ti := req.Extra
	if ti == nil || ti.TokenInfo == nil || ti.TokenInfo.UserID == "" {
		return "", errors.New("not authenticated: send Authorization: Bearer <token>")
	}
	for _, s := range ti.TokenInfo.Scopes {
		if s == scope {
			return ti.TokenInfo.UserID, nil
		}
	}
	return "", fmt.Errorf("this token lacks the scope %s", scope)
}

// MCP returns an MCP server whose tools speak for requester (a stdio server:
// one agent, one requester).
func (s *Server) MCP(requester string) *mcp.Server { return s.build(fixed(requester)) }

func (s *Server) build(who identity) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "signoff", Title: "signoff approvals", Version: s.cfg.Version},
		&mcp.ServerOptions{Logger: s.log, Instructions: instructions})
	t := &tools{s: s, who: who}
	for _, tl := range t.list() {
		srv.AddTool(tl.tool, tl.handler)
	}
	return srv
}

// RunStdio serves one agent over stdin and stdout, speaking for requester,
// until the agent closes the connection or ctx ends.
func (s *Server) RunStdio(ctx context.Context, requester string) error {
	if err := s.MCP(requester).Run(ctx, &mcp.StdioTransport{MaxLineLength: maxArgs + 64<<10}); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp server over stdio: %w", err)
	}
	return nil
}

const instructions = `signoff gates risky actions behind human approval in Slack.
Call request_approval with the actions you mean to take; when the answer's status is waiting_approval,
call wait_run until the run is done (the approved actions ran), rejected, expired or cancelled.
permission_prompt answers a coding agent's permission prompt.`

// toolError is a tool call's failure, returned to the caller as a result
// with isError: a refusal says what to change; anything else is logged and
// answered without its detail.
func (s *Server) toolError(tool string, err error) *mcp.CallToolResult {
	msg := err.Error()
	var re *record.RefusedError
	var bad badInput
	switch {
	case errors.As(err, &re):
		msg = re.Error()
	case errors.As(err, &bad):
	default:
		s.log.Error("mcp tool failed", "tool", tool, "err", err)
		msg = "internal error: the server could not answer; try again"
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// badInput is a tool call's input the server refuses; its message says why.
type badInput struct{ msg string }

func (b badInput) Error() string { return b.msg }

func badf(format string, args ...any) error { return badInput{fmt.Sprintf(format, args...)} }

// decodeArgs reads a tool call's arguments strictly into v: bounded, valid
// UTF-8, one JSON object with no unknown field and no duplicate key.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) > maxArgs {
		return badf("invalid arguments: larger than %d bytes", maxArgs)
	}
	if !utf8.Valid(raw) {
		return badf("invalid arguments: not valid UTF-8")
	}
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := workflow.DecodeStrict(raw, v); err != nil {
		return badf("invalid arguments: %v", err)
	}
	return nil
}

// result answers a tool call with v, as structured content and as its JSON
// text (for clients that read only text).
func result(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode the answer: %w", err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
}
