package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// MaxResultBytes bounds an upstream's answer as the receipt stores it; a
// longer one is stored as its text, cut, and marked so.
const MaxResultBytes = 256 << 10

// ExecutorType is the executor type of an action declared in the config for
// an upstream tool (actions: {"mcp:files.write_file": {executor: mcp,
// schema: …}}): the gateway carries it out through the upstream.
const ExecutorType = "mcp"

// toolExecutor calls one upstream tool with the stored arguments and keeps
// its answer, bounded, as the receipt.
type toolExecutor struct{ t *tool }

var _ workflow.Executor = (*toolExecutor)(nil)

// Check has nothing to ask: MCP has no read-only precondition to check.
func (x *toolExecutor) Check(context.Context, record.Action) error { return nil }

// Execute calls the tool once. MCP has no idempotency key, so that an error
// after the call may have left the upstream changed: it is an unknown
// outcome, which Lookup cannot settle. An upstream that is down (or whose
// endpoint refuses the connection) certainly got nothing: that is
// transient, retried as the engine's retry policy says, and Lookup says so
// of that key once.
func (x *toolExecutor) Execute(ctx context.Context, key string, a record.Action) (record.Receipt, error) {
	var args map[string]any
	if err := json.Unmarshal(a.Args, &args); err != nil {
		return record.Receipt{}, workflow.Permanent(fmt.Errorf("the arguments of %s are not a JSON object: %w", x.t.served.Name, err))
	}
	c := x.t.conn
	cs, err := c.get(ctx)
	if err == nil {
		var res *mcp.CallToolResult
		if res, err = c.call(ctx, cs, &mcp.CallToolParams{Name: x.t.name, Arguments: args}); err == nil {
			return x.receipt(key, res)
		}
	}
	err = fmt.Errorf("call %s on the upstream %s: %w", x.t.name, x.t.upstream, err)
	if notSent(err) {
		c.markUnsent(key)
		return record.Receipt{}, workflow.Transient(err)
	}
	return record.Receipt{}, err
}

func (x *toolExecutor) receipt(key string, res *mcp.CallToolResult) (record.Receipt, error) {
	detail, err := storedResult(res)
	if err != nil {
		return record.Receipt{}, fmt.Errorf("keep the answer of %s: %w", x.t.served.Name, err)
	}
	return record.Receipt{ID: key, Detail: detail}, nil
}

// errUnknowable is Lookup's answer: a call that may have reached the
// upstream cannot be asked about, so that a person looks (needs_attention)
// rather than the call being made a second time.
var errUnknowable = errors.New("MCP has no idempotency key: whether the call reached the upstream cannot be asked; " +
	"check the upstream, then resolve the run")

// Lookup knows only of a key whose last attempt this process saw fail
// before anything was sent: that did not happen. Of any other it cannot
// know: see errUnknowable.
func (x *toolExecutor) Lookup(_ context.Context, key string) (record.Receipt, bool, error) {
	if x.t.conn.takeUnsent(key) {
		return record.Receipt{}, false, nil
	}
	return record.Receipt{}, false, workflow.Permanent(errUnknowable)
}

// storedResult is the upstream's answer as the receipt keeps it: whole
// when it fits MaxResultBytes, else its text content cut to fit.
func storedResult(res *mcp.CallToolResult) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	if len(b) <= MaxResultBytes {
		return b, nil
	}
	var txt string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			txt += t.Text
			if len(txt) > MaxResultBytes/2 {
				break
			}
		}
	}
	cut := &mcp.CallToolResult{IsError: res.IsError, Content: []mcp.Content{&mcp.TextContent{
		Text: limit(txt, MaxResultBytes/2) + fmt.Sprintf("\n[the answer was %d bytes; signoff kept the first part of its text]", len(b))}}}
	return json.Marshal(cut)
}

// placeholder is the executor of a declared mcp action outside the
// gateway: only the gateway holds the upstream's session. Its Check fails
// transiently, so that a worker of another process leaves the run for the
// gateway's.
type placeholder struct{}

// Placeholder is the executor an mcp action of the config is built with
// where no gateway runs (signoff serve, the CLI): it never calls anything.
func Placeholder() workflow.Executor { return placeholder{} }

func (placeholder) Check(context.Context, record.Action) error {
	return workflow.Transient(errors.New("an upstream MCP tool runs only in signoff mcp gateway"))
}

func (placeholder) Execute(context.Context, string, record.Action) (record.Receipt, error) {
	return record.Receipt{}, workflow.Transient(errors.New("an upstream MCP tool runs only in signoff mcp gateway"))
}

func (placeholder) Lookup(context.Context, string) (record.Receipt, bool, error) {
	return record.Receipt{}, false, workflow.Permanent(errUnknowable)
}
