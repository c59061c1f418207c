package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/internal/bearer"
	"github.com/signoff-dev/signoff/mcpserver"
)

// mcpOptions are the flags of mcp server.
type mcpOptions struct {
	stdio            bool
	requester        string
	listen           string
	origins          []string
	hold             time.Duration
	permissionAction string
}

func (c *cli) mcpCmd() *cobra.Command {
	m := &cobra.Command{Use: "mcp", Short: "Serve signoff's approval tools to agents over the Model Context Protocol"}
	var o mcpOptions
	srv := &cobra.Command{
		Use:   "server (--stdio --requester R | --listen ADDR)",
		Short: "Serve request_approval, get_run, wait_run, cancel_run and permission_prompt over MCP",
		Long: `Serve the approval tools over MCP: over stdin and stdout for one local agent,
speaking for --requester (who must hold a role, unless requesters.allow_unknown),
or over streamable HTTP on --listen, where each call carries one of api.tokens,
which names its requester and scopes.

The server submits and reads runs; run signoff serve beside it for Slack and
for the workers that execute approved runs.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(); err != nil {
				return err
			}
			return c.withApp(func(a *app) error { return c.serveMCP(a, o) })
		},
	}
	srv.Flags().BoolVar(&o.stdio, "stdio", false, "serve one agent over stdin and stdout")
	srv.Flags().StringVar(&o.requester, "requester", "", "with --stdio: the requester every call speaks for, e.g. agent:coder")
	srv.Flags().StringVar(&o.listen, "listen", "", "serve streamable HTTP on this address, e.g. 127.0.0.1:8766")
	srv.Flags().StringSliceVar(&o.origins, "allow-origin", nil, "with --listen: a browser origin allowed to call (scheme://host[:port]); others are refused")
	srv.Flags().DurationVar(&o.hold, "hold", mcpserver.DefaultHold, "how long permission_prompt waits for a decision before it denies as waiting (at most 50s)")
	srv.Flags().StringVar(&o.permissionAction, "permission-action", mcpserver.DefaultPermissionAction, "the configured action a permission prompt proposes")
	m.AddCommand(srv, c.gatewayCmd())
	return m
}

func (o *mcpOptions) check() error {
	switch {
	case o.stdio == (o.listen != ""):
		return usageError{"give --stdio (with --requester) or --listen ADDR"}
	case o.stdio && strings.TrimSpace(o.requester) == "":
		return usageError{"--stdio needs --requester, the requester every call speaks for"}
	case !o.stdio && o.requester != "":
		return usageError{"--requester goes with --stdio; over HTTP each token names its requester"}
	case o.hold <= 0 || o.hold > mcpserver.MaxWait:
		return usageError{fmt.Sprintf("--hold %s: want more than 0 and at most %s", o.hold, mcpserver.MaxWait)}
	}
	return nil
}

func (c *cli) serveMCP(a *app, o mcpOptions) error {
	if _, ok := a.engine.Action(o.permissionAction); !ok && o.permissionAction != mcpserver.DefaultPermissionAction {
		return usageError{fmt.Sprintf("--permission-action %s: no such action in the config", quote(o.permissionAction))}
	}
	s, err := mcpserver.New(mcpserver.Config{Engine: a.engine, Logger: a.log, Version: strings.TrimPrefix(version(), "signoff "), PermissionAction: o.permissionAction, Hold: o.hold})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	stop := a.feedChanges(ctx) // waits wake on other processes' commits (serve's decisions)
	defer stop()
	if o.stdio {
		if _, ok := a.engine.Roles().RoleOf(o.requester); !ok && !a.cfg.Requesters.AllowUnknown {
			return usageError{fmt.Sprintf("--requester %s holds no role in the config: add them to a role (roles: members), or let anyone propose (requesters: {allow_unknown: true})", quote(o.requester))}
		}
		a.log.Info("mcp server on stdio", "requester", o.requester)
		return s.RunStdio(ctx, o.requester)
	}
	return c.serveMCPHTTP(ctx, a, s, o)
}

func (c *cli) serveMCPHTTP(ctx context.Context, a *app, s *mcpserver.Server, o mcpOptions) error {
	hc := mcpserver.HTTPConfig{Rate: a.cfg.API.Rate, Burst: a.cfg.API.Burst, Origins: o.origins}
	for _, t := range a.cfg.API.Tokens {
		hc.Tokens = append(hc.Tokens, bearer.Token(apiToken(t)))
	}
	h, err := s.Handler(hc)
	if err != nil {
		return err
	}
	return c.listenMCP(ctx, "mcp server", o.listen, h)
}
