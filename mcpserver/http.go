package mcpserver

import (
	"errors"
	"net/http"
	"time"

	"github.com/signoff-dev/signoff/internal/bearer"
	"github.com/signoff-dev/signoff/internal/mcphttp"
)

// MaxBodyBytes caps an HTTP request's body: a proposal's bound and room for
// the JSON-RPC envelope.
const MaxBodyBytes = maxArgs + 64<<10

// HTTPConfig is what the streamable HTTP handler checks.
type HTTPConfig struct {
	// Tokens are the agent API's tokens: each names the requester its calls
	// speak for and its scopes (submit: request_approval and
	// permission_prompt; read: get_run and wait_run; cancel: cancel_run).
	Tokens []bearer.Token
	// Rate (requests a second) and Burst bound each token's calls.
	Rate  float64
	Burst int
	Now   func() time.Time // the rate limiter's clock; defaults to time.Now
	// Origins are the browser origins allowed to call (scheme://host[:port]);
	// a request with another Origin header is refused. A request without
	// one (not from a browser) is let through to the token check.
	Origins []string
}

// Handler is the server over streamable HTTP, stateless: each POST is a
// whole exchange, as the 2026-07-28 revision has it, and the older
// revisions the SDK negotiates are answered the same way. Before the SDK
// sees a request it checks the Origin, the bearer token and its rate, and
// caps the body; the SDK refuses a localhost request for another Host (DNS
// rebinding).
func (s *Server) Handler(cfg HTTPConfig) (http.Handler, error) {
	h, err := mcphttp.Handler(s.build(fromToken), mcphttp.Config{Tokens: cfg.Tokens, Rate: cfg.Rate, Burst: cfg.Burst, Now: cfg.Now,
		Origins: cfg.Origins, MaxBodyBytes: MaxBodyBytes, Logger: s.log})
	if errors.Is(err, mcphttp.ErrNoTokens) {
		return nil, errors.New("mcp over http: no token is configured (api.tokens): every call needs one")
	}
	return h, err
}
