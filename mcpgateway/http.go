package mcpgateway

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/internal/bearer"
	"github.com/signoff-dev/signoff/internal/mcphttp"
)

// MaxBodyBytes caps an HTTP request's body: a call's arguments and room
// for the JSON-RPC envelope.
const MaxBodyBytes = maxArgs + 64<<10

// HTTPConfig is what the streamable HTTP handler checks.
type HTTPConfig struct {
	// Tokens name the requester each caller's calls speak for (mcp.identities,
	// or the agent API's tokens); a token with OperatorScope names the
	// person who decides through the operator tools (mcp.operators).
	Tokens []bearer.Token
	// Rate (requests a second) and Burst bound each token's calls.
	Rate  float64
	Burst int
	Now   func() time.Time
	// Origins are the browser origins allowed to call; a request with
	// another Origin header is refused.
	Origins []string
}

// Handler is the gateway over streamable HTTP, stateless (each POST a whole
// exchange, as the 2026-07-28 revision has it): a broken stream comes back
// as the same call made again, which attaches to the same run. The Origin,
// the token and its rate are checked and the body capped before the SDK
// reads anything.
func (g *Gateway) Handler(cfg HTTPConfig) (http.Handler, error) {
	agents := g.build(fromToken, nil)
	h, err := mcphttp.Handler(agents, mcphttp.Config{Tokens: cfg.Tokens, Rate: cfg.Rate, Burst: cfg.Burst, Now: cfg.Now,
		Origins: cfg.Origins, MaxBodyBytes: MaxBodyBytes, Logger: g.log,
		// A token of mcp.operators is served the operator tools alone, as
		// its person; any other, the upstreams' tools alone.
		For: func(tok *auth.TokenInfo) *mcp.Server {
			if tok != nil && slices.Contains(tok.Scopes, OperatorScope) {
				return g.operatorMCP(tok.UserID)
			}
			return agents
		}})
	if errors.Is(err, mcphttp.ErrNoTokens) {
		return nil, errors.New("mcp gateway over http: no token is configured (mcp.identities or api.tokens): every call needs one")
	}
	return h, err
}
