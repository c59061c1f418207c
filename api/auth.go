package api

import (
	"math"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/signoff-dev/signoff/internal/bearer"
)

// Scopes: what a token may do.
const (
	ScopeSubmit = "submit" // POST /v1/runs
	ScopeRead   = "read"   // GET a run, the list, wait (the token's requester's runs)
	ScopeCancel = "cancel" // POST /v1/runs/{id}/cancel
	// ScopeResolve: POST /v1/runs/{id}/resolve, for an operator's
	// automation whose requester holds the resolve role.
	ScopeResolve = "resolve"
	// ScopeForce: POST /v1/runs/{id}/force, a break-glass approval by a
	// requester who holds the rule's break_glass role.
	ScopeForce = "force"
	// ScopeReview: the follow-up reviews of forced approvals, listed and
	// acknowledged by a requester who holds the review's role.
	ScopeReview = "review"
)

// Token is one bearer token: the SHA-256 of its secret, the requester every
// proposal made with it speaks for (and whose runs alone it reads and
// cancels), and its scopes. The MCP server checks the same tokens.
type Token = bearer.Token

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
	"POST /v1/runs":                        ScopeSubmit,
	"GET /v1/runs":                         ScopeRead,
	"GET /v1/runs/:id":                     ScopeRead,
	"GET /v1/runs/:id/wait":                ScopeRead,
	"POST /v1/runs/:id/cancel":             ScopeCancel,
	"POST /v1/runs/:id/resolve":            ScopeResolve,
	"POST /v1/runs/:id/force":              ScopeForce,
	"POST /v1/runs/:id/review/acknowledge": ScopeReview,
	"GET /v1/reviews":                      ScopeReview,
	"GET /v1/openapi.yaml":                 "",
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
	tokens  []Token
	buckets *bearer.Limiter
}

func newGuard(cfg Config) *guard {
	burst := cfg.Burst
	if burst < 1 {
		burst = DefaultBurst
	}
	r := cfg.Rate
	if cfg.Rate <= 0 {
		r = DefaultRate
	}
	return &guard{tokens: cfg.Tokens, buckets: bearer.NewLimiter(r, burst, cfg.Clock.Now)}
}

func (g *guard) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		scope, known := scopes[c.Request().Method+" "+c.Path()]
		if !known || scope == "" {
			return next(c) // public, or a route that does not exist (404 / 405)
		}
		secret, presented := bearer.Parse(c.Request().Header.Get(echo.HeaderAuthorization))
		if !presented {
			return problem(http.StatusUnauthorized, CodeUnauthorized, "send Authorization: Bearer <token>").
				withHeader("WWW-Authenticate", `Bearer realm="signoff"`)
		}
		tok, ok := bearer.Find(g.tokens, secret)
		if !ok {
			return problem(http.StatusUnauthorized, CodeUnauthorized, "unknown token").
				withHeader("WWW-Authenticate", `Bearer realm="signoff", error="invalid_token"`)
		}
		if !tok.Has(scope) {
			return problem(http.StatusForbidden, CodeInsufficientScope, "this token lacks the scope "+scope).
				withHeader("WWW-Authenticate", `Bearer realm="signoff", error="insufficient_scope", scope="`+scope+`"`)
		}
		if ok, retry := g.buckets.Allow(tok.ID); !ok {
			secs := int(math.Ceil(retry.Seconds()))
			return problem(http.StatusTooManyRequests, CodeRateLimited, "this token's rate limit; try again after Retry-After seconds").
				withHeader("Retry-After", strconv.Itoa(max(secs, 1)))
		}
		c.Set(tokenKey, tok)
		return next(c)
	}
}
