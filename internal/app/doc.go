// Package app is the signoff program: it reads the global flags and the
// environment, opens the config, the store, the practice shop and the engine,
// and runs the commands on them, serve among them. It is a package of its
// own, not package main, so that the tests run the whole program in process
// (Run, on ports :0) and the binary, cmd/signoff, is only its entry point.
package app

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/signoff-dev/signoff/executor/command"
)

// Main is the whole of the process: args are its arguments (without the
// program's name), stamped the revision the binary was stamped with at build
// ("" for none; see version). It returns the exit code.
func Main(args []string, stamped string) int {
	// A command executor's program starts through this binary (see
	// executor/command): that launch is all such a process does.
	command.MaybeLaunch()
	// Nothing else of this user, a program signoff runs among them, may read
	// this process's environment or memory: the secrets are there.
	if err := command.Undumpable(); err != nil {
		fmt.Fprintln(os.Stderr, "signoff: warning:", err)
	}
	revision = stamped
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, os.Getenv, os.Stdin, os.Stdout, os.Stderr)
}
