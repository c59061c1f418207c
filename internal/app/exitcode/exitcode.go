// Package exitcode is the exit codes of signoff, which automation can trust
// (docs/cli.md lists them). It is a package of its own so that the commands
// that set them and the demo's story, which checks them as a script would,
// share one definition.
package exitcode

// The exit codes.
const (
	Done      = 0 // done (or a command that is not about one run succeeded)
	Failed    = 1 // a check failed, or the command failed
	Refused   = 2 // invalid or refused input: nothing changed
	Waiting   = 3 // waiting for approval
	Ended     = 4 // rejected, expired or cancelled
	Attention = 5 // needs attention
	Active    = 6 // still running, executing or scheduled: nothing to decide, not finished
)
