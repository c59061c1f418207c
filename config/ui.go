package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/signoff-dev/signoff/policy"
)

// UIConfig is the web console serve mounts at /ui (package console). It is
// on when the config has a ui: section.
type UIConfig struct {
	Given bool // the config has a ui: section
	// ReadOnly: the console shows and never decides.
	ReadOnly bool
	// LocalLogin lets a visitor log in as any member of the roles by picking
	// one: for demos and tests, and refused unless serve listens on loopback.
	LocalLogin bool
	// SessionKeyFile holds the key that signs the console's sessions (at
	// least 32 bytes), outside the store; "" takes it from
	// SIGNOFF_UI_SESSION_KEY. A relative path is from the config's folder
	// (Config.Dir).
	SessionKeyFile string
	// OIDC is the login through an identity provider, nil without one.
	OIDC *OIDCConfig
	// PlainHTTP sends the OIDC login's cookies without Secure, for a
	// console reached over plain http on loopback (serve checks where it
	// listens).
	PlainHTTP bool
	// Members maps a login through the identity provider to the Slack user
	// id the roles list: the same person on the web and in Slack.
	Members []UIMember
	// BaseURL is where people reach the console, e.g.
	// https://signoff.example.com/ui: links to a run's page (a Slack message
	// asking to confirm an approval on the web) are BaseURL/runs/ID. ""
	// leaves them out.
	BaseURL string
}

// OIDCConfig is the console's login through an identity provider.
type OIDCConfig struct {
	Issuer   string
	ClientID string
	// ClientSecretEnv names the environment variable holding the client
	// secret: never the secret itself in the file.
	ClientSecretEnv string
	// RedirectURL is the callback registered at the provider
	// (https://HOST/ui/oidc/callback); "" builds it from the request.
	RedirectURL string
	Scopes      []string // nil: openid, email, profile
	// Allowed: who may sign in; each claim named must hold one of its
	// values. Empty: only a login Members maps.
	Allowed map[string][]string
}

// UIMember is one person: their Slack user id and the email (or subject)
// the identity provider says they are.
type UIMember struct {
	Slack string
	OIDC  string // lower case when an email
}

// MembersByLogin maps each login (email or subject) to its Slack user id.
func (u UIConfig) MembersByLogin() map[string]string {
	m := make(map[string]string, len(u.Members))
	for _, p := range u.Members {
		m[p.OIDC] = p.Slack
	}
	return m
}

type fileUI struct {
	ReadOnly       bool         `yaml:"read_only"`
	LocalLogin     bool         `yaml:"local_login"`
	SessionKeyFile string       `yaml:"session_key_file"`
	OIDC           *fileOIDC    `yaml:"oidc"`
	PlainHTTP      bool         `yaml:"plain_http"`
	Members        []fileMember `yaml:"members"`
	BaseURL        string       `yaml:"base_url"`
}

type fileOIDC struct {
	Issuer          string              `yaml:"issuer"`
	ClientID        string              `yaml:"client_id"`
	ClientSecretEnv string              `yaml:"client_secret_env"`
	RedirectURL     string              `yaml:"redirect_url"`
	Scopes          []string            `yaml:"scopes"`
	Allowed         map[string][]string `yaml:"allowed"`
}

type fileMember struct {
	Slack string `yaml:"slack"`
	OIDC  string `yaml:"oidc"`
}

// ui reads the ui: section. Where its local login and its plain http may
// be used depends on where serve listens, which serve checks; whether the
// client secret's variable is set, serve checks too.
func (c *checker) ui(fu *fileUI, roles *policy.Roles) (UIConfig, error) {
	if fu == nil {
		return UIConfig{}, nil
	}
	u := UIConfig{Given: true, ReadOnly: fu.ReadOnly, LocalLogin: fu.LocalLogin, SessionKeyFile: strings.TrimSpace(fu.SessionKeyFile), PlainHTTP: fu.PlainHTTP}
	base, err := baseURL(fu.BaseURL)
	if err != nil {
		return u, c.fail("ui.base_url", err)
	}
	u.BaseURL = base
	if fu.OIDC != nil {
		o, err := c.oidc(fu.OIDC)
		if err != nil {
			return u, err
		}
		u.OIDC = o
	}
	if u.PlainHTTP && u.OIDC == nil {
		return u, c.failf("ui.plain_http", "plain_http is about the cookies of the OIDC login, and ui.oidc is not set")
	}
	if len(fu.Members) > 0 && u.OIDC == nil {
		return u, c.failf("ui.members", "members map logins through the identity provider to Slack user ids, and ui.oidc is not set")
	}
	u.Members, err = c.uiMembers(fu.Members, roles)
	return u, err
}

func (c *checker) oidc(fo *fileOIDC) (*OIDCConfig, error) {
	o := &OIDCConfig{Issuer: strings.TrimSpace(fo.Issuer), ClientID: strings.TrimSpace(fo.ClientID),
		ClientSecretEnv: strings.TrimSpace(fo.ClientSecretEnv), RedirectURL: strings.TrimSpace(fo.RedirectURL), Scopes: fo.Scopes}
	if err := webURL(o.Issuer, true); err != nil {
		return nil, c.failf("ui.oidc.issuer", "the identity provider's issuer %v (e.g. https://accounts.google.com)", err)
	}
	if o.ClientID == "" {
		return nil, c.failf("ui.oidc.client_id", "the client id the identity provider gave the console is required")
	}
	if !envNamePattern.MatchString(o.ClientSecretEnv) {
		return nil, c.failf("ui.oidc.client_secret_env", "name the environment variable that holds the client secret (e.g. SIGNOFF_OIDC_CLIENT_SECRET); the secret itself is never in the file")
	}
	if o.RedirectURL != "" {
		if err := webURL(o.RedirectURL, false); err != nil {
			return nil, c.failf("ui.oidc.redirect_url", "the callback %v (e.g. https://signoff.corp.example/ui/oidc/callback)", err)
		}
	}
	if fo.Scopes != nil && !slices.Contains(fo.Scopes, "openid") {
		return nil, c.failf("ui.oidc.scopes", "the scopes must include openid")
	}
	if len(fo.Allowed) > 0 {
		o.Allowed = map[string][]string{}
	}
	for _, claim := range keysInOrder(c.doc, "ui.oidc.allowed", fo.Allowed) {
		vals := fo.Allowed[claim]
		if claim == "" || len(vals) == 0 || slices.Contains(vals, "") {
			return nil, c.failf("ui.oidc.allowed"+keySegment(claim), "name a claim and the values it may hold (e.g. hd: [corp.example], groups: [signoff-approvers])")
		}
		o.Allowed[claim] = vals
	}
	return o, nil
}

// webURL checks an absolute https URL; http too on a loopback host, for a
// provider on the same machine (tests, demos). An issuer has no query.
func webURL(s string, issuer bool) error {
	u, err := url.Parse(s)
	if s == "" || err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.User != nil || u.Fragment != "" || (issuer && u.RawQuery != "") {
		return fmt.Errorf("%q must be an absolute https URL", s)
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return fmt.Errorf("%q must be https (plain http only on loopback)", s)
	}
	return nil
}

func loopbackHost(h string) bool {
	ip := net.ParseIP(h)
	return h == "localhost" || (ip != nil && ip.IsLoopback())
}

// uiMembers checks the mapping: a Slack user id the roles list, a login
// named once, each person once.
func (c *checker) uiMembers(fms []fileMember, roles *policy.Roles) ([]UIMember, error) {
	var out []UIMember
	slack, logins := map[string]int{}, map[string]int{}
	for i, fm := range fms {
		p := fmt.Sprintf("ui.members[%d]", i)
		m := UIMember{Slack: strings.TrimSpace(fm.Slack), OIDC: strings.TrimSpace(fm.OIDC)}
		if strings.Contains(m.OIDC, "@") {
			m.OIDC = strings.ToLower(m.OIDC)
		}
		if !slackUser.MatchString(m.Slack) {
			return nil, c.failf(p+".slack", "%q is not a Slack user id (U… or W…)", m.Slack)
		}
		if _, ok := roles.RoleOf(m.Slack); !ok {
			return nil, c.failf(p+".slack", "%s is in none of the roles, so the login would decide nothing", m.Slack)
		}
		if m.OIDC == "" || strings.ContainsFunc(m.OIDC, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return nil, c.failf(p+".oidc", "the login's email or subject is required, without spaces (e.g. ana@corp.example)")
		}
		if j, ok := slack[m.Slack]; ok {
			return nil, c.failf(p+".slack", "%s is mapped already by ui.members[%d]", m.Slack, j)
		}
		if j, ok := logins[m.OIDC]; ok {
			return nil, c.failf(p+".oidc", "%s is mapped already by ui.members[%d]", m.OIDC, j)
		}
		slack[m.Slack], logins[m.OIDC] = i, i
		out = append(out, m)
	}
	return out, nil
}

// baseURL checks ui.base_url: an absolute http(s) URL with a host and no
// query, fragment or user, given without its trailing slash.
func baseURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not a URL: %w", s, err)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		return "", fmt.Errorf("%q: give the console's full address, e.g. https://signoff.example.com/ui", s)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "", fmt.Errorf("%q: no query, fragment or user in the console's address", s)
	}
	return strings.TrimSuffix(s, "/"), nil
}
