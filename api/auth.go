package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/signoff-dev/signoff/workflow"
	"golang.org/x/time/rate"
)

// Scopes: what a token may do.
const (
	ScopeSubmit = "submit" // POST /v1/runs
	ScopeRead   = "read"   // GET a run, the list, wait (the token's requester's runs)
	ScopeCancel = "cancel" // POST /v1/runs/{id}/cancel
	// ScopeResolve: POST /v1/runs/{id}/resolve, for an operator's
	// automation whose requester holds the resolve role.
	ScopeResolve = "resolve"
)

// Token is one bearer token: the SHA-256 of its secret, the requester every
// proposal made with it speaks for (and whose runs alone it reads and
// cancels), and its scopes.
type Token struct {
	ID        string
	SHA256    [32]byte
	Requester string
	Scopes    []string
}

func (t Token) has(scope string) bool { return slices.Contains(t.Scopes, scope) }

// The rate limit of each token when Config sets none: a bucket of
// DefaultBurst refilled at DefaultRate a second.
const (
	DefaultRate  = 10
	DefaultBurst = 20
)

// scopes says what each route needs; "" is public. Routes are echo's
// patterns, as the generated code registers them under /v1. A test holds
// this table to each operation's x-signoff-scope in openapi.yaml.
var scopes = map[string]string{
	"POST /v1/runs":             ScopeSubmit,
	"GET /v1/runs":              ScopeRead,
	"GET /v1/runs/:id":          ScopeRead,
	"GET /v1/runs/:id/wait":     ScopeRead,
	"POST /v1/runs/:id/cancel":  ScopeCancel,
	"POST /v1/runs/:id/resolve": ScopeResolve,
	"GET /v1/openapi.yaml":      "",
}

const tokenKey = "signoff.token"

// tokenOf is the token a request was authenticated with.
func tokenOf(c echo.Context) Token {
	t, _ := c.Get(tokenKey).(Token)
	return t
}

// guard authenticates each request, checks its scope and spends from its
// token's bucket, before anything reads the body.
type guard struct {
	tokens []Token
	r      rate.Limit
	burst  int
	clock  workflow.Clock

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newGuard(cfg Config) *guard {
	burst := cfg.Burst
	if burst < 1 {
		burst = DefaultBurst
	}
	r := rate.Limit(cfg.Rate)
	if cfg.Rate <= 0 {
		r = DefaultRate
	}
	return &guard{tokens: cfg.Tokens, r: r, burst: burst, clock: cfg.Clock, buckets: map[string]*rate.Limiter{}}
}

// find returns the configured token whose hash is the SHA-256 of secret. It
// compares with every configured hash, in constant time and without
// stopping at a match, so that timing says nothing about which hash is near.
func (g *guard) find(secret string) (Token, bool) {
	sum := sha256.Sum256([]byte(secret))
	found := -1
	for i := range g.tokens {
		if subtle.ConstantTimeCompare(sum[:], g.tokens[i].SHA256[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, false
	}
	return g.tokens[found], true
}

// allow spends one request from the token's bucket, or says how long until
// one is there.
func (g *guard) allow(id string) (ok bool, retry time.Duration) {
	g.mu.Lock()
	lim := g.buckets[id]
	if lim == nil {
		lim = rate.NewLimiter(g.r, g.burst)
		g.buckets[id] = lim
	}
	g.mu.Unlock()
	now := g.clock.Now()
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return false, time.Second
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (g *guard) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		scope, known := scopes[c.Request().Method+" "+c.Path()]
		if !known || scope == "" {
			return next(c) // public, or a route that does not exist (404 / 405)
		}
		secret, presented := bearer(c.Request().Header.Get(echo.HeaderAuthorization))
		if !presented {
			return problem(http.StatusUnauthorized, CodeUnauthorized, "send Authorization: Bearer <token>").
				withHeader("WWW-Authenticate", `Bearer realm="signoff"`)
		}
		tok, ok := g.find(secret)
		if !ok {
			return problem(http.StatusUnauthorized, CodeUnauthorized, "unknown token").
				withHeader("WWW-Authenticate", `Bearer realm="signoff", error="invalid_token"`)
		}
		if !tok.has(scope) {
			return problem(http.StatusForbidden, CodeInsufficientScope, "this token lacks the scope "+scope).
				withHeader("WWW-Authenticate", `Bearer realm="signoff", error="insufficient_scope", scope="`+scope+`"`)
		}
		if ok, retry := g.allow(tok.ID); !ok {
			secs := int(math.Ceil(retry.Seconds()))
			return problem(http.StatusTooManyRequests, CodeRateLimited, "this token's rate limit; try again after Retry-After seconds").
				withHeader("Retry-After", strconv.Itoa(max(secs, 1)))
		}
		c.Set(tokenKey, tok)
		return next(c)
	}
}

// bearer takes the token from an Authorization header. The scheme is case
// insensitive (RFC 9110); the token is not.
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
