package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/internal/bearer"
	"github.com/signoff-dev/signoff/mcpgateway"
	"github.com/signoff-dev/signoff/workflow"
)

// connectUpstreams connects, in a process that may carry out actions, to
// the MCP servers of mcp.upstreams and adds an action for each tool they
// list: the gateway proposes their calls, and whichever process follows an
// approval (serve, a CLI decision, the gateway) calls the tool. An upstream
// that cannot be reached stops the gateway; elsewhere it is a warning, and
// a run of its tools waits for a process that reaches it.
func (a *app) connectUpstreams(ctx context.Context, o options, actions map[string]*workflow.ActionSpec) (map[string]*workflow.ActionSpec, error) {
	if o.readOnly || len(a.cfg.MCP.Upstreams) == 0 {
		return actions, nil
	}
	ups, err := upstreamsOf(a.cfg, a.getenv)
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		a.upstreams, err = mcpgateway.Connect(cctx, ups, strings.TrimPrefix(version(), "signoff "), a.log)
		cancel()
	}
	if err != nil {
		if o.mcpGateway {
			return nil, err
		}
		a.log.Warn("mcp upstreams not connected: their tools run in a process that reaches them", "err", err)
		return actions, nil
	}
	return a.upstreams.Actions(actions)
}

// upstreamsOf are the config's upstreams, each header's value read from
// the environment variable the config names.
func upstreamsOf(cfg *config.Config, getenv func(string) string) ([]mcpgateway.Upstream, error) {
	var out []mcpgateway.Upstream
	for i, u := range cfg.MCP.Upstreams {
		if len(u.Command) > 0 {
			out = append(out, mcpgateway.CommandUpstream(u.Name, u.Command))
			continue
		}
		headers := map[string]string{}
		for h, env := range u.HeadersEnv {
			v := getenvOr(getenv)(env)
			if v == "" {
				return nil, usageError{fmt.Sprintf("mcp.upstreams[%d].headers_env.%s: the environment variable %s is not set", i, h, env)}
			}
			headers[h] = v
		}
		out = append(out, mcpgateway.HTTPUpstream(u.Name, u.URL, headers))
	}
	return out, nil
}

// gatewayOptions are the flags of mcp gateway.
type gatewayOptions struct {
	stdio     bool
	requester string
	operator  string
	listen    string
	origins   []string
}

func (c *cli) gatewayCmd() *cobra.Command {
	var o gatewayOptions
	cmd := &cobra.Command{
		Use:   "gateway (--stdio --requester R [--operator U] | --listen ADDR)",
		Short: "Serve the tools of the MCP servers of mcp.upstreams, each call gated by the policy",
		Long: `Serve the tools of mcp.upstreams as <upstream>.<tool>: each call is a proposal of the
action mcp:<upstream>.<tool> with the call's arguments. A call the policy lets through
reaches the upstream at once; a gated one is held for its decision up to mcp.hold, then
answered as waiting, and the same call made again returns the upstream's answer once it
is approved (the upstream is called once, with the stored arguments). A client
that declares the Tasks extension (io.modelcontextprotocol/tasks) gets a gated call
as a task at once instead, its id the run id, to poll with tasks/get.

Over stdin and stdout the gateway speaks for --requester; over streamable HTTP on
--listen each call carries a token of mcp.identities (or of api.tokens with the submit
scope). Run signoff serve beside it for Slack.

The signoff.approvals tools (list_pending, show, approve, reject) decide runs as a
person of the roles, exactly as in Slack: over stdio when --operator names them, over
HTTP for a token of mcp.operators (which is served those tools alone).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case o.stdio == (o.listen != ""):
				return usageError{"give --stdio (with --requester) or --listen ADDR"}
			case o.stdio && strings.TrimSpace(o.requester) == "":
				return usageError{"--stdio needs --requester, the requester every call speaks for"}
			case !o.stdio && o.requester != "":
				return usageError{"--requester goes with --stdio; over HTTP each token names its requester"}
			case !o.stdio && o.operator != "":
				return usageError{"--operator goes with --stdio; over HTTP the tokens of mcp.operators name who decides"}
			}
			opts := c.opts
			opts.mcpGateway = true
			a, err := openApp(c.ctx, opts, c.getenv, c.errOut, c.clock)
			if err != nil {
				return err
			}
			defer a.Close()
			return c.serveGateway(a, o)
		},
	}
	cmd.Flags().BoolVar(&o.stdio, "stdio", false, "serve one agent over stdin and stdout")
	cmd.Flags().StringVar(&o.requester, "requester", "", "with --stdio: the requester every call speaks for, e.g. agent:coder")
	cmd.Flags().StringVar(&o.operator, "operator", "", "with --stdio: serve the signoff.approvals tools too, deciding as this person of the roles, e.g. U0LEAD0001")
	cmd.Flags().StringVar(&o.listen, "listen", "", "serve streamable HTTP on this address, e.g. 127.0.0.1:8767")
	cmd.Flags().StringSliceVar(&o.origins, "allow-origin", nil, "with --listen: a browser origin allowed to call (scheme://host[:port])")
	return cmd
}

func (c *cli) serveGateway(a *app, o gatewayOptions) error {
	if a.upstreams == nil {
		return usageError{"the config has no mcp.upstreams: the MCP servers the gateway stands in front of"}
	}
	wcfg := a.wcfg
	g, err := mcpgateway.New(mcpgateway.Config{Engine: a.engine, Upstreams: a.upstreams, Logger: a.log,
		Version: strings.TrimPrefix(version(), "signoff "), Hold: a.cfg.MCP.Hold,
		Explain: func(ctx context.Context, p *workflow.Proposal) (*workflow.Explanation, error) {
			return workflow.Explain(ctx, wcfg, p)
		}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	stop := a.feedChanges(ctx) // a held call wakes on serve's decisions
	defer stop()
	if o.stdio {
		if _, ok := a.engine.Roles().RoleOf(o.requester); !ok && !a.cfg.Requesters.AllowUnknown {
			return usageError{fmt.Sprintf("--requester %s holds no role in the config: add them to a role (roles: members), or let anyone propose (requesters: {allow_unknown: true})", quote(o.requester))}
		}
		if err := checkOperator(a, o); err != nil {
			return err
		}
		a.log.Info("mcp gateway on stdio", "requester", o.requester, "operator", o.operator, "tools", len(a.upstreams.Tools()))
		return g.RunStdio(ctx, o.requester, o.operator)
	}
	h, err := g.Handler(mcpgateway.HTTPConfig{Tokens: gatewayTokens(a.cfg), Rate: a.cfg.API.Rate, Burst: a.cfg.API.Burst, Origins: o.origins})
	if err != nil {
		return err
	}
	return c.listenMCP(ctx, "mcp gateway", o.listen, h)
}

// checkOperator refuses a --operator who is in no role, or who is the
// requester the session speaks for (who may never approve their own runs).
func checkOperator(a *app, o gatewayOptions) error {
	switch {
	case o.operator == "":
		return nil
	case o.operator == o.requester:
		return usageError{"--operator is the --requester: the session that asks never decides its own runs; name the person who decides"}
	}
	if _, ok := a.engine.Roles().RoleOf(o.operator); !ok {
		return usageError{fmt.Sprintf("--operator %s holds no role in the config: an operator decides with their role (roles: members)", quote(o.operator))}
	}
	return nil
}

// gatewayTokens are the gateway's HTTP callers: mcp.identities, or else the
// agent API's tokens that may submit; and the operators of mcp.operators,
// each marked so, who are served the operator tools alone.
func gatewayTokens(cfg *config.Config) []bearer.Token {
	var out []bearer.Token
	for i, id := range cfg.MCP.Identities {
		out = append(out, bearer.Token{ID: fmt.Sprintf("mcp.identities[%d]", i), SHA256: id.SHA256, Requester: id.Requester})
	}
	if len(out) == 0 {
		for _, t := range cfg.API.Tokens {
			if t.Has(config.ScopeSubmit) {
				out = append(out, bearer.Token(apiToken(t)))
			}
		}
	}
	for i, op := range cfg.MCP.Operators {
		out = append(out, bearer.Token{ID: fmt.Sprintf("mcp.operators[%d]", i), SHA256: op.SHA256, Requester: op.Member,
			Scopes: []string{mcpgateway.OperatorScope}})
	}
	return out
}

// listenMCP serves h on addr until ctx ends.
func (c *cli) listenMCP(ctx context.Context, what, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	srv := httpServer(h, 0)
	fmt.Fprintf(c.errOut, "signoff: %s on http://%s/\n", what, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("%s: %w", what, err)
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: shut down: %w", what, err)
	}
	return nil
}
