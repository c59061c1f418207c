// Package bearer checks the bearer tokens of signoff's HTTP edges (the agent
// API, the MCP server): a token is configured by the SHA-256 of its secret,
// speaks for one requester, holds scopes, and spends from a rate bucket of
// its own. It is one package so that every edge refuses the same token the
// same way.
package bearer

import (
	"crypto/sha256"
	"crypto/subtle"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
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

// Has says whether the token holds scope.
func (t Token) Has(scope string) bool { return slices.Contains(t.Scopes, scope) }

// Find returns the token of tokens whose hash is the SHA-256 of secret. It
// compares with every configured hash, in constant time and without
// stopping at a match, so that timing says nothing about which hash is near.
func Find(tokens []Token, secret string) (Token, bool) {
	sum := sha256.Sum256([]byte(secret))
	found := -1
	for i := range tokens {
		if subtle.ConstantTimeCompare(sum[:], tokens[i].SHA256[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, false
	}
	return tokens[found], true
}

// Parse takes the token from an Authorization header. The scheme is case
// insensitive (RFC 9110); the token is not.
func Parse(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// Limiter holds one rate bucket a token.
type Limiter struct {
	r     rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// NewLimiter returns buckets of burst refilled at perSecond, on the clock now.
func NewLimiter(perSecond float64, burst int, now func() time.Time) *Limiter {
	return &Limiter{r: rate.Limit(perSecond), burst: burst, now: now, buckets: map[string]*rate.Limiter{}}
}

// Allow spends one request from the bucket of the token id, or says how
// long until one is there.
func (l *Limiter) Allow(id string) (ok bool, retry time.Duration) {
	l.mu.Lock()
	lim := l.buckets[id]
	if lim == nil {
		lim = rate.NewLimiter(l.r, l.burst)
		l.buckets[id] = lim
	}
	l.mu.Unlock()
	now := l.now()
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
