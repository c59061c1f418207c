package console

import (
	"errors"
	"net/http"
	"slices"
	"strings"
)

// member is one person the local login offers, with their highest role.
type member struct {
	ID   string
	Role string
}

// members are the config's people, each once, lowest role first.
func (c *Console) members() []member {
	roles := c.eng.Roles()
	var out []member
	seen := map[string]bool{}
	for _, name := range roles.Names() {
		for _, id := range roles.Members(name) {
			if seen[id] {
				continue
			}
			seen[id] = true
			best, _ := roles.RoleOf(id)
			out = append(out, member{ID: id, Role: best})
		}
	}
	return out
}

type loginData struct {
	Local   bool
	Members []member
	Next    string
	OIDC    string // the link that starts the identity provider's login
}

// loginPage offers the logins this console has. With the identity
// provider's alone it goes there at once, passing max_age and prompt on
// (/ui/login?max_age=300&next=/ui/runs/ID asks for a fresh login).
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	se := sessionOf(r)
	next := c.next(r.URL.Query().Get("next"))
	if c.oidc != nil && !c.cfg.LocalLogin {
		u := *r.URL
		u.Path = c.cfg.Prefix + "/oidc/login"
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return
	}
	d := loginData{Local: c.cfg.LocalLogin, Members: c.members(), Next: next}
	if c.oidc != nil {
		d.OIDC = c.loginLink(next, r.URL.Query())
	}
	p := c.newPage(se, "Log in", d)
	if !c.cfg.LocalLogin && c.oidc == nil {
		p.Problem = "No login is set up for this console: set ui.oidc for a login through an identity provider (ui.local_login is for demos on loopback)."
	}
	c.render(w, r, http.StatusOK, "login", p)
}

// login is the local login: the visitor becomes the member they picked. A
// new session (a new CSRF token) starts with it.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	se := sessionOf(r)
	if !c.cfg.LocalLogin {
		c.problem(w, r, se, http.StatusForbidden, "the local login is off (ui.local_login)")
		return
	}
	id := r.PostFormValue("member")
	if !slices.ContainsFunc(c.members(), func(m member) bool { return m.ID == id }) {
		c.problem(w, r, se, http.StatusBadRequest, "pick one of the members of the config's roles")
		return
	}
	if err := c.SignIn(w, r, Identity{Member: id, Method: MethodLocal}); err != nil {
		c.fail(w, r, err)
		return
	}
	c.log.Info("console login", "member", id, "method", MethodLocal)
	http.Redirect(w, r, c.next(r.PostFormValue("next")), http.StatusSeeOther)
}

// SignIn starts a new session (a new CSRF token) for who, on the
// response: the local login uses it, and so may a program that mounts the
// console behind a login of its own, once it has mapped the person to a
// member of the config's roles. An identity with a subject and no member
// may read and never decide. AuthTime, when zero, is now.
func (c *Console) SignIn(w http.ResponseWriter, r *http.Request, who Identity) error {
	if (who.Member == "" && who.Subject == "") || who.Method == "" {
		return errors.New("console: sign in: an identity needs a member (or a subject) and a method")
	}
	if who.AuthTime.IsZero() {
		who.AuthTime = c.clock.Now().UTC()
	}
	return c.startSession(w, r, who)
}

// startSession writes a new session for who, whose AuthTime may be zero:
// not known, so no step that wants a recent sign-in counts it.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, who Identity) error {
	fresh, err := newSession(c.clock.Now())
	if err != nil {
		return err
	}
	fresh.Who = &who
	return c.sess.write(w, r, fresh)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	c.sess.clear(w, r)
	http.Redirect(w, r, c.cfg.Prefix+"/login", http.StatusSeeOther)
}

// next is where to go after the login: a path of the console's own, never
// another site ("//evil.example" included), else the inbox.
func (c *Console) next(s string) string {
	p := c.cfg.Prefix
	if strings.HasPrefix(s, p+"/") && !strings.HasPrefix(s, "//") && !strings.Contains(s, "\\") && !strings.HasPrefix(s, p+"/login") {
		return s
	}
	return p + "/inbox"
}

// SignedIn returns who r's session cookie says is signed in, and when they
// proved it (Identity.AuthTime): for a check of how fresh a login is before
// a step that wants a recent one.
func (c *Console) SignedIn(r *http.Request) (Identity, bool) {
	se := c.sess.read(r, c.clock.Now())
	if se == nil || se.Who == nil {
		return Identity{}, false
	}
	return *se.Who, true
}
