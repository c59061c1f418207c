//go:build !linux

package benchkit

import "time"

// ServerCPU: a server's processes are read from Linux's /proc only.
func ServerCPU(int) (func() (time.Duration, error), bool) { return nil, false }
