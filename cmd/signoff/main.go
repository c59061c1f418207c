// Command signoff runs risky actions of agents and automations only after a
// person approves them, and keeps that promise across crashes and restarts.
// See docs/cli.md for the commands; the wiring lives in app.go so that tests can
// run the whole program in process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
