package config

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/signoff-dev/signoff/workflow"
)

// API scopes: what a token may do on /v1.
const (
	ScopeSubmit = "submit" // POST /v1/runs
	ScopeRead   = "read"   // GET a run, the list, wait
	ScopeCancel = "cancel" // POST /v1/runs/{id}/cancel
	// ScopeResolve: POST /v1/runs/{id}/resolve, for an operator's automation
	// whose requester holds the resolve role.
	ScopeResolve = "resolve"
	// ScopeForce: POST /v1/runs/{id}/force, a break-glass approval by a
	// requester who holds the rule's break_glass role.
	ScopeForce = "force"
	// ScopeReview: GET /v1/reviews and POST /v1/runs/{id}/review/acknowledge.
	ScopeReview = "review"
)

// Scopes lists every scope a token may hold.
var Scopes = []string{ScopeSubmit, ScopeRead, ScopeCancel, ScopeResolve, ScopeForce, ScopeReview}

// Default per-token rate limit: a token's bucket refills at DefaultRate
// requests a second and holds DefaultBurst.
const (
	DefaultRate  = 10
	DefaultBurst = 20
)

// APIConfig is the agent-facing HTTP API (/v1): who may call it and where
// callbacks may go. Tokens are configured by their SHA-256, never in clear,
// so that the config file can be read without handing out a credential.
type APIConfig struct {
	Tokens []APIToken
	// Rate (requests a second) and Burst bound each token's calls.
	Rate  float64
	Burst int
	// CallbackPrefixes: a run's callback_url must start with one of these, so
	// that no request can make signoff call an arbitrary address. Each is an
	// absolute http(s) URL whose path ends in "/", so a prefix never matches
	// a longer host name (https://a.example/ is not a prefix of
	// https://a.example.evil/).
	CallbackPrefixes []string
	// CallbackSecretEnv names the environment variable that holds the
	// Standard Webhooks secret (whsec_…, several separated by spaces while a
	// key rotates) that signs every callback. Required with CallbackPrefixes.
	CallbackSecretEnv string
}

// APIToken is one bearer token: the hash of its secret, the requester every
// proposal made with it speaks for (and whose runs alone it reads and
// cancels), and what it may do.
type APIToken struct {
	ID        string
	SHA256    [32]byte
	Requester string
	Scopes    []string
}

// Has says whether the token holds scope.
func (t APIToken) Has(scope string) bool { return slices.Contains(t.Scopes, scope) }

// CallbackAllowed says whether u is in canonical form
// (workflow.CanonicalCallbackURL) and starts with one of the allowed prefixes.
// A URL that is not canonical is not allowed even when it starts with a
// prefix: "/cb/../evil" starts with "/cb/" but a server reads it as "/evil".
func (a APIConfig) CallbackAllowed(u string) bool {
	if c, err := workflow.CanonicalCallbackURL(u); err != nil || c != u {
		return false
	}
	for _, p := range a.CallbackPrefixes {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}

type fileAPI struct {
	Tokens    []fileToken    `yaml:"tokens"`
	RateLimit *fileRateLimit `yaml:"rate_limit"`
	Callbacks *fileCallbacks `yaml:"callbacks"`
}

type fileToken struct {
	ID        string   `yaml:"id"`
	SHA256    string   `yaml:"sha256"`
	Requester string   `yaml:"requester"`
	Scopes    []string `yaml:"scopes"`
}

type fileRateLimit struct {
	PerSecond *float64 `yaml:"per_second"`
	Burst     *int     `yaml:"burst"`
}

type fileCallbacks struct {
	Allow     []string `yaml:"allow"`
	SecretEnv string   `yaml:"secret_env"`
}

func (c *checker) api(fa *fileAPI) (APIConfig, error) {
	ac := APIConfig{Rate: DefaultRate, Burst: DefaultBurst}
	if fa == nil {
		return ac, nil
	}
	var err error
	if ac.Tokens, err = c.apiTokens(fa.Tokens); err != nil {
		return ac, err
	}
	if err := c.rateLimit(fa.RateLimit, &ac); err != nil {
		return ac, err
	}
	if fa.Callbacks != nil {
		if err := c.callbacks(fa.Callbacks, &ac); err != nil {
			return ac, err
		}
	}
	return ac, nil
}

// apiTokens checks every token: each names itself uniquely and has its own
// secret.
func (c *checker) apiTokens(fts []fileToken) ([]APIToken, error) {
	var tokens []APIToken
	ids := map[string]bool{}
	hashes := map[[32]byte]string{}
	for i, ft := range fts {
		path := fmt.Sprintf("api.tokens[%d]", i)
		t := APIToken{ID: strings.TrimSpace(ft.ID), Requester: strings.TrimSpace(ft.Requester)}
		switch {
		case t.ID == "":
			return tokens, c.failf(path+".id", "required: a name for the token, shown in the audit log")
		case strings.ContainsFunc(t.ID, isControl):
			return tokens, c.failf(path+".id", "%q must be one line without control characters", ft.ID)
		case ids[t.ID]:
			return tokens, c.failf(path+".id", "%q is used by another token", t.ID)
		}
		ids[t.ID] = true
		h := strings.TrimSpace(ft.SHA256)
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 32 {
			return tokens, c.failf(path+".sha256", "want the token's SHA-256 as 64 hex digits (signoff token new prints it), got %d characters", len(h))
		}
		copy(t.SHA256[:], b)
		if other, dup := hashes[t.SHA256]; dup {
			return tokens, c.failf(path+".sha256", "the same token as %q: every token needs its own secret", other)
		}
		hashes[t.SHA256] = t.ID
		if t.Scopes, err = c.tokenGrant(path, ft); err != nil {
			return tokens, err
		}
		tokens = append(tokens, t)
	}
	return tokens, nil
}

// tokenGrant checks whom a token speaks for and what it may do, and returns
// its scopes without repeats.
func (c *checker) tokenGrant(path string, ft fileToken) ([]string, error) {
	switch requester := strings.TrimSpace(ft.Requester); {
	case requester == "":
		return nil, c.failf(path+".requester", "required: the requester id every proposal made with this token speaks for (e.g. agent:resolver)")
	case strings.ContainsFunc(requester, isControl):
		return nil, c.failf(path+".requester", "%q must be one line without control characters", ft.Requester)
	}
	if len(ft.Scopes) == 0 {
		return nil, c.failf(path+".scopes", "required: one or more of %s", strings.Join(Scopes, ", "))
	}
	var scopes []string
	for j, s := range ft.Scopes {
		if !slices.Contains(Scopes, s) {
			return nil, c.failf(fmt.Sprintf("%s.scopes[%d]", path, j), "unknown scope %q (scopes: %s)", s, strings.Join(Scopes, ", "))
		}
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	return scopes, nil
}

// rateLimit sets the rate and burst the file gives, each within bounds.
func (c *checker) rateLimit(rl *fileRateLimit, ac *APIConfig) error {
	if rl == nil {
		return nil
	}
	if rl.PerSecond != nil {
		if *rl.PerSecond <= 0 || *rl.PerSecond > 1e6 {
			return c.failf("api.rate_limit.per_second", "%v: want a number of requests a second above 0", *rl.PerSecond)
		}
		ac.Rate = *rl.PerSecond
	}
	if rl.Burst != nil {
		if *rl.Burst < 1 || *rl.Burst > 1e6 {
			return c.failf("api.rate_limit.burst", "%d: want at least 1", *rl.Burst)
		}
		ac.Burst = *rl.Burst
	}
	return nil
}

// callbacks sets where callbacks may go and the variable that holds their
// signing secret, required once any may go anywhere.
func (c *checker) callbacks(fcb *fileCallbacks, ac *APIConfig) error {
	for i, p := range fcb.Allow {
		if err := c.callbackPrefix(fmt.Sprintf("api.callbacks.allow[%d]", i), p); err != nil {
			return err
		}
		ac.CallbackPrefixes = append(ac.CallbackPrefixes, p)
	}
	ac.CallbackSecretEnv = strings.TrimSpace(fcb.SecretEnv)
	switch env := ac.CallbackSecretEnv; {
	case env == "" && len(ac.CallbackPrefixes) > 0:
		return c.failf("api.callbacks.secret_env", "required with allow: the environment variable that holds the secret (whsec_…) callbacks are signed with, e.g. SIGNOFF_CALLBACK_SECRET")
	case env != "" && !envNamePattern.MatchString(env):
		return c.failf("api.callbacks.secret_env", "%q is not the name of an environment variable", fcb.SecretEnv)
	}
	return nil
}

// callbackPrefix checks one allowed prefix: an absolute http(s) URL in
// canonical form whose path ends in "/", warning of plain http off the
// machine.
func (c *checker) callbackPrefix(path, p string) error {
	u, err := url.Parse(p)
	canon, cerr := workflow.CanonicalCallbackURL(p)
	switch {
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "":
		return c.failf(path, "%q: want an absolute http(s) URL such as https://agents.example.com/signoff/", p)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.Contains(p, "#") || strings.Contains(p, "?"):
		return c.failf(path, "%q: a prefix has no user, query or fragment", p)
	case !strings.HasSuffix(u.Path, "/"):
		return c.failf(path, "%q: end the prefix with a path ending in / (e.g. %s/), so that it cannot match a longer host or path", p, strings.TrimRight(p, "/"))
	case cerr != nil:
		return c.failf(path, "%q %v", p, cerr)
	case canon != p:
		return c.failf(path, "%q: write the prefix without dot segments, as %s: callback URLs are matched with theirs resolved", p, canon)
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		c.warnf(path, "%q: callbacks to a non-loopback host over plain http can be read and replayed on the way; prefer https", p)
	}
	return nil
}

// envNamePattern is what an environment variable's name may be.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

func isLoopback(host string) bool {
	return host == "localhost" || host == "::1" || strings.HasPrefix(host, "127.")
}
