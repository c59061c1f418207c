package app

import (
	"runtime/debug"
	"strconv"
)

// serverGC is the garbage collector's goal (GOGC) for the commands that run
// long and hot, serve and bench, when the environment sets none. The process
// keeps no runs in memory (they live in the store), so its live heap stays
// small: letting the heap grow to five times it between collections instead
// of twice costs some tens of MB and saves about a tenth of the CPU a whole
// run costs (`signoff bench`, `go test ./internal/benchkit -bench EndToEnd`
// with GOGC=100 and 400).
const serverGC = 400

// tuneGC sets serverGC unless GOGC is set, and says which goal is in force.
func (c *cli) tuneGC() string {
	if v := c.getenv("GOGC"); v != "" {
		return v
	}
	debug.SetGCPercent(serverGC)
	return strconv.Itoa(serverGC)
}
