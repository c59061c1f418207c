package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// maxArgs bounds a call's arguments, as a proposal is bounded.
const maxArgs = workflow.MaxProposalBytes

// handler is a tool's handler: the call becomes a proposal; what the engine
// makes of it is the answer. A failure is a tool error (isError), which the
// agent reads, rather than a protocol error.
func (g *Gateway) handler(t *tool, who identity) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		requester, err := who(req)
		if err != nil {
			return toolError(err.Error()), nil
		}
		args, err := callArgs(req.Params.Arguments)
		if err != nil {
			return toolError(err.Error()), nil
		}
		v, err := g.propose(ctx, requester, t, args)
		if err == nil {
			v, err = g.hold(ctx, req, v)
		}
		if err != nil {
			return g.failed(t, err), nil
		}
		return g.answer(v), nil
	}
}

// callArgs are a call's arguments as the run stores them: one JSON object,
// bounded, valid UTF-8, in canonical form (so that the same arguments in
// another key order are the same call).
func callArgs(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	switch {
	case len(raw) > maxArgs:
		return nil, fmt.Errorf("invalid arguments: larger than %d bytes", maxArgs)
	case !utf8.Valid(raw):
		return nil, errors.New("invalid arguments: not valid UTF-8")
	case bytes.TrimSpace(raw)[0] != '{':
		return nil, errors.New("invalid arguments: want a JSON object")
	}
	c, err := jsonvalue.Canonical(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid arguments: %v", err)
	}
	return c, nil
}

// propose makes the call a run, or finds the run it already is. A call the
// policy lets through is a run of its own each time (a read reads anew). A
// call it gates is known by its requester, upstream, tool and arguments
// (the run's task id is their digest): made again while its run waits, or
// within Reattach of its end, it is that run; later it is proposed anew,
// under the next idempotency key, so that two calls racing make one run.
func (g *Gateway) propose(ctx context.Context, requester string, t *tool, args json.RawMessage) (*workflow.RunView, error) {
	p, err := proposal(requester, t, args)
	if err != nil {
		return nil, err
	}
	if g.allowed(ctx, p) {
		return g.submit(ctx, t, p)
	}
	return g.attach(ctx, t, p)
}

// proposal is the call as a proposal, keyed by the digest of who calls
// what with which arguments.
func proposal(requester string, t *tool, args json.RawMessage) (*workflow.Proposal, error) {
	digest, err := jsonvalue.DigestOf([]any{requester, t.upstream, t.name, args})
	if err != nil {
		return nil, fmt.Errorf("digest the call: %w", err)
	}
	p := &workflow.Proposal{TaskID: "mcp:" + digest, Requester: record.Person{ID: requester},
		Summary: "MCP call " + t.served.Name, Actions: []record.Action{{Name: t.Action(), Args: args}}}
	if t.annotations != nil {
		// The server's claims, for the policy to read as such, and for an
		// approver to see beside the arguments.
		p.Evidence = []record.Evidence{{Source: policy.MCPAnnotationsSource, Data: t.annotations}}
	}
	return p, nil
}

// attach is the run of a gated call: the one that waits or ended within
// Reattach, else a new one.
func (g *Gateway) attach(ctx context.Context, t *tool, p *workflow.Proposal) (*workflow.RunView, error) {
	runs, err := g.cfg.Engine.List(ctx, storage.RunFilter{TaskID: p.TaskID, RequesterID: p.Requester.ID})
	if err != nil {
		return nil, fmt.Errorf("list the runs of the call: %w", err)
	}
	if n := len(runs); n > 0 {
		last := latest(runs)
		if !last.Status.Terminal() || g.cfg.Now().Sub(last.UpdatedAt) < g.cfg.Reattach {
			return g.cfg.Engine.Get(ctx, last.ID)
		}
	}
	p.IdempotencyKey = fmt.Sprintf("%s/%d", p.TaskID, len(runs))
	return g.submit(ctx, t, p)
}

// submit proposes p, unless the upstream is down: a new call is then
// answered at once, with nothing proposed, and a later one reconnects
// (conn.go). A call that is a run already is answered by its run.
func (g *Gateway) submit(ctx context.Context, t *tool, p *workflow.Proposal) (*workflow.RunView, error) {
	if _, err := t.conn.get(ctx); err != nil {
		return nil, err
	}
	run, _, err := g.cfg.Engine.SubmitReplay(ctx, p)
	if err != nil {
		return nil, err
	}
	return g.cfg.Engine.Get(ctx, run.ID)
}

// allowed says whether the policy lets p through without approval. When it
// cannot tell, the call is keyed as a gated one: a repeat never makes a
// second run of a call that waits.
func (g *Gateway) allowed(ctx context.Context, p *workflow.Proposal) bool {
	x, err := g.cfg.Explain(ctx, p)
	return err == nil && x.Gate.Approval == nil
}

func latest(runs []*record.Run) *record.Run {
	last := runs[0]
	for _, r := range runs[1:] {
		if r.CreatedAt.After(last.CreatedAt) || (r.CreatedAt.Equal(last.CreatedAt) && r.ID > last.ID) {
			last = r
		}
	}
	return last
}

// hold waits up to the hold for a gated run's decision, telling a client
// that asked for progress that it still waits; an approved run is then
// carried out here. A hold that ends first leaves the run waiting and
// executes nothing.
func (g *Gateway) hold(ctx context.Context, req *mcp.CallToolRequest, v *workflow.RunView) (*workflow.RunView, error) {
	if waiting(v.Status) && v.Problem == "" {
		hctx, cancel := context.WithTimeout(ctx, g.cfg.Hold)
		stop := g.progress(hctx, req, v.ID)
		var err error
		v, err = g.settle(hctx, v)
		stop()
		cancel()
		if err != nil {
			return nil, err
		}
	}
	if v.Status != record.StatusExecuting || v.Problem != "" {
		return v, nil
	}
	// Approved: carried out now, not left for a worker, and not cut short
	// by the client going away mid-call (that would leave the outcome unknown).
	if _, err := g.cfg.Engine.Follow(context.WithoutCancel(ctx), v.ID); err != nil {
		return nil, err
	}
	return g.cfg.Engine.Get(ctx, v.ID)
}

// waiting says whether a run in st waits for people or for its window.
func waiting(st record.Status) bool {
	return st == record.StatusWaitingApproval || st == record.StatusScheduled || st == record.StatusRunning
}

// settle waits, on the engine's change feed, until the run no longer
// waits or ctx ends, and returns the run as it is then.
func (g *Gateway) settle(ctx context.Context, v *workflow.RunView) (*workflow.RunView, error) {
	for waiting(v.Status) && v.Problem == "" {
		next, changed, err := g.cfg.Engine.WaitRun(ctx, v.ID, v.Status)
		if err != nil {
			return nil, err
		}
		v = next
		if !changed {
			break
		}
	}
	return v, nil
}

// progress sends notifications/progress every Every while ctx lasts, when
// the client gave a progress token; it returns when stop is called.
func (g *Gateway) progress(ctx context.Context, req *mcp.CallToolRequest, runID string) (stop func()) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return func() {}
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		clock := workflow.SystemClock{}
		for n := 1; clock.Sleep(pctx, g.cfg.Every) == nil; n++ {
			err := req.Session.NotifyProgress(pctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n),
				Message: fmt.Sprintf("waiting for approval in Slack (run %s)", runID)})
			if err != nil && pctx.Err() == nil {
				g.log.Debug("progress not sent", "run_id", runID, "err", err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// answer is the call's answer from its run: the upstream's stored answer
// once done, a note that it waits, or an error that says why it did not run.
func (g *Gateway) answer(v *workflow.RunView) *mcp.CallToolResult {
	switch {
	case v.Problem != "":
		return toolError(fmt.Sprintf("not run: run %s failed its integrity check: %s", v.ID, v.Problem))
	case v.Status == record.StatusDone:
		return g.stored(v)
	case v.Status == record.StatusScheduled:
		return waitingResult(v, fmt.Sprintf("approved; it runs when its execution window opens (run %s). Make the same call again then to get its result.", v.ID))
	case v.Status == record.StatusExecuting:
		why := ""
		if v.Reason != "" {
			why = ": " + v.Reason
		}
		return waitingResult(v, fmt.Sprintf("approved and being carried out (run %s)%s. Make the same call again, with the same arguments, to get its result.", v.ID, why))
	case waiting(v.Status):
		return waitingResult(v, fmt.Sprintf("waiting for approval in Slack (run %s); nothing ran yet. Make the same call again, with the same arguments, to get its result once it is decided.", v.ID))
	case v.Status == record.StatusNeedsAttention:
		return toolError(fmt.Sprintf("run %s needs a person: %s", v.ID, v.Reason))
	}
	msg := fmt.Sprintf("not run: run %s was %s", v.ID, v.Status)
	if v.Reason != "" {
		msg += ": " + v.Reason
	}
	return toolError(msg)
}

func waitingResult(v *workflow.RunView, msg string) *mcp.CallToolResult {
	meta := mcp.Meta{"signoff/run_id": v.ID, "signoff/status": string(v.Status)}
	if m, ok := posted(v); ok {
		msg += " The approval message: " + m.link
		meta["signoff/approval_url"], meta["signoff/slack_channel"], meta["signoff/slack_ts"] = m.link, m.channel, m.ts
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}, Meta: meta}
}

// message is where a run's approval request was posted in Slack.
type message struct{ channel, ts, link string }

var (
	slackChannel = regexp.MustCompile(`^[A-Z0-9]{1,40}$`)
	slackTS      = regexp.MustCompile(`^[0-9]{1,20}\.[0-9]{1,10}$`)
)

// posted is the message of the run's latest request that was posted, and
// its link in the form Slack's own links take (Slack sends whoever follows
// it to their workspace). A channel or ts of another shape is left out
// rather than put in a link.
func posted(v *workflow.RunView) (message, bool) {
	for i := len(v.Requests) - 1; i >= 0; i-- {
		r := v.Requests[i]
		if slackChannel.MatchString(r.Channel) && slackTS.MatchString(r.MessageTS) {
			return message{channel: r.Channel, ts: r.MessageTS,
				link: "https://slack.com/archives/" + r.Channel + "/p" + strings.ReplaceAll(r.MessageTS, ".", "")}, true
		}
	}
	return message{}, false
}

// stored is the upstream's answer as the receipt keeps it.
func (g *Gateway) stored(v *workflow.RunView) *mcp.CallToolResult {
	if len(v.Operations) != 1 || len(v.Operations[0].Receipt) == 0 {
		return toolError(fmt.Sprintf("run %s is done but holds no answer of the upstream", v.ID))
	}
	var rc record.Receipt
	var res mcp.CallToolResult
	if err := json.Unmarshal(v.Operations[0].Receipt, &rc); err != nil || json.Unmarshal(rc.Detail, &res) != nil {
		g.log.Error("a stored answer cannot be read", "run_id", v.ID)
		return toolError(fmt.Sprintf("run %s is done but its stored answer cannot be read", v.ID))
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	return &res
}

// failed is the answer to a call the engine did not take: a refusal says
// what to change; anything else is logged and answered without its detail.
func (g *Gateway) failed(t *tool, err error) *mcp.CallToolResult {
	var re *record.RefusedError
	var down *DownError
	switch {
	case errors.As(err, &re):
		return toolError("signoff refused the call: " + re.Error())
	case errors.As(err, &down):
		return toolError(down.Error() + ". Nothing was proposed or run: make the call again later.")
	case errors.Is(err, context.Canceled):
		// The client cancelled the call or went away: its run, if any, goes
		// on, and the same call made again attaches to it.
		g.log.Info("mcp gateway call ended by its client", "tool", t.served.Name)
		return toolError("the call was cancelled; a run it started goes on: make the same call again to attach to it")
	}
	g.log.Error("mcp gateway call failed", "tool", t.served.Name, "err", err)
	return toolError("internal error: signoff could not take the call; try again")
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimSpace(msg)}}}
}
