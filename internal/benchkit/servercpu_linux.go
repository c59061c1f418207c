//go:build linux

package benchkit

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// ServerCPU returns a meter of the CPU time each process of the PostgreSQL
// server that runs backend (a connection's pg_backend_pid) has used so far:
// its postmaster's and every child's of it (backends, the WAL writer, the
// checkpointer, autovacuum), each single-threaded. ok is false when that server is not a
// process tree here (a remote server, or one in another PID namespace: the
// pid names no postgres process of this machine) or the kernel keeps no
// schedstat.
func ServerCPU(backend int) (meter func() (ProcTimes, error), ok bool) {
	comm, root, err := readProcStat(backend)
	if err != nil || comm != "postgres" {
		return nil, false
	}
	if comm, _, err := readProcStat(root); err != nil || comm != "postgres" {
		return nil, false
	}
	if _, err := readSchedstat(root); err != nil {
		return nil, false
	}
	return func() (ProcTimes, error) { return treeCPU(root) }, true
}

// treeCPU is the CPU time of root and of each of its children so far.
func treeCPU(root int) (ProcTimes, error) {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("server cpu: %w", err)
	}
	times := ProcTimes{}
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		if pid != root {
			if _, ppid, err := readProcStat(pid); err != nil || ppid != root {
				continue // another's, or it ended since the directory was read
			}
		}
		if d, err := readSchedstat(pid); err == nil {
			times[pid] = d
		}
	}
	return times, nil
}

func readProcStat(pid int) (comm string, ppid int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, err
	}
	return parseProcStat(b)
}

func readSchedstat(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0, err
	}
	return parseSchedstat(b)
}
