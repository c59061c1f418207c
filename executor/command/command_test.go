package command_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/executor/command"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
	"golang.org/x/sys/unix"
)

// TestMain lets the test binary be the launcher, as the signoff binary is.
func TestMain(m *testing.M) {
	command.MaybeLaunch()
	os.Exit(m.Run())
}

var rotate = record.Action{Name: "rotate_key", Args: json.RawMessage(`{"key_id":"k-1","vault":"prod"}`)}

// script writes an sh program into dir and returns its name, relative to dir.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return "./" + name
}

func TestTheProgramGetsTheBodyAndOnlyTheListedEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SIGNOFF_TEST_SECRET", "hunter2") // signoff's own: must not leak
	prog := script(t, dir, "dump", `cat > stdin.json; env > env.txt; echo '{"id":"R-9","ok":true}'`)
	x, err := command.New("rotate_key", command.Config{
		Command: []string{prog}, Dir: dir, Write: []string{dir},
		Env: command.EnvFrom([]string{"AWS_PROFILE", "UNSET_ONE"}, func(k string) string {
			return map[string]string{"AWS_PROFILE": "ops"}[k]
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := x.ExecuteCall(context.Background(), workflow.Call{Key: "run_1/1", RunID: "run_1", Action: rotate, Fingerprint: "fp", ApprovedBy: []string{"U1"}, Attempt: 2})
	if err != nil || rc.ID != "R-9" || string(rc.Detail) != `{"id":"R-9","ok":true}` {
		t.Fatalf("receipt %+v %v", rc, err)
	}
	stdin, _ := os.ReadFile(filepath.Join(dir, "stdin.json"))
	var body command.Body
	if err := json.Unmarshal(stdin, &body); err != nil {
		t.Fatal(err)
	}
	if body.IdempotencyKey != "run_1/1" || body.RunID != "run_1" || body.Action != "rotate_key" || string(body.Args) != string(rotate.Args) ||
		body.Fingerprint != "fp" || !slices.Equal(body.ApprovedBy, []string{"U1"}) || body.Attempt != 2 {
		t.Fatalf("stdin %s", stdin)
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env.txt"))
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		name, _, _ := strings.Cut(l, "=")
		names = append(names, name)
	}
	slices.Sort(names)
	// sh itself sets PWD (and may set SHLVL, OLDPWD, _); nothing else of signoff's.
	names = slices.DeleteFunc(names, func(n string) bool { return n == "PWD" || n == "SHLVL" || n == "OLDPWD" || n == "_" })
	want := []string{"AWS_PROFILE", "SIGNOFF_ACTION", "SIGNOFF_IDEMPOTENCY_KEY", "SIGNOFF_RUN_ID"}
	if !slices.Equal(names, want) || !strings.Contains(string(env), "SIGNOFF_IDEMPOTENCY_KEY=run_1/1") {
		t.Fatalf("environment %v, want %v\n%s", names, want, env)
	}
	if strings.Contains(string(env), "hunter2") {
		t.Fatal("signoff's environment leaked to the program")
	}
}

func TestExitStatusMapsToTheEngineClasses(t *testing.T) {
	tests := []struct {
		name string
		body string
		ok   bool
		want workflow.Class
		msg  string
	}{
		{name: "0 receipt", body: `echo '{"id":"R-1"}'`, ok: true},
		{name: "0 text", body: `echo rotated`, ok: true},
		{name: "65 refused", body: `echo 'key k-1 is pinned' >&2; exit 65`, want: workflow.ClassPermanent, msg: "refused (exit 65): key k-1 is pinned"},
		{name: "75 retry", body: `exit 75`, want: workflow.ClassTransient},
		{name: "1 unknown", body: `echo boom >&2; exit 1`, want: workflow.ClassUnknown, msg: "exit 1: boom"},
		{name: "signal unknown", body: `kill -TERM $$`, want: workflow.ClassUnknown, msg: "killed by terminated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			x, err := command.New("rotate_key", command.Config{Command: []string{script(t, dir, "p", tt.body)}, Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			rc, err := x.Execute(context.Background(), "run_1/1", rotate)
			if tt.ok {
				if err != nil || rc.ID == "" || !json.Valid(rc.Detail) {
					t.Fatalf("receipt %+v %v", rc, err)
				}
				return
			}
			if c := workflow.Classify(err); err == nil || c != tt.want {
				t.Fatalf("class %v (%v), want %v", c, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err %q, want %q", err, tt.msg)
			}
		})
	}
}

func TestTimeoutKillsTheWholeProcessGroup(t *testing.T) {
	dir := t.TempDir()
	// The program starts a child that would outlive it, then hangs. The
	// timeout leaves a loaded machine the time to start both.
	prog := script(t, dir, "hang", `sleep 300 & echo $! > child.pid; wait`)
	x, err := command.New("rotate_key", command.Config{Command: []string{prog}, Dir: dir, Write: []string{dir}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.Execute(context.Background(), "run_1/1", rotate)
	if workflow.Classify(err) != workflow.ClassUnknown || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err %v", err)
	}
	waitGone(t, readPid(t, filepath.Join(dir, "child.pid")))
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

// waitGone fails the test unless process pid ends: the kill is sent before
// the call returns, but a process may take a moment to die. A pidfd (which
// works for a process that is not ours) becomes readable when it has
// exited; one alive 10 s later survived.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return // gone already
	}
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 10_000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			t.Fatalf("process %d outlived the call: %s", pid, st)
		}
		return
	}
}

// TestEveryProcessAProgramStartedEndsWithTheCall: a child in the background
// of a program that succeeds, and one that left the program's session
// (setsid) of a program killed at its timeout, are gone when the call
// returns.
func TestEveryProcessAProgramStartedEndsWithTheCall(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid is not installed")
	}
	tests := []struct {
		name    string
		body    string
		timeout time.Duration
		ok      bool
	}{
		{name: "background child of a program that succeeds",
			body: `sleep 300 </dev/null >/dev/null 2>&1 & echo $! > child.pid; echo '{"id":"R-1"}'`, ok: true},
		{name: "setsid child of a program killed at its timeout",
			body:    `setsid sh -c 'echo $$ > child.pid; exec sleep 300' </dev/null >/dev/null 2>&1 & until [ -s child.pid ]; do sleep 0.01; done; exec sleep 300`,
			timeout: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			x, err := command.New("rotate_key", command.Config{Command: []string{script(t, dir, "p", tt.body)}, Dir: dir, Write: []string{dir}, Timeout: tt.timeout})
			if err != nil {
				t.Fatal(err)
			}
			_, err = x.Execute(context.Background(), "run_1/1", rotate)
			if tt.ok != (err == nil) {
				t.Fatalf("err %v", err)
			}
			if !tt.ok && !strings.Contains(err.Error(), "timed out after 1s; it and every process it started were killed") {
				t.Fatalf("err %v", err)
			}
			waitGone(t, readPid(t, filepath.Join(dir, "child.pid")))
		})
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		found   bool
		wantErr bool
	}{
		{"0 happened", `echo '{"id":"R-1"}'`, true, false},
		{"66 never happened", `exit 66`, false, false},
		{"1 cannot tell", `exit 1`, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			x, err := command.New("rotate_key", command.Config{Command: []string{"true"}, Lookup: []string{script(t, dir, "l", tt.body)}, Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			rc, found, err := x.Lookup(context.Background(), "run_1/1")
			if found != tt.found || (err != nil) != tt.wantErr || (found && rc.ID != "R-1") {
				t.Fatalf("lookup %+v %v %v", rc, found, err)
			}
		})
	}
}

func TestNewRefusesAProgramThatCannotRun(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "plain"), []byte("x"), 0o644)
	tests := []struct {
		name string
		cfg  command.Config
		want string
	}{
		{"none", command.Config{}, "command: required"},
		{"missing", command.Config{Command: []string{"./nope"}, Dir: dir}, "command: cannot run"},
		{"not executable", command.Config{Command: []string{"./plain"}, Dir: dir}, "command: cannot run"},
		{"lookup missing", command.Config{Command: []string{"true"}, Lookup: []string{"./nope"}, Dir: dir}, "lookup: cannot run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := command.New("a", tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}

func TestStderrAndStdoutAreCapped(t *testing.T) {
	dir := t.TempDir()
	x, err := command.New("rotate_key", command.Config{Command: []string{script(t, dir, "loud", `head -c 200000 /dev/zero | tr '\0' e >&2; exit 1`)}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.Execute(context.Background(), "run_1/1", rotate)
	if err == nil || len(err.Error()) > command.MaxStderr+200 || !strings.HasSuffix(err.Error(), "…") {
		t.Fatalf("error of %d bytes", len(err.Error()))
	}
}
