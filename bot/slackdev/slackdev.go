// Package slackdev is a local Slack to develop signoff against, on one
// machine: `signoff slack dev` serves the Web API that serve calls (the
// fakeslack stand-in) and prints every message posted or updated as plain
// lines, and `signoff slack click` and `signoff slack command` send serve
// what Slack would when a person clicks a button of such a message, fills in
// the modal it opens, or types a slash command: the payloads in Slack's
// shapes, signed with the signing secret as Slack signs them.
//
// It never decides anything: serve checks these requests exactly as it
// checks Slack's, so what works here works with Slack.
package slackdev

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/signoff-dev/signoff/bot/fakeslack"
)

// DefaultAddr is where `signoff slack dev` listens unless told otherwise.
const DefaultAddr = "127.0.0.1:8090"

// ServeOptions say how Serve runs the local Slack.
type ServeOptions struct {
	Addr string // host:port; "" is DefaultAddr
	// Team and Enterprise are what auth.test names, so that serve finds the
	// token of its own organisation (the config's slack.team_id and
	// slack.enterprise_id); Team defaults to fakeslack.Team.
	Team, Enterprise string
}

// Serve runs the local Slack until ctx ends. It first prints the line that
// says where it listens ("local slack: listening on http://ADDR/api/ …"),
// then each event as WriteEvent shows it.
func Serve(ctx context.Context, o ServeOptions, out io.Writer) error {
	addr := o.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	var mu sync.Mutex // the listening line comes before any event
	mu.Lock()
	fs, err := fakeslack.Start(fakeslack.Options{Addr: addr, Team: o.Team, Enterprise: o.Enterprise, Observe: func(ev fakeslack.Event) {
		mu.Lock()
		defer mu.Unlock()
		WriteEvent(out, ev)
	}})
	if err != nil {
		mu.Unlock()
		return err
	}
	defer fs.Close()
	fmt.Fprintf(out, "local slack: listening on %s (set slack.api_url to it; any bot token works)\n\n", fs.URL())
	mu.Unlock()
	<-ctx.Done()
	return nil
}
