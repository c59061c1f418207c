// Package console is signoff's web console: an http.Handler, server-rendered
// from embedded templates and a stylesheet, that shows the runs waiting for
// a decision (the inbox), a run as it happened (its timeline, its arguments
// as proposed, edited and executed, its untrusted inputs shown inert, its
// audit events and their verification) and takes a decision through the
// engine's own Decide, bound to the fingerprint shown: as it is, or with
// the arguments edited in a form built from the action's JSON Schema (the
// path of Slack's edit form). A run that needs attention is resolved
// through the engine's Resolve, and the Operations page shows the outbox,
// the host's readiness, the newest audit anchor and the config in words.
//
// It is an edge: it reads and decides through the engine and never touches
// the store. serve mounts it at /ui; another program may mount it where it
// likes (New's Config.Prefix).
//
// Who is looking is a signed session cookie holding an Identity: the member
// of the config's roles the person acts as, and how they proved it. The
// local login (a member picked from a list) is for demos and tests on
// loopback only; the login through an identity provider (oidc.go: the
// authorization code flow with state, nonce and PKCE) fills the same
// Identity, its subject or verified email mapped to a member, and a login
// the provider allows but no member maps reads and never decides.
//
// Every page is sent with a Content-Security-Policy that allows no script
// and no inline style, every form carries a CSRF token the session holds,
// and every string an agent, a requester or a target wrote is rendered
// through package show and escaped by html/template.
package console
