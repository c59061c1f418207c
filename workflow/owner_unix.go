//go:build unix

package workflow

import (
	"errors"
	"syscall"
)

// processGone says whether no process has pid: signal 0 checks without
// sending anything, and EPERM means one exists that we may not signal.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
