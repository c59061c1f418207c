// Command signoff runs risky actions of agents and automations only after a
// person approves them, and keeps that promise across crashes and restarts.
// See docs/cli.md for the commands; the wiring lives in app.go so that tests can
// run the whole program in process.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/signoff-dev/signoff/executor/command"
)

func main() {
	// A command executor's program starts through this binary (see
	// executor/command): that launch is all such a process does.
	command.MaybeLaunch()
	// Nothing else of this user, a program signoff runs among them, may read
	// this process's environment or memory: the secrets are there.
	if err := command.Undumpable(); err != nil {
		fmt.Fprintln(os.Stderr, "signoff: warning:", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
