package command

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// launcher is the binary started as the launcher: this one, by inode, so
// that a binary replaced on disk (an upgrade) never launches with another
// version's protocol.
const launcher = "/proc/self/exe"

// Undumpable makes this process non-dumpable, so that its /proc entries
// (environ, memory, open files) belong to root: the other processes of its
// user, a program it runs among them, cannot read the secrets it holds. It
// also means no core dump. Root's processes can still read them, unless
// Landlock confines them (see Rule).
func Undumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_DUMPABLE: %w", err)
	}
	return nil
}

// LandlockABI is the Landlock version this kernel offers; 0 without it (a
// kernel before 5.13, or with Landlock not enabled at boot).
func LandlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// The access rights of Landlock, by the ABI that brought them.
const (
	rightsABI1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	readRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// fileRights are those a rule on a file (not a folder) may have.
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// handled is every file-system right the ABI knows: all of them are denied
// but where a rule grants them.
func handled(abi int) uint64 {
	r := uint64(rightsABI1)
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

// ruleset builds the Landlock ruleset of rules; the paths are opened here,
// before any change of user.
func ruleset(abi int, rules []Rule) (int, error) {
	attr := unix.LandlockRulesetAttr{Access_fs: handled(abi)}
	if abi >= 6 {
		// No signal to a process outside the sandbox: signoff, its launcher.
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if e != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	for _, r := range rules {
		pfd, err := unix.Open(r.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, fmt.Errorf("landlock: open %s: %w", r.Path, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			unix.Close(pfd)
			return -1, fmt.Errorf("landlock: stat %s: %w", r.Path, err)
		}
		access := uint64(readRights)
		if r.Write {
			access = handled(abi)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			access &= fileRights
		}
		pb := unix.LandlockPathBeneathAttr{Allowed_access: access & handled(abi), Parent_fd: int32(pfd)}
		_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0)
		unix.Close(pfd)
		if e != 0 {
			return -1, fmt.Errorf("landlock: rule for %s: %w", r.Path, e)
		}
	}
	return int(fd), nil
}

// becomeSubreaper makes the launcher the parent of every orphan below it,
// the children of a setsid too, so that it can end them.
func becomeSubreaper() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// killGroup: on Linux children finds every process, in the group or not.
func killGroup(int) {}

// children are the processes whose parent is the launcher.
func children() []int {
	self := strconv.Itoa(os.Getpid())
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(s[i+1:]); len(f) > 1 && f[1] == self {
			out = append(out, pid)
		}
	}
	return out
}

// startProgram starts the confining stage, which execs the program, and
// returns its pid once the exec happened. The stage says on fd 3 why it could
// not; the descriptor closes on a successful exec.
func startProgram(sp spec) (int, error) {
	errR, errW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer errR.Close()
	next := sp
	next.Stage = stageConfine
	b, err := json.Marshal(next)
	if err != nil {
		errW.Close()
		return 0, err
	}
	cmd := exec.Command(launcher)
	cmd.Args = []string{sp.Argv[0]}
	cmd.Env = append(programEnv(), LaunchEnv+"="+string(b))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{errW}
	err = cmd.Start()
	errW.Close()
	if err != nil {
		return 0, err
	}
	if msg := readAll(errR, 4096); msg != "" {
		return 0, errors.New(msg)
	}
	return cmd.Process.Pid, nil
}

// confine restricts this process (Landlock, no_new_privs, another user) and
// execs the program; it returns never. The restrictions are per thread in
// the kernel: this one is locked and is the one that execs.
func confine(sp spec) {
	runtime.LockOSThread()
	syscall.CloseOnExec(3)
	errs := os.NewFile(3, "errors")
	fail := func(err error) {
		fmt.Fprint(errs, err.Error())
		os.Exit(127)
	}
	rs := -1
	if sp.ABI > 0 {
		var err error
		if rs, err = ruleset(sp.ABI, sp.Rules); err != nil {
			fail(err)
		}
	}
	if u := sp.RunAs; u != nil {
		if err := syscall.Setgroups(u.Groups); err != nil {
			fail(fmt.Errorf("run_as %s: setgroups: %w", u.Name, err))
		}
		if err := syscall.Setresgid(u.GID, u.GID, u.GID); err != nil {
			fail(fmt.Errorf("run_as %s: setgid %d: %w", u.Name, u.GID, err))
		}
		if err := syscall.Setresuid(u.UID, u.UID, u.UID); err != nil {
			fail(fmt.Errorf("run_as %s: setuid %d: %w", u.Name, u.UID, err))
		}
	}
	// No setuid binary can give the program back what it was denied.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail(fmt.Errorf("prctl PR_SET_NO_NEW_PRIVS: %w", err))
	}
	if rs >= 0 {
		if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rs), 0, 0); e != 0 {
			fail(fmt.Errorf("landlock_restrict_self: %w", e))
		}
		unix.Close(rs)
	}
	err := syscall.Exec(sp.Argv[0], sp.Argv, programEnv())
	fail(fmt.Errorf("cannot run %s: %w", sp.Argv[0], err))
}
