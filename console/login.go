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
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	se := sessionOf(r)
	p := c.newPage(se, "Log in", loginData{Local: c.cfg.LocalLogin, Members: c.members(), Next: c.next(r.URL.Query().Get("next"))})
	if !c.cfg.LocalLogin {
		p.Problem = "No login is set up for this console (ui.local_login is for demos on loopback; a login through an identity provider is not available yet)."
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
// member of the config's roles. AuthTime, when zero, is now.
func (c *Console) SignIn(w http.ResponseWriter, r *http.Request, who Identity) error {
	if who.Member == "" || who.Method == "" {
		return errors.New("console: sign in: an identity needs a member and a method")
	}
	now := c.clock.Now()
	if who.AuthTime.IsZero() {
		who.AuthTime = now.UTC()
	}
	fresh, err := newSession(now)
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
