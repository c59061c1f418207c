//go:build !unix

package benchkit

import "time"

// CPUTime is the CPU time this process has used so far: not known here.
func CPUTime() (time.Duration, bool) { return 0, false }
