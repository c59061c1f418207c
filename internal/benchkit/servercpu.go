package benchkit

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// A PostgreSQL server on this machine does half of every commit in
// processes of its own: a backend per connection, and the WAL writer and
// checkpointer beside them. The server's CPU time is theirs, read from
// /proc, so that a raw commit and a whole run are both counted whole on
// PostgreSQL, as they are on SQLite, whose work is in this process.

// ProcTimes is the CPU time each process of a server has used so far, by
// pid.
type ProcTimes map[int]time.Duration

// Since is the CPU time the processes of now used after then. A process
// that ended in between is left out (its time is no longer anyone's to
// read: the figures keep their own connections open, so what is lost is
// other clients' work), and one that began (or took an ended one's pid)
// counts from nothing, so that the sum never runs backwards.
func (now ProcTimes) Since(then ProcTimes) time.Duration {
	var sum time.Duration
	for pid, t := range now {
		if before, ok := then[pid]; ok && before <= t {
			t -= before
		}
		sum += t
	}
	return sum
}

// parseProcStat reads the name and parent of a process from its
// /proc/<pid>/stat line, "pid (comm) state ppid …", where comm may hold
// spaces and parentheses: ppid is counted from comm's last ')'.
func parseProcStat(b []byte) (comm string, ppid int, err error) {
	open, shut := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || shut < open {
		return "", 0, errors.New("process stat: no (comm)")
	}
	rest := bytes.Fields(b[shut+1:]) // state, ppid, …
	if len(rest) < 2 {
		return "", 0, fmt.Errorf("process stat: %d fields after comm, want at least 2", len(rest))
	}
	ppid, err = strconv.Atoi(string(rest[1]))
	if err != nil || ppid < 0 {
		return "", 0, fmt.Errorf("process stat: ppid %q", rest[1])
	}
	return string(b[open+1 : shut]), ppid, nil
}

// parseSchedstat reads the time a process has run on a CPU from its
// /proc/<pid>/schedstat line, "run_ns wait_ns slices": nanoseconds, where
// /proc/<pid>/stat counts whole clock ticks, too coarse for a figure of a
// few milliseconds.
func parseSchedstat(b []byte) (time.Duration, error) {
	f := bytes.Fields(b)
	if len(f) < 1 {
		return 0, errors.New("process schedstat: empty")
	}
	ns, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil || ns < 0 {
		return 0, fmt.Errorf("process schedstat: run time %q", f[0])
	}
	return time.Duration(ns), nil
}
