//go:build !linux

package benchkit

// ServerCPU: a server's processes are read from Linux's /proc only.
func ServerCPU(int) (func() (ProcTimes, error), bool) { return nil, false }
