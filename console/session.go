package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
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
	path   string // the console's prefix
}

// newSession is a session without a login, with a fresh CSRF token.
func newSession(now time.Time) (*session, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	return &session{CSRF: base64.RawURLEncoding.EncodeToString(b[:]), Expires: now.Add(sessionTTL)}, nil
}

// read returns the request's session, or nil when it has none that this
// key signed and that has not ended.
func (s *sessions) read(r *http.Request, now time.Time) *session {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	body, mac, ok := strings.Cut(c.Value, ".")
	if !ok {
		return nil
	}
	want := s.mac(body)
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, want) {
		return nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return nil
	}
	var se session
	if err := json.Unmarshal(raw, &se); err != nil || se.CSRF == "" || !now.Before(se.Expires) {
		return nil
	}
	return &se
}

// write sets se as the response's session cookie: Secure when the console
// is configured so (TLS ended before it) or r came over TLS.
func (s *sessions) write(w http.ResponseWriter, r *http.Request, se *session) error {
	raw, err := json.Marshal(se)
	if err != nil {
		return err
	}
	body := base64.RawURLEncoding.EncodeToString(raw)
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: body + "." + base64.RawURLEncoding.EncodeToString(s.mac(body)),
		Path: s.path + "/", MaxAge: int(sessionTTL / time.Second), Secure: s.secure || r.TLS != nil, HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
	return nil
}

// clear ends the session in the browser.
func (s *sessions) clear(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: s.path + "/", MaxAge: -1,
		Secure: s.secure || r.TLS != nil, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

func (s *sessions) mac(body string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("signoff console session\x00"))
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
