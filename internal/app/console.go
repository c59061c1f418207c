package app

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/console"
)

// consolePrefix is where serve mounts the web console.
const consolePrefix = "/ui"

// uiKeyEnv holds the key that signs the console's sessions unless
// ui.session_key_file names a file.
const uiKeyEnv = "SIGNOFF_UI_SESSION_KEY"

// checkUI refuses, before anything is opened, a console that could not
// start or should not: a local login on an address others can reach, or no
// session key.
func checkUI(cfg *config.Config, addr string, getenv func(string) string) error {
	if !cfg.UI.Given {
		return nil
	}
	if cfg.UI.LocalLogin && !loopback(addr) {
		return cfg.Errorf("ui.local_login", "the local login lets anyone be anyone, so serve offers it on loopback only, and --addr %s is not; "+
			"serve on 127.0.0.1 (e.g. --addr 127.0.0.1:8080) or remove local_login", addr)
	}
	if cfg.UI.PlainHTTP && !loopback(addr) {
		return cfg.Errorf("ui.plain_http", "plain_http sends the login's cookies without Secure, so serve allows it on loopback only, and --addr %s is not; "+
			"serve behind TLS and remove plain_http", addr)
	}
	if o := cfg.UI.OIDC; o != nil {
		if strings.TrimSpace(getenv(o.ClientSecretEnv)) == "" {
			return cfg.Errorf("ui.oidc.client_secret_env", "%s, which holds the OIDC client secret, is not set", o.ClientSecretEnv)
		}
		if u := o.RedirectURL; u != "" && !strings.HasSuffix(u, consolePrefix+"/oidc/callback") {
			return cfg.Errorf("ui.oidc.redirect_url", "%s is not where serve answers the identity provider: it ends in %s/oidc/callback", u, consolePrefix)
		}
	}
	_, err := uiSessionKey(cfg, getenv)
	return err
}

// loopback says whether addr (host:port) listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false // ":8080" listens on every interface
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// uiSessionKey reads the key that signs the console's sessions: from
// ui.session_key_file, else from SIGNOFF_UI_SESSION_KEY. Never from the
// store, so that whoever reads the database cannot forge a session.
func uiSessionKey(cfg *config.Config, getenv func(string) string) ([]byte, error) {
	if f := cfg.UI.SessionKeyFile; f != "" {
		if !filepath.IsAbs(f) {
			f = filepath.Join(cfg.Dir(), f)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, cfg.Errorf("ui.session_key_file", "read the console's session key: %v", err)
		}
		key := []byte(strings.TrimSpace(string(b)))
		if len(key) < console.MinKeyLen {
			return nil, cfg.Errorf("ui.session_key_file", "%s holds %d bytes; the session key needs at least %d (e.g. openssl rand -hex 32 > %s)",
				f, len(key), console.MinKeyLen, f)
		}
		return key, nil
	}
	key := []byte(strings.TrimSpace(getenv(uiKeyEnv)))
	if len(key) < console.MinKeyLen {
		what := "is not set"
		if len(key) > 0 {
			what = fmt.Sprintf("holds %d bytes", len(key))
		}
		return nil, cfg.Errorf("ui", "the console signs its sessions with a key of at least %d bytes kept outside the store, and %s %s; "+
			"set it (e.g. export %s=$(openssl rand -hex 32)) or name a file in ui.session_key_file", console.MinKeyLen, uiKeyEnv, what, uiKeyEnv)
	}
	return key, nil
}

// newConsole is the console on a's engine, as the config's ui: says; ready
// is the host's readiness (nil for none). Its Operations page says the
// config as config check does, and names the anchors' newest. With an
// identity provider's login its cookies are Secure unless plain_http.
func newConsole(a *app, key []byte, ready func(context.Context) error) (*console.Console, error) {
	ui := a.cfg.UI
	var setup bytes.Buffer
	renderConfig(&setup, a.cfg, a.getenv)
	cc := console.Config{Engine: a.engine, Prefix: consolePrefix, SessionKey: key, ReadOnly: ui.ReadOnly,
		LocalLogin: ui.LocalLogin, Clock: a.clock, Logger: a.log, Ready: ready,
		Setup: strings.Split(strings.TrimRight(setup.String(), "\n"), "\n")}
	if a.anchors != nil {
		cc.Anchor = a.anchors.latest
	}
	if o := ui.OIDC; o != nil {
		cc.Secure = !ui.PlainHTTP
		cc.OIDC = &console.OIDC{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: strings.TrimSpace(a.getenv(o.ClientSecretEnv)),
			RedirectURL: o.RedirectURL, Scopes: o.Scopes, Allowed: o.Allowed, Members: ui.MembersByLogin()}
	}
	return console.New(cc)
}

// mountConsole mounts the console at /ui on e when the config has a ui:
// section.
func mountConsole(e *echo.Echo, a *app, addr string, ready func(context.Context) error) error {
	if !a.cfg.UI.Given {
		return nil
	}
	if err := checkUI(a.cfg, addr, a.getenv); err != nil {
		return err
	}
	key, err := uiSessionKey(a.cfg, a.getenv)
	if err != nil {
		return err
	}
	c, err := newConsole(a, key, ready)
	if err != nil {
		return err
	}
	h := echo.WrapHandler(c)
	e.Any(consolePrefix, h)
	e.Any(consolePrefix+"/*", h)
	return nil
}
