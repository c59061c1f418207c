package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/signoff-dev/signoff/show"
	"github.com/signoff-dev/signoff/workflow"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config is what the console needs.
type Config struct {
	Engine *workflow.Engine
	// Prefix is where the console is mounted, e.g. "/ui" ("" for the root);
	// every link and the cookie's path start with it. The handler expects
	// the full path (it strips nothing).
	Prefix string
	// SessionKey signs the session cookies: at least MinKeyLen bytes, kept
	// outside the store (an environment variable or a file of its own).
	SessionKey []byte
	// Secure marks the cookie Secure: set it when the console is reached
	// over TLS.
	Secure bool
	// ReadOnly refuses every decision: the console only shows.
	ReadOnly bool
	// LocalLogin lets a visitor log in as any member of the config's roles
	// by picking one: for demos and tests on loopback only (the caller
	// checks where it listens).
	LocalLogin bool
	// Ready says why the process serving the console should not be sent
	// traffic (serve's readiness: the store, its schema, every loop), or
	// nil; the Operations page shows it. Nil when the host has no loops.
	Ready func(ctx context.Context) error
	// Anchor is the newest audit anchor published outside the store, false
	// before any; nil when the host publishes none.
	Anchor func() (workflow.Anchor, bool)
	// Setup is the config in use in words, a line each, as signoff config
	// check says it: the host leaves out every secret.
	Setup []string
	// OIDC, when set, is the login through an identity provider (oidc.go).
	OIDC *OIDC
	// Clock is the engine's clock (default workflow.SystemClock).
	Clock  workflow.Clock
	Logger *slog.Logger
}

// Console is the web console's handler.
type Console struct {
	cfg    Config
	eng    *workflow.Engine
	sess   *sessions
	pages  map[string]*template.Template
	mux    *http.ServeMux
	clock  workflow.Clock
	log    *slog.Logger
	static http.Handler
	oidc   *oidcClient // nil without a login through an identity provider
}

// contentSecurityPolicy allows the console's own stylesheet and nothing
// else: no script at all, no inline style, forms posted only back here, and
// no framing (so a page cannot be overlaid to steal a click).
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// New checks cfg and returns the console.
func New(cfg Config) (*Console, error) {
	if cfg.Engine == nil {
		return nil, errors.New("console: no engine")
	}
	if len(cfg.SessionKey) < MinKeyLen {
		return nil, fmt.Errorf("console: the session key has %d bytes; it needs at least %d", len(cfg.SessionKey), MinKeyLen)
	}
	if cfg.Prefix != "" && (!strings.HasPrefix(cfg.Prefix, "/") || strings.HasSuffix(cfg.Prefix, "/")) {
		return nil, fmt.Errorf("console: prefix %q must start with / and not end with one", cfg.Prefix)
	}
	if cfg.Clock == nil {
		cfg.Clock = workflow.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkOIDC(cfg); err != nil {
		return nil, err
	}
	pages, err := parsePages(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, eng: cfg.Engine, sess: &sessions{key: cfg.SessionKey, secure: cfg.Secure, lax: cfg.OIDC != nil, path: cfg.Prefix},
		pages: pages, clock: cfg.Clock, log: cfg.Logger,
		static: http.StripPrefix(cfg.Prefix+"/static/", http.FileServerFS(sub))}
	if cfg.OIDC != nil {
		c.oidc = &oidcClient{cfg: *cfg.OIDC}
	}
	c.mux = c.routes()
	return c, nil
}

// checkOIDC refuses an identity provider's login that could not work.
func checkOIDC(cfg Config) error {
	o := cfg.OIDC
	if o == nil {
		return nil
	}
	if o.Issuer == "" || o.ClientID == "" || o.ClientSecret == "" {
		return errors.New("console: the OIDC login needs an issuer, a client id and a client secret")
	}
	if o.RedirectURL != "" {
		u, err := url.Parse(o.RedirectURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != cfg.Prefix+"/oidc/callback" {
			return fmt.Errorf("console: the OIDC redirect URL %q must be http(s)://HOST%s/oidc/callback, where the console answers the provider", o.RedirectURL, cfg.Prefix)
		}
	}
	if len(o.Scopes) > 0 && !slices.Contains(o.Scopes, "openid") {
		return errors.New("console: the OIDC scopes must include openid")
	}
	return nil
}

// route is one of the console's routes: its mux pattern (method and
// path) and its handler.
type route struct {
	pattern string
	handler http.Handler
}

// routeList is every route of the console, as configured: the one list
// the mux is built from, and that the route tests cover case by case.
func (c *Console) routeList() []route {
	p := c.cfg.Prefix
	toInbox := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, p+"/inbox", http.StatusSeeOther) })
	rs := []route{{"GET " + p + "/{$}", toInbox}}
	if p != "" {
		rs = append(rs, route{"GET " + p, toInbox})
	}
	rs = append(rs,
		route{"GET " + p + "/static/", c.static},
		route{"GET " + p + "/login", http.HandlerFunc(c.loginPage)},
		route{"POST " + p + "/login", http.HandlerFunc(c.login)},
		route{"POST " + p + "/logout", http.HandlerFunc(c.logout)})
	if c.oidc != nil {
		rs = append(rs,
			route{"GET " + p + "/oidc/login", http.HandlerFunc(c.oidcStart)},
			route{"GET " + p + "/oidc/callback", http.HandlerFunc(c.oidcCallback)})
	}
	return append(rs,
		route{"GET " + p + "/inbox", c.signedIn(c.inbox)},
		route{"GET " + p + "/runs/{id}", c.signedIn(c.runPage)},
		route{"GET " + p + "/ops", c.signedIn(c.ops)},
		route{"POST " + p + "/runs/{id}/decide", c.signedIn(c.decide)},
		route{"POST " + p + "/runs/{id}/edit", c.signedIn(c.edit)},
		route{"POST " + p + "/runs/{id}/resolve", c.signedIn(c.resolve)})
}

func (c *Console) routes() *http.ServeMux {
	m := http.NewServeMux()
	for _, r := range c.routeList() {
		m.Handle(r.pattern, r.handler)
	}
	return m
}

// ServeHTTP sets the security headers every answer carries, makes sure the
// visitor has a session (for the CSRF token of the login form), refuses a
// POST without its session's token, and routes.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if r.URL.Path != c.cfg.Prefix && !strings.HasPrefix(r.URL.Path, c.cfg.Prefix+"/") {
		// Not the console's (a favicon, say): no session is started, so
		// none replaces the one the visitor's pages carry.
		http.NotFound(w, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, c.cfg.Prefix+"/static/") {
		h.Set("Cache-Control", "public, max-age=3600")
		c.mux.ServeHTTP(w, r)
		return
	}
	now := c.clock.Now()
	se := c.sess.read(r, now)
	if se == nil {
		var err error
		if se, err = newSession(now); err != nil {
			c.fail(w, r, fmt.Errorf("start a session: %w", err))
			return
		}
		if err := c.sess.write(w, r, se); err != nil {
			c.fail(w, r, err)
			return
		}
	}
	if r.Method == http.MethodPost {
		if err := checkCSRF(r, se); err != nil {
			c.problem(w, r, se, http.StatusForbidden, err.Error())
			return
		}
	}
	c.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, se)))
}

type sessionKey struct{}

func sessionOf(r *http.Request) *session {
	se, _ := r.Context().Value(sessionKey{}).(*session)
	return se
}

// signedIn sends a visitor without a login to the login page, coming back
// here after it.
func (c *Console) signedIn(next func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		se := sessionOf(r)
		if se == nil || se.Who == nil {
			if r.Method != http.MethodGet {
				c.problem(w, r, se, http.StatusUnauthorized, "log in first")
				return
			}
			http.Redirect(w, r, c.cfg.Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		next(w, r, se)
	}
}

// page is what every template is given.
type page struct {
	Title    string
	Prefix   string
	CSRF     string
	Who      *Identity
	WhoName  string // the member, else the login's email or subject, inert
	Role     string
	ReadOnly bool
	Notice   string // what was just done
	Problem  string // why it was refused
	Data     any
}

func (c *Console) newPage(se *session, title string, data any) *page {
	p := &page{Title: title, Prefix: c.cfg.Prefix, ReadOnly: c.cfg.ReadOnly, Data: data}
	if se != nil {
		p.CSRF, p.Who = se.CSRF, se.Who
		if se.Who != nil {
			p.WhoName = show.Inert(se.Who.label())
			if se.Who.Member != "" {
				p.WhoName = se.Who.Member
				p.Role, _ = c.eng.Roles().RoleOf(se.Who.Member)
			}
		}
	}
	return p
}

// render writes page name with status, or a plain error when it cannot be
// rendered (nothing half-written is sent).
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page) {
	var b bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		c.fail(w, r, fmt.Errorf("render %s: %w", name, err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = b.WriteTo(w)
}

// problem renders a page saying, in words, why the request was refused.
func (c *Console) problem(w http.ResponseWriter, r *http.Request, se *session, status int, msg string) {
	p := c.newPage(se, http.StatusText(status), nil)
	p.Problem = msg
	c.render(w, r, status, "problem", p)
}

// fail answers 500 for what the console could not do, logged with its cause.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	c.log.Error("console request failed", "method", r.Method, "path", r.URL.Path, "error", err.Error())
	http.Error(w, "the console could not answer this request; the server's log says why", http.StatusInternalServerError)
}
