// Command signoff runs risky actions of agents and automations only after a
// person approves them, and keeps that promise across crashes and restarts.
// See docs/cli.md for the commands. The program is package internal/app, so
// that tests can run all of it in process; this is only its entry point and
// where a build stamps its revision.
package main

import (
	"os"

	"github.com/signoff-dev/signoff/internal/app"
)

// revision is the VCS revision a build without VCS information was made from,
// stamped with -ldflags "-X main.revision=REV": the image's build context has
// no .git, so the Dockerfile passes it in.
var revision string

func main() {
	os.Exit(app.Main(os.Args[1:], revision))
}
