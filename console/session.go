package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Identity is who is looking: the member of the config's roles they act as
// (what decides their role, as in Slack), and how they proved it. A login
// through an identity provider sets Subject and Email and maps them to
// Member; the local login sets Member alone.
type Identity struct {
	Member  string `json:"member"`
	Subject string `json:"sub,omitempty"`
	Email   string `json:"email,omitempty"`
	// Method is how they logged in: MethodLocal, or an identity provider's.
	Method string `json:"method"`
	// AuthTime is when they proved it, for a later check of how fresh a
	// login is.
	AuthTime time.Time `json:"auth_time"`
}

// MethodLocal is the local login: a member picked from a list, for demos
// and tests on loopback.
const MethodLocal = "local"

// session is what the cookie holds, signed: who (nil before a login), the
// CSRF token every form of this session carries, and when it ends.
type session struct {
	Who     *Identity `json:"who,omitempty"`
	CSRF    string    `json:"csrf"`
	Expires time.Time `json:"exp"`
}

// cookieName is the session cookie's name.
const cookieName = "signoff_ui"

// sessionTTL is how long a session lasts from its login (or its first page).
const sessionTTL = 12 * time.Hour

// MinKeyLen is the shortest session key New accepts.
const MinKeyLen = 32

// sessions signs and reads session cookies with a key kept outside the store.
type sessions struct {
	key    []byte
	secure bool   // the cookie is sent over TLS only
	lax    bool   // SameSite=Lax: a login comes back from an identity provider
	path   string // the console's prefix
}

// newSession is a session without a login, with a fresh CSRF token.
func newSession(now time.Time) (*session, error) {
	return &session{CSRF: randomToken(), Expires: now.Add(sessionTTL)}, nil
}

// randomToken is 24 random bytes, base64url: a CSRF token, a state, a nonce.
// crypto/rand.Read never fails (it panics rather than return short).
func randomToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// read returns the request's session, or nil when it has none that this
// key signed and that has not ended.
func (s *sessions) read(r *http.Request, now time.Time) *session {
	var se session
	if !s.open(r, cookieName, sessionDomain, &se) || se.CSRF == "" || !now.Before(se.Expires) {
		return nil
	}
	return &se
}

// write sets se as the response's session cookie: Secure when the console
// is configured so (TLS ended before it) or r came over TLS.
func (s *sessions) write(w http.ResponseWriter, r *http.Request, se *session) error {
	v, err := s.seal(sessionDomain, se)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: v, Path: s.path + "/", MaxAge: int(sessionTTL / time.Second),
		Secure: s.secure || r.TLS != nil, HttpOnly: true, SameSite: s.sameSite()})
	return nil
}

// clear ends the session in the browser.
func (s *sessions) clear(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: s.path + "/", MaxAge: -1,
		Secure: s.secure || r.TLS != nil, HttpOnly: true, SameSite: s.sameSite()})
}

// sameSite is Strict, or Lax when a login comes back from an identity
// provider: a Strict cookie set on that cross-site redirect is not sent
// on the redirect that follows it, and the person would land on the login
// again. Every form still carries its CSRF token.
func (s *sessions) sameSite() http.SameSite {
	if s.lax {
		return http.SameSiteLaxMode
	}
	return http.SameSiteStrictMode
}

// flowCookie holds a login through the identity provider between its
// redirect and its callback.
const flowCookie = "signoff_oidc"

// readFlow returns the request's login flow, or nil when it has none this
// key signed that has not ended.
func (s *sessions) readFlow(r *http.Request, now time.Time) *flow {
	var f flow
	if !s.open(r, flowCookie, flowDomain, &f) || f.State == "" || !now.Before(f.Expires) {
		return nil
	}
	return &f
}

// writeFlow sets the flow cookie: Lax, so that the provider's redirect
// back (from another site) carries it, and only to the callback's path.
func (s *sessions) writeFlow(w http.ResponseWriter, r *http.Request, f *flow) error {
	v, err := s.seal(flowDomain, f)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: v, Path: s.path + "/oidc/", MaxAge: int(flowTTL / time.Second),
		Secure: s.secure || r.TLS != nil, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	return nil
}

func (s *sessions) clearFlow(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: "", Path: s.path + "/oidc/", MaxAge: -1,
		Secure: s.secure || r.TLS != nil, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// The MAC's domains: a flow cookie is never taken for a session.
const (
	sessionDomain = "signoff console session"
	flowDomain    = "signoff console login flow"
)

// seal encodes v and signs it for domain.
func (s *sessions) seal(domain string, v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode a cookie: %w", err)
	}
	body := base64.RawURLEncoding.EncodeToString(raw)
	return body + "." + base64.RawURLEncoding.EncodeToString(s.mac(domain, body)), nil
}

// open decodes cookie name into v when this key signed it for domain.
func (s *sessions) open(r *http.Request, name, domain string, v any) bool {
	c, err := r.Cookie(name)
	if err != nil {
		return false
	}
	body, mac, ok := strings.Cut(c.Value, ".")
	if !ok {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, s.mac(domain, body)) {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	return err == nil && json.Unmarshal(raw, v) == nil
}

func (s *sessions) mac(domain, body string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(domain + "\x00"))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// errCSRF is why a form without its session's token is refused.
var errCSRF = errors.New("this form's security token is missing or belongs to another session; reload the page and send it again")

// checkCSRF says whether the form's token is the session's.
func checkCSRF(r *http.Request, se *session) error {
	got := r.PostFormValue("csrf")
	if se == nil || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(se.CSRF)) != 1 {
		return errCSRF
	}
	return nil
}
