// Package bot is signoff's Slack edge: it takes verified clicks and slash
// commands from Slack, turns them into engine calls, and renders runs as Block
// Kit messages.
//
// Every request counts once: after its signature verifies and before anything
// is decided, its digest is claimed in the store, and a copy of it (a replay,
// or Slack's own retry), on any replica, gets the first answer and changes
// nothing. Socket Mode envelopes are claimed by envelope id the same way.
//
// A click is trusted only after its v0 signature verifies over the raw body,
// its payload parses strictly, and it names our app and our organisation. The
// engine then decides by compare-and-set; this package never runs an action.
// The engine leaves an approved run executing and a worker resumes it from the
// store, so a crash after the answer to Slack loses nothing.
//
// Socket Mode is a second transport for the same handlers: HandleInteraction
// and HandleCommand hold all the logic, and the HTTP handlers add only the body
// limit and the signature check.
package bot
