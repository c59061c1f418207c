//go:build unix

package command

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// LaunchEnv marks a process started as the launcher of a program: signoff
// starts itself again with this variable set to the launch's JSON spec, and
// MaybeLaunch, first thing in main, does the launch instead of signoff's work.
// Go cannot safely run code between fork and exec, so what must hold for the
// program alone (Landlock, no_new_privs, another user) is done in a process
// of its own that then execs the program.
const LaunchEnv = "SIGNOFF_LAUNCH"

// The stages of a launch.
const (
	// stageReap stays between signoff and the program: it starts the
	// program, waits for its exit status, then ends every process the
	// program started (it is their subreaper) and reports on fd 3.
	stageReap = "reap"
	// stageConfine applies the restrictions to itself and execs the program.
	stageConfine = "confine"
)

// spec is what a launcher is told.
type spec struct {
	Stage string   `json:"stage"`
	Argv  []string `json:"argv"`
	// Rules are what the program may reach; applied only when ABI > 0.
	Rules []Rule `json:"rules,omitempty"`
	ABI   int    `json:"abi,omitempty"`
	RunAs *User  `json:"run_as,omitempty"`
}

// launchStatus is the launcher's report on how the program ended: exactly
// one of Exit, Signal and Start is meaningful.
type launchStatus struct {
	Exit   int    `json:"exit"`
	Signal string `json:"signal,omitempty"`
	// Start says why the program never started (nothing can have happened).
	Start string `json:"start,omitempty"`
	// Killed: the program was killed because signoff asked (the timeout).
	Killed bool `json:"killed,omitempty"`
}

// MaybeLaunch does the launch when this process was started as a launcher
// (LaunchEnv is set) and then exits; otherwise it returns at once. Call it
// first in main, and in TestMain of any test binary whose tests run command
// executors (the test binary is the launcher there).
func MaybeLaunch() {
	raw, ok := os.LookupEnv(LaunchEnv)
	if !ok {
		return
	}
	var sp spec
	if err := json.Unmarshal([]byte(raw), &sp); err != nil || len(sp.Argv) == 0 {
		fmt.Fprintf(os.Stderr, "signoff: launcher: bad %s: %v\n", LaunchEnv, err)
		os.Exit(127)
	}
	switch sp.Stage {
	case stageReap:
		os.Exit(reap(sp))
	case stageConfine:
		confine(sp) // execs or exits
	}
	fmt.Fprintf(os.Stderr, "signoff: launcher: unknown stage %q\n", sp.Stage)
	os.Exit(127)
}

// programEnv is the launcher's environment without LaunchEnv: what the
// program gets.
func programEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, LaunchEnv+"=") })
}

// reaped is one child the launcher reaped.
type reaped struct {
	pid int
	ws  unix.WaitStatus
}

// reap runs the program, reports how it ended on fd 3, and returns only once
// no process it started is left.
func reap(sp spec) int {
	syscall.CloseOnExec(3) // for signoff alone, not for the program
	out := os.NewFile(3, "status")
	report := func(st launchStatus) int {
		b, _ := json.Marshal(st)
		if out != nil {
			_, _ = out.Write(append(b, '\n'))
		}
		return 0
	}
	// signoff asks for the end (the call's timeout) with SIGTERM.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	becomeSubreaper()
	pid, err := startProgram(sp)
	if err != nil {
		endAll(0, waitAll())
		return report(launchStatus{Exit: -1, Start: err.Error()})
	}
	all := waitAll()
	var st launchStatus
	for done := false; !done; {
		select {
		case r, ok := <-all:
			if !ok {
				return report(launchStatus{Exit: -1, Signal: "lost"})
			}
			if r.pid != pid {
				continue // an orphan of the program, reaped
			}
			done = true
			switch {
			case r.ws.Exited():
				st.Exit = r.ws.ExitStatus()
			case r.ws.Signaled():
				st.Exit, st.Signal = -1, r.ws.Signal().String()
			}
		case <-term:
			st.Killed = true
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
	endAll(pid, all)
	return report(st)
}

// waitAll reaps every child of the launcher, the program and the orphans
// handed to it, until it has none; the channel is closed then.
func waitAll() <-chan reaped {
	ch := make(chan reaped, 64)
	go func() {
		defer close(ch)
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, 0, nil)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return // ECHILD: none left
			}
			ch <- reaped{pid, ws}
		}
	}()
	return ch
}

// endAll kills every process still below the launcher, again as orphans are
// handed to it, until none is left and all are reaped.
func endAll(pid int, all <-chan reaped) {
	killGroup(pid)
	for {
		for _, pid := range children() {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		if _, ok := <-all; !ok {
			return
		}
	}
}

// readAll reads r to its end, keeping at most max bytes.
func readAll(r io.Reader, max int64) string {
	b, _ := io.ReadAll(io.LimitReader(r, max))
	return string(b)
}
