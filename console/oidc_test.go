package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/signoff-dev/signoff/console"
	"github.com/signoff-dev/signoff/record"
)

// idp is a test identity provider on loopback whose clock is the harness's.
type idp struct {
	m *mockoidc.MockOIDC
}

func newIDP(t *testing.T) *idp {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return &idp{m: m}
}

// oidcHarness is a console whose login is through a test identity provider:
// allowed are the groups engineering; ana@corp.example is the lead, the
// subject sub-lead2 the second lead.
func oidcHarness(t *testing.T, allowed map[string][]string, local bool) (*harness, *idp) {
	t.Helper()
	p := newIDP(t)
	h := newHarness(t, harnessOpts{noLocal: !local, oidc: &console.OIDC{
		Issuer: p.m.Issuer(), ClientID: p.m.ClientID, ClientSecret: p.m.ClientSecret,
		Scopes: []string{"openid", "email", "groups"}, Allowed: allowed,
		Members: map[string]string{"ana@corp.example": lead, "sub-lead2": lead2},
	}})
	// The provider's tokens are issued at the console's time.
	old := mockoidc.NowFunc
	mockoidc.NowFunc = h.clock.Now
	t.Cleanup(func() { mockoidc.NowFunc = old })
	return h, p
}

// user is a login at the provider, with claims changed or added.
type user struct {
	*mockoidc.MockUser
	tweak func(*mockoidc.IDTokenClaims)
	extra map[string]any
	// authNow gives the token an auth_time of its issue, as a provider
	// does after it asked the person for their password.
	authNow bool
}

func (u user) Claims(scope []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	if u.tweak != nil {
		u.tweak(base)
	}
	c, err := u.MockUser.Claims(scope, base)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var m jwt.MapClaims
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	for k, v := range u.extra {
		m[k] = v
	}
	if u.authNow {
		m["auth_time"] = base.IssuedAt.Unix()
	}
	return m, nil
}

func person(sub, email string, verified bool, groups ...string) user {
	return user{MockUser: &mockoidc.MockUser{Subject: sub, Email: email, EmailVerified: verified, Groups: groups}}
}

// follow sends a GET to u and follows its redirects through the console
// and the provider, and returns the first answer that is not a redirect,
// with the last URL asked.
func (b *browser) follow(u string) (page, string) {
	b.t.Helper()
	for range 10 {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			b.t.Fatal(err)
		}
		p := b.do(req)
		loc := p.header.Get("Location")
		if p.status/100 != 3 {
			return p, u
		}
		next, err := url.Parse(u)
		if err != nil {
			b.t.Fatal(err)
		}
		ref, err := next.Parse(loc)
		if err != nil {
			b.t.Fatal(err)
		}
		u = ref.String()
	}
	b.t.Fatalf("more than 10 redirects from %s", u)
	return page{}, ""
}

// who is who the browser's session says is signed in.
func (b *browser) who() (console.Identity, bool) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.h.srv.URL+"/ui/inbox", nil)
	if err != nil {
		b.t.Fatal(err)
	}
	for _, c := range b.c.Jar.Cookies(req.URL) {
		req.AddCookie(c)
	}
	return b.h.console.SignedIn(req)
}

func TestOIDCLogin(t *testing.T) {
	engineering := map[string][]string{"groups": {"engineering"}}
	authTime := time.Date(2026, 12, 1, 8, 58, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		allowed map[string][]string
		user    user
		start   string // the login link followed
		status  int
		says    string            // the page after the login says
		who     *console.Identity // signed in as, nil: not signed in
		check   func(*console.Identity) string
	}{
		{name: "mapped by its verified email; no auth_time, so when is not known", allowed: engineering, user: person("sub-ana", "Ana@corp.example", true, "engineering"),
			start: "/ui/runs/RUN", status: http.StatusOK, says: lead + " · team_lead · oidc login",
			who: &console.Identity{Member: lead, Subject: "sub-ana", Email: "ana@corp.example", Method: console.MethodOIDC}},
		{name: "no auth_time after prompt=login: the moment the login started", allowed: engineering, user: person("sub-ana", "ana@corp.example", true, "engineering"),
			start: "/ui/login?prompt=login&next=/ui/inbox", status: http.StatusOK, says: lead + " · team_lead",
			who: &console.Identity{Member: lead, Subject: "sub-ana", Email: "ana@corp.example", Method: console.MethodOIDC, AuthTime: harnessStart}},
		{name: "a fresh login asked and no auth_time given", allowed: engineering, user: person("sub-ana", "ana@corp.example", true, "engineering"),
			start: "/ui/login?max_age=300&prompt=login&next=/ui/inbox", status: http.StatusUnauthorized, says: "or does not say when it was"},
		{name: "mapped by its subject, the token's auth_time kept", allowed: nil,
			user:  user{MockUser: &mockoidc.MockUser{Subject: "sub-lead2"}, extra: map[string]any{"auth_time": authTime.Unix()}},
			start: "/ui/inbox", status: http.StatusOK, says: lead2 + " · team_lead",
			who: &console.Identity{Member: lead2, Subject: "sub-lead2", Method: console.MethodOIDC, AuthTime: authTime}},
		{name: "allowed and not mapped: reads with no role", allowed: engineering, user: person("sub-eve", "eve@corp.example", true, "design", "engineering"),
			start: "/ui/inbox", status: http.StatusOK, says: "eve@corp.example · no role",
			who: &console.Identity{Subject: "sub-eve", Email: "eve@corp.example", Method: console.MethodOIDC}},
		{name: "an unverified email maps to nobody", allowed: engineering, user: person("sub-x", "ana@corp.example", false, "engineering"),
			start: "/ui/inbox", status: http.StatusOK, says: "sub-x · no role",
			who: &console.Identity{Subject: "sub-x", Method: console.MethodOIDC}},
		{name: "a claim not allowed", allowed: engineering, user: person("sub-ana", "ana@corp.example", true, "design"),
			start: "/ui/inbox", status: http.StatusForbidden, says: "its claim groups is not one of engineering"},
		{name: "a bool claim not allowed", allowed: map[string][]string{"email_verified": {"true"}}, user: person("sub-ana", "ana@corp.example", false),
			start: "/ui/inbox", status: http.StatusForbidden, says: "its claim email_verified is not one of true"},
		{name: "not mapped and nothing allowed", allowed: nil, user: person("sub-eve", "eve@corp.example", true, "engineering"),
			start: "/ui/inbox", status: http.StatusForbidden, says: "not one of the console&#39;s members"},
		{name: "a token for another audience", allowed: engineering,
			user:  user{MockUser: person("sub-ana", "ana@corp.example", true, "engineering").MockUser, tweak: func(c *mockoidc.IDTokenClaims) { c.Audience = jwt.ClaimStrings{"another-client"} }},
			start: "/ui/inbox", status: http.StatusUnauthorized, says: "The ID token was refused"},
		{name: "a token of another login's nonce", allowed: engineering,
			user:  user{MockUser: person("sub-ana", "ana@corp.example", true, "engineering").MockUser, tweak: func(c *mockoidc.IDTokenClaims) { c.Nonce = "another-nonce" }},
			start: "/ui/inbox", status: http.StatusUnauthorized, says: "its nonce is not this one"},
		{name: "an expired token", allowed: engineering,
			user: user{MockUser: person("sub-ana", "ana@corp.example", true, "engineering").MockUser, tweak: func(c *mockoidc.IDTokenClaims) {
				c.ExpiresAt = jwt.NewNumericDate(c.IssuedAt.Add(-time.Minute))
			}},
			start: "/ui/inbox", status: http.StatusUnauthorized, says: "token is expired"},
		{name: "another issuer", allowed: engineering,
			user:  user{MockUser: person("sub-ana", "ana@corp.example", true, "engineering").MockUser, tweak: func(c *mockoidc.IDTokenClaims) { c.Issuer = "https://evil.example" }},
			start: "/ui/inbox", status: http.StatusUnauthorized, says: "The ID token was refused"},
		{name: "a fresh login asked, an old one given", allowed: engineering,
			user:  user{MockUser: person("sub-ana", "ana@corp.example", true, "engineering").MockUser, extra: map[string]any{"auth_time": authTime.Add(-time.Hour).Unix()}},
			start: "/ui/login?max_age=300&next=/ui/inbox", status: http.StatusUnauthorized, says: "A login within the last 300 seconds"},
		{name: "a fresh login asked and given", allowed: engineering,
			user:  user{MockUser: person("sub-ana", "ana@corp.example", true, "engineering").MockUser, extra: map[string]any{"auth_time": authTime.Unix()}},
			start: "/ui/login?max_age=300&prompt=login&next=/ui/inbox", status: http.StatusOK, says: lead + " · team_lead",
			who: &console.Identity{Member: lead, Subject: "sub-ana", Email: "ana@corp.example", Method: console.MethodOIDC, AuthTime: authTime}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, p := oidcHarness(t, tc.allowed, false)
			id := h.submit(t, bot, "refund", `{"amount":5}`, "a refund")
			p.m.QueueUser(tc.user)
			b := h.browser(t)
			got, _ := b.follow(h.srv.URL + strings.ReplaceAll(tc.start, "RUN", id))
			if got.status != tc.status || !strings.Contains(got.body, tc.says) {
				t.Fatalf("after the login: %d, want %d saying %q:\n%s", got.status, tc.status, tc.says, got.body)
			}
			who, ok := b.who()
			if tc.who == nil {
				if ok {
					t.Fatalf("signed in as %+v after a refused login", who)
				}
				return
			}
			if !ok || who != *tc.who {
				t.Fatalf("signed in as %+v (%v), want %+v", who, ok, *tc.who)
			}
		})
	}
}

// TestOIDCUnmappedMayNotDecide: a login the provider allows but no member
// maps to reads the run and is refused its decision (403), which changes
// nothing.
func TestOIDCUnmappedMayNotDecide(t *testing.T) {
	h, p := oidcHarness(t, map[string][]string{"groups": {"engineering"}}, false)
	id := h.submit(t, bot, "refund", `{"amount":5}`, "a refund")
	p.m.QueueUser(person("sub-eve", "eve@corp.example", true, "engineering"))
	b := h.browser(t)
	if got, _ := b.follow(h.srv.URL + "/ui/runs/" + id); got.status != http.StatusOK {
		t.Fatalf("the run page after the login: %d\n%s", got.status, got.body)
	}
	got := b.decide(id, "approve", "")
	if got.status != http.StatusForbidden || !strings.Contains(got.body, "eve@corp.example, which ui.members maps to no member") {
		t.Fatalf("decide as an unmapped login: %d, want 403 saying why:\n%s", got.status, got.body)
	}
	h.wantStatus(t, id, record.StatusWaitingApproval)
	// A mapped login decides.
	p.m.QueueUser(person("sub-ana", "ana@corp.example", true, "engineering"))
	b2 := h.browser(t)
	b2.follow(h.srv.URL + "/ui/runs/" + id)
	if got := b2.decide(id, "approve", ""); got.status != http.StatusSeeOther {
		t.Fatalf("decide as the mapped lead: %d\n%s", got.status, got.body)
	}
	h.wantStatus(t, id, record.StatusExecuting)
}

// TestOIDCCallbackRefusals: a callback this browser did not start, whose
// state was changed, that came back too late, or that the provider
// refused signs nobody in.
func TestOIDCCallbackRefusals(t *testing.T) {
	h, p := oidcHarness(t, map[string][]string{"groups": {"engineering"}}, false)
	// start goes to the provider and returns its redirect back, unfollowed.
	start := func(b *browser) *url.URL {
		t.Helper()
		toIDP := b.get("/ui/oidc/login?next=/ui/inbox")
		req, err := http.NewRequest(http.MethodGet, toIDP.header.Get("Location"), nil)
		if err != nil {
			t.Fatal(err)
		}
		back := b.do(req)
		u, err := url.Parse(back.header.Get("Location"))
		if err != nil || back.status != http.StatusFound {
			t.Fatalf("the provider's answer: %d to %q", back.status, back.header.Get("Location"))
		}
		return u
	}
	for _, tc := range []struct {
		name   string
		change func(b *browser, u *url.URL)
		status int
		says   string
	}{
		{"a forged state", func(_ *browser, u *url.URL) {
			q := u.Query()
			q.Set("state", "forged")
			u.RawQuery = q.Encode()
		}, http.StatusBadRequest, "state does not match"},
		{"no state", func(_ *browser, u *url.URL) {
			q := u.Query()
			q.Del("state")
			u.RawQuery = q.Encode()
		}, http.StatusBadRequest, "state does not match"},
		{"another browser's callback", func(b *browser, _ *url.URL) {
			b.c.Jar = h.browser(t).c.Jar
		}, http.StatusBadRequest, "not started here"},
		{"back after the flow ended", func(*browser, *url.URL) { h.clock.Advance(11 * time.Minute) },
			http.StatusBadRequest, "took longer than 10m0s"},
		{"a code not the provider's", func(_ *browser, u *url.URL) {
			q := u.Query()
			q.Set("code", "forged-code")
			u.RawQuery = q.Encode()
		}, http.StatusUnauthorized, "did not accept the login&#39;s code"},
		{"the provider refused", func(_ *browser, u *url.URL) {
			q := u.Query()
			q.Del("code")
			q.Set("error", "access_denied")
			q.Set("error_description", "<b>no</b>\u202e")
			u.RawQuery = q.Encode()
		}, http.StatusUnauthorized, "refused the login: access_denied &lt;b&gt;no&lt;/b&gt;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.m.QueueUser(person("sub-ana", "ana@corp.example", true, "engineering"))
			b := h.browser(t)
			u := start(b)
			tc.change(b, u)
			req, err := http.NewRequest(http.MethodGet, u.String(), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := b.do(req)
			if got.status != tc.status || !strings.Contains(got.body, tc.says) {
				t.Fatalf("callback: %d, want %d saying %q:\n%s", got.status, tc.status, tc.says, got.body)
			}
			if strings.Contains(got.body, "\u202e") {
				t.Fatalf("the provider's words are shown with their bidirectional override:\n%s", got.body)
			}
			if who, ok := b.who(); ok {
				t.Fatalf("signed in as %+v", who)
			}
		})
	}
	// A flow is used once: its callback replayed signs nobody in again.
	p.m.QueueUser(person("sub-ana", "ana@corp.example", true, "engineering"))
	b := h.browser(t)
	u := start(b)
	req, _ := http.NewRequest(http.MethodGet, u.String(), nil)
	if got := b.do(req); got.status != http.StatusSeeOther {
		t.Fatalf("callback: %d\n%s", got.status, got.body)
	}
	b.post("/ui/logout", url.Values{})
	req, _ = http.NewRequest(http.MethodGet, u.String(), nil)
	if got := b.do(req); got.status != http.StatusBadRequest {
		t.Fatalf("callback replayed: %d, want 400\n%s", got.status, got.body)
	}
}

// TestOIDCStartRefusals: the login link refuses what it cannot ask the
// provider for, and sends the rest there with state, nonce and PKCE.
func TestOIDCStartRefusals(t *testing.T) {
	h, p := oidcHarness(t, nil, true)
	b := h.browser(t)
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/ui/oidc/login?max_age=-1", http.StatusBadRequest},
		{"/ui/oidc/login?max_age=soon", http.StatusBadRequest},
		{"/ui/oidc/login?max_age=86401", http.StatusBadRequest},
		{"/ui/oidc/login?prompt=none", http.StatusBadRequest},
	} {
		if got := b.get(tc.path); got.status != tc.status {
			t.Errorf("GET %s: %d, want %d", tc.path, got.status, tc.status)
		}
	}
	got := b.get("/ui/oidc/login?max_age=0&next=//evil.example")
	loc, err := url.Parse(got.header.Get("Location"))
	if err != nil || got.status != http.StatusSeeOther || !strings.HasPrefix(loc.String(), p.m.AuthorizationEndpoint()) {
		t.Fatalf("login link: %d to %q, want the provider", got.status, got.header.Get("Location"))
	}
	q := loc.Query()
	for _, k := range []string{"state", "nonce", "code_challenge"} {
		if len(q.Get(k)) < 32 {
			t.Errorf("the provider is asked with %s %q, want a random one", k, q.Get(k))
		}
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("max_age") != "0" || q.Get("redirect_uri") != h.srv.URL+"/ui/oidc/callback" {
		t.Errorf("the provider is asked with %v", q)
	}
	var flow *http.Cookie
	for _, c := range got.header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "signoff_oidc=") {
			flow, _ = http.ParseSetCookie(c)
		}
	}
	if flow == nil || !flow.HttpOnly || flow.SameSite != http.SameSiteLaxMode || flow.Path != "/ui/oidc/" || flow.MaxAge != 600 {
		t.Fatalf("the flow cookie: %+v, want HttpOnly, SameSite=Lax, on /ui/oidc/ for 10 minutes", flow)
	}
	// With the local login too, the login page offers both.
	if got := b.get("/ui/login?next=/ui/inbox"); got.status != http.StatusOK || !strings.Contains(got.body, `href="/ui/oidc/login?next=%2Fui%2Finbox"`) ||
		!strings.Contains(got.body, `name="member"`) {
		t.Fatalf("login page with both logins: %d\n%s", got.status, got.body)
	}
}

// TestOIDCSessionCookie: with the provider's login the session cookie is
// SameSite=Lax (a Strict one set on the way back from the provider would
// not be sent on the redirect after it), still HttpOnly.
func TestOIDCSessionCookie(t *testing.T) {
	h, p := oidcHarness(t, nil, false)
	p.m.QueueUser(person("sub-ana", "ana@corp.example", true))
	b := h.browser(t)
	got := b.get("/ui/inbox")
	c, err := http.ParseSetCookie(got.header.Get("Set-Cookie"))
	if err != nil || c.SameSite != http.SameSiteLaxMode || !c.HttpOnly || c.Secure {
		t.Fatalf("session cookie %q, want HttpOnly, SameSite=Lax, not Secure over plain http", got.header.Get("Set-Cookie"))
	}
	if got.header.Get("Location") != "/ui/login?next=%2Fui%2Finbox" {
		t.Fatalf("inbox signed out: to %q", got.header.Get("Location"))
	}
}

// TestOIDCRoutes: each route of the provider's login, signed out, and the
// routes a console without it does not have.
func TestOIDCRoutes(t *testing.T) {
	h, p := oidcHarness(t, nil, false)
	plain := newHarness(t, harnessOpts{})
	for _, tc := range []struct {
		name   string
		h      *harness
		path   string
		status int
		to     string // the Location's start
	}{
		{"login goes to the provider's login, keeping its query", h, "/ui/login?max_age=60&next=%2Fui%2Finbox", http.StatusSeeOther, "/ui/oidc/login?max_age=60&next=%2Fui%2Finbox"},
		{"the provider's login goes there", h, "/ui/oidc/login", http.StatusSeeOther, p.m.AuthorizationEndpoint() + "?"},
		{"a callback without a login started", h, "/ui/oidc/callback?code=x&state=y", http.StatusBadRequest, ""},
		{"inbox signed out", h, "/ui/inbox", http.StatusSeeOther, "/ui/login?next=%2Fui%2Finbox"},
		{"no provider's login without one", plain, "/ui/oidc/login", http.StatusNotFound, ""},
		{"no callback without one", plain, "/ui/oidc/callback?code=x&state=y", http.StatusNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.h.browser(t).get(tc.path)
			if loc := got.header.Get("Location"); got.status != tc.status || !strings.HasPrefix(loc, tc.to) || (tc.to == "") != (loc == "") {
				t.Fatalf("GET %s: %d to %q, want %d to %q…", tc.path, got.status, loc, tc.status, tc.to)
			}
			if csp := got.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
				t.Fatalf("GET %s: Content-Security-Policy %q", tc.path, csp)
			}
		})
	}
}
