package mcpserver

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
	if len(cfg.Tokens) == 0 {
		return nil, errors.New("mcp over http: no token is configured (api.tokens): every call needs one")
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
	srv := s.build(fromToken)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: s.log, MaxRequestBodyBytes: MaxBodyBytes})
	// The SDK's middleware puts the token in the context, where a tool reads
	// it (CallToolRequest.Extra.TokenInfo).
	verify := func(_ context.Context, secret string, _ *http.Request) (*auth.TokenInfo, error) {
		tok, ok := bearer.Find(cfg.Tokens, secret)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: tok.Requester, Scopes: tok.Scopes}, nil
	}
	inner := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	g := &gate{tokens: cfg.Tokens, origins: cfg.Origins, buckets: bearer.NewLimiter(cfg.Rate, cfg.Burst, cfg.Now), next: inner}
	return g, nil
}

// gate refuses, before anything reads the body, a request from a browser
// origin not allowed, without a known token, or over its token's rate.
type gate struct {
	tokens  []bearer.Token
	origins []string
	buckets *bearer.Limiter
	next    http.Handler
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" && !slices.Contains(g.origins, strings.TrimSuffix(o, "/")) {
		http.Error(w, "origin not allowed: "+strconv.Quote(limit(o)), http.StatusForbidden)
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

// limit bounds a value the caller sent, for an error message.
func limit(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
