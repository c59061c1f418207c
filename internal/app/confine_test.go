package app

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/signoff-dev/signoff/executor/command"
	"golang.org/x/sys/unix"
)

// probeProgram reads what a hostile program would, and says in $OUT/report
// what it could: the keys beside the store, the store, and the environment
// of signoff (its launcher's parent). It then hands signoff's pid to the
// test through the FIFO $OUT/ready and waits on $OUT/go, so that the test
// tries too while signoff runs.
const probeProgram = `#!/bin/sh
try() { if cat "$2" >/dev/null 2>&1; then echo "$1 read"; else echo "$1 refused"; fi; }
signoff=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$PPID/status)
{
  try keys "$STORE_DIR/signoff.keys"
  try store "$STORE_DIR/signoff.db"
  try environ "/proc/$signoff/environ"
} > "$OUT/report"
echo "$signoff" > "$OUT/ready"
read answer < "$OUT/go"
echo '{"id":"probed"}'
`

// probeConfig is pathsConfig with the paths the probe is given.
var probeConfig = strings.Replace(pathsConfig, "PATHS", "{read: [/proc], write: [out]}", 1)

// TestAProgramCannotReadSignoffsSecrets: a program a command executor runs,
// as signoff's own user, can read neither the keys file beside the store,
// nor the store, nor signoff's environment (where its secrets are) in
// /proc, which the config lets it read; nor can any other process of that
// user, unconfined, while signoff runs. Signoff runs as a separate process
// of this binary; as root, everything runs as nobody, since root may read
// any process's environment.
func TestAProgramCannotReadSignoffsSecrets(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ready", "go"} {
		if err := unix.Mkfifo(filepath.Join(out, f), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// nobody must reach the folder and run a copy of this binary.
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
		for _, p := range []string{filepath.Dir(dir), dir, out, filepath.Join(out, "ready"), filepath.Join(out, "go")} {
			if err := os.Chmod(p, 0o777); err != nil {
				t.Fatal(err)
			}
		}
		cp := filepath.Join(dir, "signoff")
		copyFile(t, self, cp, 0o755)
		self = cp
	}
	if err := os.WriteFile(filepath.Join(dir, "probe"), []byte(probeProgram), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(cfg, []byte(probeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "--config", cfg, "--db", filepath.Join(dir, "signoff.db"), "--shop", filepath.Join(dir, "shop.db"), "submit", "-")
	cmd.Dir = dir
	cmd.Env = []string{asMainEnv + "=1", "OUT=" + out, "STORE_DIR=" + dir, "SLACK_BOT_TOKEN=xoxb-not-for-programs"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Stdin = strings.NewReader(`{"requester": {"id": "agent:ops"}, "summary": "probe", "actions": [{"name": "rotate_key", "args": {}}]}`)
	var said bytes.Buffer
	cmd.Stdout, cmd.Stderr = &said, &said
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// The FIFOs: opening one blocks until the program opens its other end.
	ready := make(chan []byte, 1)
	go func() { b, _ := os.ReadFile(filepath.Join(out, "ready")); ready <- b }()
	var pid []byte
	select {
	case pid = <-ready:
	case err := <-exited:
		if f, err := os.OpenFile(filepath.Join(out, "ready"), os.O_WRONLY, 0); err == nil {
			f.Close() // lets the read above end
		}
		t.Fatalf("submit ended before the program was ready: %v\n%s", err, said.String())
	}
	reader := exec.Command("cat", "/proc/"+strings.TrimSpace(string(pid))+"/environ")
	reader.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	environ, readErr := reader.CombinedOutput()
	if err := os.WriteFile(filepath.Join(out, "go"), []byte("go\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("submit: %v\n%s", err, said.String())
	}
	if readErr == nil || strings.Contains(string(environ), "xoxb-not-for-programs") {
		t.Errorf("another process of signoff's user read its environment (%v):\n%s", readErr, environ)
	}
	b, err := os.ReadFile(filepath.Join(out, "report"))
	if err != nil {
		t.Fatalf("the program did not run: %v\n%s", err, said.String())
	}
	got := string(b)
	if !strings.Contains(got, "environ refused") {
		t.Errorf("the program read signoff's environment:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "signoff.keys")); err != nil {
		t.Fatalf("no keys beside the store: %v\n%s", err, said.String())
	}
	if command.LandlockABI() == 0 {
		t.Skipf("this kernel has no Landlock, so a program can read whatever signoff's user can, the store and the keys too (config check warns); signoff's environment was refused:\n%s", got)
	}
	if !strings.Contains(got, "keys refused") || !strings.Contains(got, "store refused") {
		t.Errorf("the program read the store or the keys:\n%s", got)
	}
}
