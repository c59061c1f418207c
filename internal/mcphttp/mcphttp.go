// Package mcphttp serves an MCP server over streamable HTTP behind
// signoff's bearer tokens, one way for the approval server and the gateway:
// stateless (each POST a whole exchange, as the 2026-07-28 revision has it;
// the older revisions the SDK negotiates are answered the same way), and
// before the SDK reads anything it checks the Origin, the token and its
// rate, and caps the body. The SDK itself refuses a localhost request for
// another Host (DNS rebinding).
package mcphttp

import (
	"context"
	"errors"
	"log/slog"
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

// Config is what the handler checks.
type Config struct {
	// Tokens name the requester each caller speaks for, and its scopes.
	Tokens []bearer.Token
	// Rate (requests a second, 10 when 0) and Burst (20 when 0) bound each
	// token's calls.
	Rate  float64
	Burst int
	Now   func() time.Time // the rate limiter's clock; defaults to time.Now
	// Origins are the browser origins allowed to call (scheme://host[:port]);
	// a request with another Origin header is refused. A request without
	// one (not from a browser) is let through to the token check.
	Origins []string
	// MaxBodyBytes caps a request's body.
	MaxBodyBytes int64
	Logger       *slog.Logger
	// Ahead, when set, wraps the SDK's handler inside the checks: it sees
	// a request once its token is known (auth.TokenInfoFromContext) and
	// may answer what the SDK does not serve.
	Ahead func(http.Handler) http.Handler
	// For, when set, picks the server of a caller by its token (its
	// requester and scopes), instead of srv for all.
	For func(tok *auth.TokenInfo) *mcp.Server
}

// ErrNoTokens is Handler's answer to a config without tokens: every call
// needs one.
var ErrNoTokens = errors.New("no token is configured: every call needs one")

// Handler serves srv as cfg says. A tool finds the caller's token in its
// request (CallToolRequest.Extra.TokenInfo: UserID is the requester).
func Handler(srv *mcp.Server, cfg Config) (http.Handler, error) {
	if len(cfg.Tokens) == 0 {
		return nil, ErrNoTokens
	}
	if cfg.MaxBodyBytes <= 0 {
		return nil, errors.New("mcp over http: a body cap is required")
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
	serverOf := func(*http.Request) *mcp.Server { return srv }
	if cfg.For != nil {
		serverOf = func(r *http.Request) *mcp.Server { return cfg.For(auth.TokenInfoFromContext(r.Context())) }
	}
	h := mcp.NewStreamableHTTPHandler(serverOf,
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: cfg.Logger, MaxRequestBodyBytes: cfg.MaxBodyBytes})
	verify := func(_ context.Context, secret string, _ *http.Request) (*auth.TokenInfo, error) {
		tok, ok := bearer.Find(cfg.Tokens, secret)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: tok.Requester, Scopes: tok.Scopes}, nil
	}
	var next http.Handler = h
	if cfg.Ahead != nil {
		next = cfg.Ahead(h)
	}
	inner := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return &gate{tokens: cfg.Tokens, origins: cfg.Origins, max: cfg.MaxBodyBytes,
		buckets: bearer.NewLimiter(cfg.Rate, cfg.Burst, cfg.Now), next: inner}, nil
}

// gate refuses, before anything reads the body, a request from a browser
// origin not allowed, without a known token, or over its token's rate.
type gate struct {
	tokens  []bearer.Token
	origins []string
	max     int64
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
	r.Body = http.MaxBytesReader(w, r.Body, g.max)
	g.next.ServeHTTP(w, r)
}

// limit bounds a value the caller sent, for an error message.
func limit(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
