package app

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/storage/sqlite"
)

// readCommands are the commands that only read, with the exit code each gives
// on the store readOnlyStore makes.
func readCommands(id string) [][]string {
	return [][]string{{"show", id}, {"runs"}, {"history", id}, {"verify"}, {"trace", id}, {"shop", "changes"}}
}

// readOnlyStore makes a store with one run waiting for approval and one done.
func readOnlyStore(t *testing.T) (dir, waiting string) {
	dir = t.TempDir()
	waiting = submitWaiting(t, dir)
	must(t, dir, exitDone, "submit", proposal(t, dir, "p.json", refundJSON(agentID, "5.00", "")))
	return dir, waiting
}

// TestReadCommandsWhileAnotherProcessWrites: with a write transaction open on
// the store and on the shop, show, runs, history, verify, trace and shop
// changes, each a separate process, answer at once from the last committed
// state instead of waiting for the lock and failing.
func TestReadCommandsWhileAnotherProcessWrites(t *testing.T) {
	t.Parallel()
	dir, id := readOnlyStore(t)
	for _, path := range []string{dbPath(dir), shopPath(dir)} {
		db, err := sqlite.OpenDB(path)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		tx, err := conn.BeginTx(t.Context(), nil) // BEGIN IMMEDIATE: the write lock
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(`CREATE TABLE held_by_test (x)`); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(); conn.Close(); db.Close() })
	}
	for _, args := range readCommands(id) {
		cmd, out, errb := child(t, dir, nil, args...)
		start := time.Now()
		err := cmd.Run()
		code := exitCode(err)
		if (code != exitDone && code != exitWaiting) || time.Since(start) > 5*time.Second {
			t.Errorf("signoff %s while another process writes: exit %d after %s\nstdout:\n%s\nstderr:\n%s",
				strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond), out, errb)
		}
	}
}

// TestReadCommandsOnAReadOnlyStore: on store and shop files the user may not
// write, in a folder the user may not write, the read commands work and the
// files are unchanged. (As root, which may write anything, the commands run
// as nobody.)
func TestReadCommandsOnAReadOnlyStore(t *testing.T) {
	t.Parallel()
	dir, id := readOnlyStore(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "signoff")
	copyFile(t, self, bin, 0o755)
	before := digestFiles(t, dir)
	for _, p := range []string{dbPath(dir), shopPath(dir)} {
		if err := os.Chmod(p, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	// The folder is read-only too; its parent (t.TempDir's, 0700) lets others in.
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	for _, args := range readCommands(id) {
		ctx, cancel := context.WithTimeout(t.Context(), childTimeout)
		cmd := exec.CommandContext(ctx, bin, append([]string{"--db", dbPath(dir), "--shop", shopPath(dir)}, args...)...)
		cmd.Env = append(os.Environ(), asMainEnv+"=1", "HOME="+dir)
		if os.Getuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		out, err := cmd.CombinedOutput()
		cancel()
		if code := exitCode(err); code != exitDone && code != exitWaiting {
			t.Errorf("signoff %s on a read-only store: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	// Nothing was created or changed beside the files.
	if after := digestFiles(t, dir); after != before {
		t.Errorf("the read commands changed the folder:\nbefore %s\nafter  %s", before, after)
	}
	// A command that writes says why it cannot.
	if os.Getuid() == 0 {
		return
	}
	if code, _, _ := signoff(t, dir, "expire"); code == exitDone {
		t.Error("expire wrote to a read-only store")
	}
}

// TestReadCommandsRefuseAMissingOrUnmigratedStore: reading creates nothing
// and says what to do.
func TestReadCommandsRefuseAMissingOrUnmigratedStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, out, errs := signoff(t, dir, "runs")
	if code != exitDone || out != "no runs\n" || !strings.Contains(errs, "no store at") {
		t.Errorf("runs on no store: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, _, errs = signoff(t, dir, "show", "run_01a22dc37ed0000354ea24f7")
	if code != exitRefused || !strings.Contains(errs, "no store file") {
		t.Errorf("show on no store: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(dbPath(dir)); !os.IsNotExist(err) {
		t.Errorf("runs created the store: %v", err)
	}
	db, err := sqlite.OpenDB(dbPath(dir)) // an empty SQLite file: not a migrated store
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, _, errs = signoff(t, dir, "verify")
	if code != exitRefused || !strings.Contains(errs, "not applied; run `signoff migrate`") {
		t.Errorf("verify on an unmigrated store: exit %d, stderr %q", code, errs)
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// digestFiles names every file of dir with its size and content digest.
func digestFiles(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%d:%x ", e.Name(), len(raw), sha256.Sum256(raw))
	}
	return b.String()
}
