package config

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/policy"
)

// DefaultMCPHold is how long the MCP gateway holds a gated call for its
// decision before it answers that the call waits for approval; MaxMCPHold
// bounds it, below the minute many clients wait for an answer.
const (
	DefaultMCPHold = 50 * time.Second
	MaxMCPHold     = 50 * time.Second
)

// MCPConfig is the MCP gateway's: the upstream servers whose tools it
// serves, and who its HTTP callers are.
type MCPConfig struct {
	Upstreams []MCPUpstream
	// Identities map a bearer token's SHA-256 to the requester its calls
	// speak for. Without any, the gateway over HTTP takes api.tokens.
	Identities []MCPIdentity
	// Operators map a bearer token's SHA-256 to the person of the roles
	// who decides through the gateway's operator tools (signoff.approvals.*)
	// when calling with it. Without any, those tools are served to nobody
	// over HTTP.
	Operators []MCPOperator
	Hold      time.Duration
}

// MCPOperator is a person who decides runs through the gateway over HTTP:
// the hash of their token and their id, as the roles name them.
type MCPOperator struct {
	SHA256 [32]byte
	Member string
}

// MCPUpstream is one upstream MCP server: a program spoken to over its
// stdin and stdout (Command), or a streamable HTTP endpoint (URL) with
// headers whose values come from the environment only, so that the config
// never holds an upstream's secret.
type MCPUpstream struct {
	Name       string
	Command    []string
	URL        string
	HeadersEnv map[string]string // header name → environment variable
}

// MCPIdentity is an HTTP caller of the gateway: the hash of its token and
// the requester it speaks for.
type MCPIdentity struct {
	SHA256    [32]byte
	Requester string
}

type fileMCP struct {
	Upstreams  []fileUpstream `yaml:"upstreams"`
	Identities []fileIdentity `yaml:"identities"`
	Operators  []fileOperator `yaml:"operators"`
	Hold       string         `yaml:"hold"`
}

type fileOperator struct {
	TokenSHA256 string `yaml:"token_sha256"`
	Member      string `yaml:"member"`
}

type fileUpstream struct {
	Name       string            `yaml:"name"`
	Command    []string          `yaml:"command"`
	URL        string            `yaml:"url"`
	HeadersEnv map[string]string `yaml:"headers_env"`
}

type fileIdentity struct {
	TokenSHA256 string `yaml:"token_sha256"`
	Requester   string `yaml:"requester"`
}

// An upstream's name prefixes its tools' names (files.read_file), so it
// holds no dot, and stays within what MCP allows in a tool name.
var (
	upstreamName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
	envName      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerName   = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

func (c *checker) mcp(fm *fileMCP, roles *policy.Roles, apiTokens []APIToken) (MCPConfig, error) {
	mc := MCPConfig{Hold: DefaultMCPHold}
	if fm == nil {
		return mc, nil
	}
	names := map[string]bool{}
	for i, fu := range fm.Upstreams {
		u, err := c.upstream(fmt.Sprintf("mcp.upstreams[%d]", i), fu)
		if err != nil {
			return mc, err
		}
		if names[u.Name] {
			return mc, c.failf(fmt.Sprintf("mcp.upstreams[%d].name", i), "%q names another upstream too: each needs its own name", u.Name)
		}
		names[u.Name] = true
		mc.Upstreams = append(mc.Upstreams, u)
	}
	if len(fm.Upstreams) == 0 {
		return mc, c.failf("mcp.upstreams", "required: at least one upstream MCP server, e.g. - {name: files, command: [npx, -y, \"@modelcontextprotocol/server-filesystem\", /srv/data]}")
	}
	var err error
	if mc.Identities, err = c.identities(fm.Identities); err != nil {
		return mc, err
	}
	if mc.Operators, err = c.operators(fm.Operators, roles, mc.Identities, apiTokens); err != nil {
		return mc, err
	}
	if strings.TrimSpace(fm.Hold) != "" {
		d, err := parseDuration(fm.Hold)
		if err != nil {
			return mc, c.fail("mcp.hold", err)
		}
		if d <= 0 || d > MaxMCPHold {
			return mc, c.failf("mcp.hold", "%s: want more than 0 and at most %s, before the client gives up on the call", fm.Hold, MaxMCPHold)
		}
		mc.Hold = d
	}
	return mc, nil
}

// upstream reads one upstream: a name, and a command or a URL.
func (c *checker) upstream(path string, fu fileUpstream) (MCPUpstream, error) {
	u := MCPUpstream{Name: strings.TrimSpace(fu.Name), Command: fu.Command, URL: strings.TrimSpace(fu.URL)}
	if !upstreamName.MatchString(u.Name) {
		return u, c.failf(path+".name", "%q: want a short lower-case name (letters, digits, _ and -, at most 32), which prefixes its tools' names", fu.Name)
	}
	switch {
	case len(u.Command) > 0 && u.URL != "":
		return u, c.failf(path+".url", "give command or url, not both")
	case len(u.Command) == 0 && u.URL == "":
		return u, c.failf(path, "required: command (a program speaking MCP on stdio) or url (a streamable HTTP endpoint)")
	case len(u.Command) > 0:
		if strings.TrimSpace(u.Command[0]) == "" {
			return u, c.failf(path+".command", "the first item must be the program to run")
		}
		if len(fu.HeadersEnv) > 0 {
			return u, c.failf(path+".headers_env", "headers go with url: an upstream run as a command takes its environment")
		}
		return u, nil
	}
	p, err := url.Parse(u.URL)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.User != nil {
		return u, c.failf(path+".url", "want an http(s) URL without credentials (headers_env names where they come from), got %q", limitText(fu.URL))
	}
	if p.Scheme == "http" && !isLoopback(p.Hostname()) {
		c.warnf(path+".url", "plain http to %s: the headers and every call travel unencrypted", p.Host)
	}
	for _, h := range keysInOrder(c.doc, path+".headers_env", fu.HeadersEnv) {
		env := fu.HeadersEnv[h]
		if !headerName.MatchString(h) {
			return u, c.failf(path+".headers_env", "%q is not an HTTP header name", limitText(h))
		}
		if !envName.MatchString(env) {
			return u, c.failf(joinKey(path+".headers_env", h), "want the name of an environment variable holding the value (never the value itself), got %d characters", len(env))
		}
		if u.HeadersEnv == nil {
			u.HeadersEnv = map[string]string{}
		}
		u.HeadersEnv[http.CanonicalHeaderKey(h)] = env
	}
	return u, nil
}

// identities reads the gateway's HTTP callers: each token hash once.
func (c *checker) identities(fis []fileIdentity) ([]MCPIdentity, error) {
	var out []MCPIdentity
	seen := map[[32]byte]bool{}
	for i, fi := range fis {
		path := fmt.Sprintf("mcp.identities[%d]", i)
		h := strings.TrimSpace(fi.TokenSHA256)
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 32 {
			return nil, c.failf(path+".token_sha256", "want the token's SHA-256 as 64 hex digits (signoff token new prints it), got %d characters", len(h))
		}
		var id MCPIdentity
		copy(id.SHA256[:], b)
		if seen[id.SHA256] {
			return nil, c.failf(path+".token_sha256", "the same token as another identity: every caller needs its own")
		}
		seen[id.SHA256] = true
		id.Requester = strings.TrimSpace(fi.Requester)
		if id.Requester == "" || strings.ContainsFunc(id.Requester, isControl) {
			return nil, c.failf(path+".requester", "required: the requester the token's calls speak for, one line (e.g. agent:coder)")
		}
		out = append(out, id)
	}
	return out, nil
}

// operators reads the people who decide through the gateway: each token
// hash once, and never an agent's (an identity's or an API token's), so
// that an agent's token never reaches the operator tools; each a member
// of the roles, who decides with their role.
func (c *checker) operators(fos []fileOperator, roles *policy.Roles, ids []MCPIdentity, apiTokens []APIToken) ([]MCPOperator, error) {
	var out []MCPOperator
	seen := map[[32]byte]bool{}
	for i, fo := range fos {
		path := fmt.Sprintf("mcp.operators[%d]", i)
		h := strings.TrimSpace(fo.TokenSHA256)
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 32 {
			return nil, c.failf(path+".token_sha256", "want the token's SHA-256 as 64 hex digits (signoff token new prints it), got %d characters", len(h))
		}
		var op MCPOperator
		copy(op.SHA256[:], b)
		if seen[op.SHA256] {
			return nil, c.failf(path+".token_sha256", "the same token as another operator: every operator needs their own")
		}
		seen[op.SHA256] = true
		for j, id := range ids {
			if id.SHA256 == op.SHA256 {
				return nil, c.failf(path+".token_sha256", "the token of mcp.identities[%d] (%s): an agent's token never decides; give the operator a token of their own", j, limitText(id.Requester))
			}
		}
		for _, t := range apiTokens {
			if t.SHA256 == op.SHA256 {
				return nil, c.failf(path+".token_sha256", "the token of api.tokens %s: an agent's token never decides; give the operator a token of their own", limitText(t.ID))
			}
		}
		op.Member = strings.TrimSpace(fo.Member)
		if op.Member == "" || strings.ContainsFunc(op.Member, isControl) {
			return nil, c.failf(path+".member", "required: the person who decides with this token, as the roles name them (e.g. U0LEAD0001)")
		}
		if _, ok := roles.RoleOf(op.Member); !ok {
			return nil, c.failf(path+".member", "%q is in no role: an operator decides with their role, so add them to one (roles: members)", limitText(op.Member))
		}
		out = append(out, op)
	}
	return out, nil
}

func limitText(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Lists says whether action may be a tool of an upstream (mcp:<upstream>.<tool>
// for one of mcp.upstreams): the upstream lists its tools when the gateway
// connects, so that a rule may name one the config does not declare.
func (m MCPConfig) Lists(action string) bool {
	for _, u := range m.Upstreams {
		if rest, ok := strings.CutPrefix(action, "mcp:"+u.Name+"."); ok && rest != "" {
			return true
		}
	}
	return false
}
