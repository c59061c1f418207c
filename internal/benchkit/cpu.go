//go:build unix

package benchkit

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time (user and system) this process has used so far;
// false where the system cannot say.
func CPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
