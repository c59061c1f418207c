//go:build unix && !linux

package command

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// launcher is this binary; without /proc/self/exe, as the OS names it.
var launcher, _ = os.Executable()

// Undumpable does nothing here: only Linux has PR_SET_DUMPABLE.
func Undumpable() error { return nil }

// LandlockABI is 0: Landlock is Linux's.
func LandlockABI() int { return 0 }

// becomeSubreaper cannot: without a subreaper, a process that left the
// program's group escapes.
func becomeSubreaper() {}

// killGroup ends the program's process group.
func killGroup(pid int) {
	if pid > 0 {
		_ = unix.Kill(-pid, unix.SIGKILL)
	}
}

// children: none can be found here but the reaped ones.
func children() []int { return nil }

// startProgram starts the program in a process group of its own.
func startProgram(sp spec) (int, error) {
	if sp.RunAs != nil {
		return 0, errors.New("run_as needs Linux")
	}
	cmd := exec.Command(sp.Argv[0], sp.Argv[1:]...)
	cmd.Env = programEnv()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}

// confine is never asked for here.
func confine(spec) {}
