package mcpgateway

import (
	"context"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/internal/bearer"
)

// MaxBodyBytes caps an HTTP request's body: a call's arguments and room
// for the JSON-RPC envelope.
const MaxBodyBytes = maxArgs + 64<<10

// HTTPConfig is what the streamable HTTP handler checks.
type HTTPConfig struct {
	// Tokens name the requester each caller's calls speak for (mcp.identities,
	// or the agent API's tokens).
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
	if len(cfg.Tokens) == 0 {
		return nil, errors.New("mcp gateway over http: no token is configured (mcp.identities or api.tokens): every call needs one")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 10
	}
	if cfg.Burst < 1 {
		cfg.Burst = 20
	}
	srv := g.build(fromToken)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: g.log, MaxRequestBodyBytes: MaxBodyBytes})
	verify := func(_ context.Context, secret string, _ *http.Request) (*auth.TokenInfo, error) {
		tok, ok := bearer.Find(cfg.Tokens, secret)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: tok.Requester, Scopes: tok.Scopes}, nil
	}
	inner := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return &gate{tokens: cfg.Tokens, origins: cfg.Origins, buckets: bearer.NewLimiter(cfg.Rate, cfg.Burst, cfg.Now), next: inner}, nil
}

type gate struct {
	tokens  []bearer.Token
	origins []string
	buckets *bearer.Limiter
	next    http.Handler
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" && !slices.Contains(g.origins, strings.TrimSuffix(o, "/")) {
		http.Error(w, "origin not allowed: "+strconv.Quote(limit(o, 64)), http.StatusForbidden)
		return
	}
	secret, ok := bearer.Parse(r.Header.Get("Authorization"))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="signoff"`)
		http.Error(w, "send Authorization: Bearer <token>", http.StatusUnauthorized)
		return
	}
	tok, ok := bearer.Find(g.tokens, secret)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="signoff", error="invalid_token"`)
		http.Error(w, "unknown token", http.StatusUnauthorized)
		return
	}
	if ok, retry := g.buckets.Allow(tok.ID); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(max(int(math.Ceil(retry.Seconds())), 1)))
		http.Error(w, "this token's rate limit; try again after Retry-After seconds", http.StatusTooManyRequests)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	g.next.ServeHTTP(w, r)
}
