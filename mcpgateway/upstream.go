package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/workflow"
)

// Bounds of what an upstream says about its tools: a hostile server may
// send anything, so that what the gateway passes on is bounded.
const (
	maxDescription = 2048     // runes of a tool's description
	maxTitle       = 200      // runes of a tool's title
	maxSchemaBytes = 64 << 10 // a tool's input schema
	maxTools       = 1000     // tools of one upstream
	// maxToolName is MCP's bound on a tool's name (the SDK's rule).
	maxToolName = 128
)

// ActionPrefix starts the action name of every upstream tool:
// mcp:<upstream>.<tool>, as the policy sees it in action.name.
const ActionPrefix = policy.MCPActionPrefix

// Upstream is an upstream MCP server the gateway connects to.
type Upstream struct {
	Name      string
	Transport mcp.Transport
	// Dial makes a fresh transport to the same server, for a reconnect
	// once the connection is lost (a program that died, an HTTP endpoint
	// that dropped). Without it, the first connection is the only one.
	Dial func() mcp.Transport
}

// CommandUpstream is an upstream run as a program spoken to on its stdin
// and stdout. It inherits the gateway's environment, where its secrets are.
// A program that dies is started again on a later call.
func CommandUpstream(name string, argv []string) Upstream {
	dial := func() mcp.Transport { return &mcp.CommandTransport{Command: exec.Command(argv[0], argv[1:]...)} }
	return Upstream{Name: name, Transport: dial(), Dial: dial}
}

// HTTPUpstream is an upstream reached over streamable HTTP at url, each
// request carrying headers (their values read from the environment by the
// caller). The values go on the wire and nowhere else.
func HTTPUpstream(name, url string, headers map[string]string) Upstream {
	client := &http.Client{Transport: withHeaders{headers: headers, next: http.DefaultTransport}}
	dial := func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client} }
	return Upstream{Name: name, Transport: dial(), Dial: dial}
}

type withHeaders struct {
	headers map[string]string
	next    http.RoundTripper
}

func (w withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range w.headers {
		r.Header.Set(k, v)
	}
	return w.next.RoundTrip(r)
}

// tool is one upstream tool as the gateway serves it.
type tool struct {
	upstream string
	name     string    // the upstream's name for it
	served   *mcp.Tool // as the gateway lists it: namespaced, bounded
	conn     *upstreamConn
	// annotations are the upstream's claims about the tool, as JSON, for
	// the policy to read as such (evidence mcp.annotations); nil when none.
	annotations json.RawMessage
}

// Action is the action name of the tool: mcp:<upstream>.<tool>.
func (t *tool) Action() string { return ActionPrefix + t.served.Name }

// Upstreams are the connected upstream servers and the tools they listed.
type Upstreams struct {
	conns []*upstreamConn
	tools []*tool // in the order of the upstreams, then of their names
	log   *slog.Logger
}

// Connect connects to each upstream and lists its tools. A tool whose name
// MCP would refuse once namespaced is left out, with a warning.
func Connect(ctx context.Context, ups []Upstream, version string, log *slog.Logger) (*Upstreams, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u := &Upstreams{log: log}
	client := mcp.NewClient(&mcp.Implementation{Name: "signoff-gateway", Version: version}, nil)
	for _, up := range ups {
		cs, err := client.Connect(ctx, up.Transport, nil)
		if err != nil {
			u.Close()
			return nil, fmt.Errorf("connect to the upstream %s: %w", up.Name, err)
		}
		c := newConn(up, client, time.Now, log)
		c.attach(cs)
		u.conns = append(u.conns, c)
		if err := u.list(ctx, c); err != nil {
			u.Close()
			return nil, err
		}
	}
	return u, nil
}

func (u *Upstreams) list(ctx context.Context, c *upstreamConn) error {
	var tools []*tool
	for t, err := range c.session.Tools(ctx, nil) { // connected just now: nothing else uses it yet
		if err != nil {
			return fmt.Errorf("list the tools of the upstream %s: %w", c.name, err)
		}
		if len(tools) == maxTools {
			return fmt.Errorf("list the tools of the upstream %s: more than %d", c.name, maxTools)
		}
		served, err := serve(c.name, t)
		if err != nil {
			u.log.Warn("upstream tool left out", "upstream", c.name, "tool", limit(t.Name, 64), "err", err)
			continue
		}
		tools = append(tools, &tool{upstream: c.name, name: t.Name, served: served, conn: c, annotations: annotationsOf(t)})
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].name < tools[j].name })
	for i := 1; i < len(tools); i++ {
		if tools[i].name == tools[i-1].name {
			return fmt.Errorf("the upstream %s lists the tool %q twice", c.name, limit(tools[i].name, 64))
		}
	}
	u.tools = append(u.tools, tools...)
	return nil
}

// serve is the upstream's tool as the gateway lists it: named
// <upstream>.<tool>, its title and description bounded and without control
// characters, its input schema bounded. Its output schema is dropped: the
// gateway's own answers (waiting, rejected) carry no structured content.
// Annotations are passed on as the upstream's claims, never read by the
// gateway: a hostile server may call a destructive tool read-only.
func serve(upstream string, t *mcp.Tool) (*mcp.Tool, error) {
	name := upstream + "." + t.Name
	if err := checkToolName(t.Name, name); err != nil {
		return nil, err
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	if len(schema) > maxSchemaBytes {
		return nil, fmt.Errorf("input schema larger than %d bytes", maxSchemaBytes)
	}
	if string(schema) == "null" {
		schema = []byte(`{"type":"object"}`)
	}
	var ann *mcp.ToolAnnotations
	if t.Annotations != nil {
		a := *t.Annotations
		a.Title = text(a.Title, maxTitle)
		ann = &a
	}
	return &mcp.Tool{Name: name, Title: text(t.Title, maxTitle), Description: text(t.Description, maxDescription),
		InputSchema: json.RawMessage(schema), Annotations: ann}, nil
}

// checkToolName applies MCP's rule for tool names (letters, digits, _ - .,
// at most 128) to the namespaced name, and refuses a dot in the upstream's
// own, which would make two names read alike.
func checkToolName(own, name string) error {
	switch {
	case own == "":
		return errors.New("no name")
	case len(name) > maxToolName:
		return fmt.Errorf("the name %s is longer than %d bytes", limit(name, 64), maxToolName)
	case strings.Contains(own, "."):
		return errors.New("a dot in the name")
	}
	for _, r := range own {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("the character %q is not allowed in a tool's name", r)
		}
	}
	return nil
}

// text is an upstream's string bounded to n runes, its control characters
// (but newlines) replaced, so that it reads as text wherever it is shown.
func text(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	s = strings.Map(func(r rune) rune {
		if r != '\n' && (unicode.IsControl(r) || r == '\u2028' || r == '\u2029') {
			return ' '
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return s
}

func limit(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

// Close ends every upstream's session (and stops an upstream program).
func (u *Upstreams) Close() error {
	var errs []error
	for _, c := range u.conns {
		if err := c.close(); err != nil {
			errs = append(errs, fmt.Errorf("close the upstream %s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// tool is the tool served under name, or nil.
func (u *Upstreams) tool(name string) *tool {
	for _, t := range u.tools {
		if t.served.Name == name {
			return t
		}
	}
	return nil
}

// Tools are the action names of the tools the upstreams listed.
func (u *Upstreams) Tools() []string {
	out := make([]string, len(u.tools))
	for i, t := range u.tools {
		out[i] = t.Action()
	}
	return out
}

// Actions are base with an action for each listed tool: one declared in
// base (with its schema and redactions) is carried out by the upstream; any
// other is declared here, with no schema, so that the policy sees its
// arguments as they come.
func (u *Upstreams) Actions(base map[string]*workflow.ActionSpec) (map[string]*workflow.ActionSpec, error) {
	out := make(map[string]*workflow.ActionSpec, len(base)+len(u.tools))
	for k, v := range base {
		out[k] = v
	}
	for _, t := range u.tools {
		x := &toolExecutor{t: t}
		if d, ok := base[t.Action()]; ok {
			out[t.Action()] = &workflow.ActionSpec{ActionSpec: d.ActionSpec, Executor: x, ReconcileWithin: d.ReconcileWithin}
			continue
		}
		spec, err := workflow.NewActionSpec(t.Action(), nil, x, nil)
		if err != nil {
			return nil, fmt.Errorf("declare the action of %s: %w", t.served.Name, err)
		}
		out[t.Action()] = spec
	}
	return out, nil
}
