package console

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/signoff-dev/signoff/show"
)

// OIDC is a login through an identity provider: the authorization code
// flow with state, nonce and PKCE, the ID token verified (issuer, audience,
// expiry, nonce), its claims checked against Allowed and its email or
// subject mapped to a member by Members.
type OIDC struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is the callback the provider sends the browser back to:
	// Prefix+"/oidc/callback" on the console's address. "" builds it from
	// the request (https unless it came over plain http and the console is
	// not Secure).
	RedirectURL string
	// Scopes asked for ("openid" among them); nil: openid, email, profile.
	Scopes []string
	// Allowed is who may sign in: every claim named must hold one of its
	// values (for a list claim such as groups, one of its elements). Empty:
	// only a login Members maps may sign in.
	Allowed map[string][]string
	// Members maps a login to the member of the roles it acts as: by
	// subject, or by email (lower case) when the provider says it is
	// verified. A login that passes Allowed but is not mapped may read and
	// never decide.
	Members map[string]string
	// HTTPClient reaches the provider (nil: http.DefaultClient).
	HTTPClient *http.Client
}

// MethodOIDC is the Method of an Identity signed in through the identity
// provider.
const MethodOIDC = "oidc"

// flowTTL is how long a login started may take to come back.
const flowTTL = 10 * time.Minute

// maxMaxAge bounds the max_age a link may ask for (a day).
const maxMaxAge = 24 * 60 * 60

// flow is what the flow cookie holds between the redirect to the provider
// and its callback, signed: the state and nonce sent, the PKCE verifier
// kept, where to go after, how fresh the login must be.
type flow struct {
	State    string    `json:"state"`
	Nonce    string    `json:"nonce"`
	Verifier string    `json:"verifier"`
	Next     string    `json:"next"`
	MaxAge   int       `json:"max_age,omitempty"` // seconds; -1: none asked
	Prompt   string    `json:"prompt,omitempty"`  // "login": a fresh authentication asked
	Expires  time.Time `json:"exp"`
}

// oidcClient is the provider, discovered on the first login (so that serve
// starts while the provider is unreachable) and kept once it answered.
type oidcClient struct {
	cfg  OIDC
	mu   sync.Mutex
	prov *oidc.Provider
}

func (o *oidcClient) ctx(ctx context.Context) context.Context {
	if o.cfg.HTTPClient != nil {
		return oidc.ClientContext(ctx, o.cfg.HTTPClient)
	}
	return ctx
}

func (o *oidcClient) provider(ctx context.Context) (*oidc.Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.prov != nil {
		return o.prov, nil
	}
	// The provider keeps the context to fetch its keys later: not the
	// request's, which ends with it.
	p, err := oidc.NewProvider(o.ctx(context.WithoutCancel(ctx)), o.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discover the identity provider %s: %w", o.cfg.Issuer, err)
	}
	o.prov = p
	return p, nil
}

func (o *oidcClient) oauth2(p *oidc.Provider, redirect string) *oauth2.Config {
	scopes := o.cfg.Scopes
	if len(scopes) == 0 {
		scopes = []string{oidc.ScopeOpenID, "email", "profile"}
	}
	return &oauth2.Config{ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, Endpoint: p.Endpoint(), RedirectURL: redirect, Scopes: scopes}
}

// redirectURL is where the provider sends the browser back.
func (c *Console) redirectURL(r *http.Request) string {
	if u := c.cfg.OIDC.RedirectURL; u != "" {
		return u
	}
	scheme := "https"
	if r.TLS == nil && !c.cfg.Secure {
		scheme = "http"
	}
	return scheme + "://" + r.Host + c.cfg.Prefix + "/oidc/callback"
}

// oidcStart sends the browser to the provider. max_age (seconds) or
// prompt=login asks for a fresh login, for a step that wants one: e.g.
// /ui/oidc/login?max_age=300&next=/ui/runs/ID.
func (c *Console) oidcStart(w http.ResponseWriter, r *http.Request) {
	se := sessionOf(r)
	q := r.URL.Query()
	maxAge := -1
	if s := q.Get("max_age"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > maxMaxAge {
			c.problem(w, r, se, http.StatusBadRequest, fmt.Sprintf("max_age must be a number of seconds from 0 to %d", maxMaxAge))
			return
		}
		maxAge = n
	}
	prompt := q.Get("prompt")
	if prompt != "" && prompt != "login" {
		c.problem(w, r, se, http.StatusBadRequest, "prompt may only be login")
		return
	}
	p, err := c.oidc.provider(r.Context())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	f := flow{State: randomToken(), Nonce: randomToken(), Verifier: oauth2.GenerateVerifier(), Next: c.next(q.Get("next")),
		MaxAge: maxAge, Prompt: prompt, Expires: c.clock.Now().Add(flowTTL)}
	if err := c.sess.writeFlow(w, r, &f); err != nil {
		c.fail(w, r, err)
		return
	}
	opts := []oauth2.AuthCodeOption{oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)}
	if maxAge >= 0 {
		opts = append(opts, oauth2.SetAuthURLParam("max_age", strconv.Itoa(maxAge)))
	}
	if prompt != "" {
		opts = append(opts, oauth2.SetAuthURLParam("prompt", prompt))
	}
	http.Redirect(w, r, c.oidc.oauth2(p, c.redirectURL(r)).AuthCodeURL(f.State, opts...), http.StatusSeeOther)
}

// refusal is a login refused, with the status and the words shown.
type refusal struct {
	status int
	msg    string
}

func (e *refusal) Error() string { return e.msg }

func refuse(status int, format string, args ...any) error {
	return &refusal{status: status, msg: fmt.Sprintf(format, args...)}
}

// oidcCallback finishes the login: the state is the flow cookie's, the code
// is exchanged with the PKCE verifier, the ID token verified, its claims
// allowed, and the person signed in as the member they map to.
func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	se := sessionOf(r)
	f, who, err := c.finishLogin(r)
	c.sess.clearFlow(w, r) // a flow is used once, whatever came of it
	var rf *refusal
	switch {
	case errors.As(err, &rf):
		c.log.Info("console login refused", "method", MethodOIDC, "reason", rf.msg)
		c.problem(w, r, se, rf.status, rf.msg+" Log in again from the login page.")
		return
	case err != nil:
		c.fail(w, r, err)
		return
	}
	// Not SignIn: an unknown auth_time stays unknown.
	if err := c.startSession(w, r, who); err != nil {
		c.fail(w, r, err)
		return
	}
	c.log.Info("console login", "member", who.Member, "subject", who.Subject, "method", MethodOIDC)
	http.Redirect(w, r, f.Next, http.StatusSeeOther)
}

// idClaims are the claims of the ID token the console reads.
type idClaims struct {
	Subject       string `json:"sub"`
	Email         string `json:"email"`
	EmailVerified *bool  `json:"email_verified"`
	AuthTime      *int64 `json:"auth_time"`
}

func (c *Console) finishLogin(r *http.Request) (*flow, Identity, error) {
	q := r.URL.Query()
	f := c.sess.readFlow(r, c.clock.Now())
	if e := q.Get("error"); e != "" {
		return f, Identity{}, refuse(http.StatusUnauthorized, "The identity provider refused the login: %s.", show.Inert(capText(e+" "+q.Get("error_description"))))
	}
	if f == nil {
		return nil, Identity{}, refuse(http.StatusBadRequest, "This login was not started here or took longer than %s.", flowTTL)
	}
	if st := q.Get("state"); st == "" || subtle.ConstantTimeCompare([]byte(st), []byte(f.State)) != 1 {
		return nil, Identity{}, refuse(http.StatusBadRequest, "The login's state does not match the one this browser started.")
	}
	p, err := c.oidc.provider(r.Context())
	if err != nil {
		return nil, Identity{}, err
	}
	ctx := c.oidc.ctx(r.Context())
	tok, err := c.oidc.oauth2(p, c.redirectURL(r)).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return nil, Identity{}, refuse(http.StatusUnauthorized, "The identity provider did not accept the login's code: %s.", show.Inert(capText(err.Error())))
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, Identity{}, refuse(http.StatusUnauthorized, "The identity provider sent no ID token.")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: c.oidc.cfg.ClientID, Now: c.clock.Now}).Verify(ctx, raw)
	if err != nil {
		return nil, Identity{}, refuse(http.StatusUnauthorized, "The ID token was refused: %s.", show.Inert(capText(err.Error())))
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return nil, Identity{}, refuse(http.StatusUnauthorized, "The ID token was issued for another login (its nonce is not this one's).")
	}
	who, err := c.identityOf(idt, f)
	return f, who, err
}

// identityOf checks the token's claims against Allowed and max_age, and
// maps the login to a member.
func (c *Console) identityOf(idt *oidc.IDToken, f *flow) (Identity, error) {
	var all map[string]any
	var cl idClaims
	if err := idt.Claims(&all); err != nil {
		return Identity{}, refuse(http.StatusUnauthorized, "The ID token's claims could not be read.")
	}
	if err := idt.Claims(&cl); err != nil {
		return Identity{}, refuse(http.StatusUnauthorized, "The ID token's claims could not be read: %s.", show.Inert(capText(err.Error())))
	}
	now := c.clock.Now()
	who := Identity{Subject: cl.Subject, Method: MethodOIDC, AuthTime: authTimeOf(cl, f)}
	if cl.EmailVerified != nil && *cl.EmailVerified {
		who.Email = strings.ToLower(cl.Email)
	}
	if f.MaxAge >= 0 {
		// Asked for a fresh login: the provider must say when it was.
		if cl.AuthTime == nil || now.Sub(who.AuthTime) > time.Duration(f.MaxAge)*time.Second+time.Minute {
			return Identity{}, refuse(http.StatusUnauthorized, "A login within the last %d seconds was asked for, and the identity provider's is older or does not say when it was.", f.MaxAge)
		}
	}
	who.Member = c.oidc.cfg.Members[who.Subject]
	if who.Member == "" && who.Email != "" {
		who.Member = c.oidc.cfg.Members[who.Email]
	}
	allowed := c.oidc.cfg.Allowed
	if len(allowed) == 0 && who.Member == "" {
		return Identity{}, refuse(http.StatusForbidden, "Your login (%s) is not one of the console's members (ui.members).", show.Inert(capText(who.label())))
	}
	names := make([]string, 0, len(allowed))
	for name := range allowed {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !claimHolds(all[name], allowed[name]) {
			return Identity{}, refuse(http.StatusForbidden, "Your login (%s) may not use this console: its claim %s is not one of %s (ui.oidc.allowed).",
				show.Inert(capText(who.label())), name, strings.Join(allowed[name], ", "))
		}
	}
	return who, nil
}

// authTimeOf is when the person authenticated at the provider: its
// auth_time; without one, when this login started if it asked for a fresh
// authentication (prompt=login: the provider authenticated them after
// that); else unknown (zero), since the provider may have reused a sign-in
// of hours ago, and a step that wants a recent one asks again.
func authTimeOf(cl idClaims, f *flow) time.Time {
	switch {
	case cl.AuthTime != nil:
		return time.Unix(*cl.AuthTime, 0).UTC()
	case f.Prompt == "login":
		return f.Expires.Add(-flowTTL).UTC()
	}
	return time.Time{}
}

// claimHolds says whether a claim's value is one of want: a string, a
// bool or a number as written, or a list holding one of them.
func claimHolds(v any, want []string) bool {
	switch x := v.(type) {
	case nil:
		return false
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { return claimHolds(e, want) })
	case string:
		return slices.Contains(want, x)
	default:
		b, err := json.Marshal(x)
		return err == nil && slices.Contains(want, string(b))
	}
}

// label is how a login is named to the person: their email, else their
// subject.
func (i Identity) label() string {
	if i.Email != "" {
		return i.Email
	}
	return i.Subject
}

// capText bounds a string from the provider before it is shown.
func capText(s string) string {
	const maxText = 300
	if len(s) > maxText {
		return strings.ToValidUTF8(s[:maxText], "") + "…"
	}
	return s
}

// loginLink is the URL that starts the provider's login, keeping next and
// what the login page was asked for a fresh login (max_age, prompt): the
// step-up's "sign in again" link goes through the login page.
func (c *Console) loginLink(next string, asked url.Values) string {
	q := url.Values{"next": {next}}
	for _, k := range []string{"max_age", "prompt"} {
		if v := asked.Get(k); v != "" {
			q.Set(k, v)
		}
	}
	return c.cfg.Prefix + "/oidc/login?" + q.Encode()
}
