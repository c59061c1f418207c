package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTheReferenceTargetWalkthrough: "Try the reference target" works as
// written, from a copy of the repository's examples/: the target server
// started as its line says (on a free port, which the example config is
// changed to name), each signoff command with the exit code its comment
// gives, and each ledger holding the one entry its comment says.
func TestTheReferenceTargetWalkthrough(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed (the reference program needs it)")
	}
	shs := blocksOf(docSection(t, "docs/getting-started.md", "Try the reference target"), "sh")
	if len(shs) != 1 {
		t.Fatalf("want one walkthrough, got %d", len(shs))
	}
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(filepath.Join(repoRoot, "examples"))); err != nil {
		t.Fatal(err)
	}
	// Its files live under /tmp; here, under the test's folder.
	tmp := func(s string) string { return strings.ReplaceAll(s, "/tmp/", dir+"/") }
	w := newWalk(dir, nil, "RUN", "RUN2")
	started := false
	for _, l := range shLines(shs[0]) {
		cmd := tmp(l.cmd)
		switch words := shellWords(t, strings.TrimSuffix(cmd, "&")); {
		case words[0] == "export":
			w.env = append(w.env, words[1:]...)
		case strings.HasSuffix(cmd, "&"):
			addr := startGoRun(t, dir, w.env, words)
			cfg := filepath.Join(dir, "examples", "signoff.yaml")
			b, err := os.ReadFile(cfg)
			if err != nil || !strings.Contains(string(b), "http://127.0.0.1:8787/") {
				t.Fatalf("the example config does not name the target's default address: %v\n%s", err, b)
			}
			if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(string(b), "127.0.0.1:8787", addr)), 0o600); err != nil {
				t.Fatal(err)
			}
			started = true
		case strings.Join(words, " ") == "go build -o "+dir+"/signoff ./cmd/signoff":
			// The binary it builds is this program.
		case words[0] == "alias":
			w.alias(t, cmd)
		case words[0] == "cat":
			b, err := os.ReadFile(words[1])
			if err != nil {
				t.Fatalf("%s: %v", l.cmd, err)
			}
			// Each ledger holds one entry, under the key of the run that
			// wrote to it: the deploy (RUN) or the key rotation (RUN2).
			run := w.vars["RUN"]
			if strings.HasSuffix(words[1], "/keys.jsonl") {
				run = w.vars["RUN2"]
			}
			if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], run+"/1") {
				t.Errorf("%s: want one entry under %s/1, got\n%s", l.cmd, run, b)
			}
		case w.isSignoff(t, cmd):
			out, _ := w.signoff(t, shLine{cmd: cmd, comment: l.comment, exit: l.exit})
			if strings.Contains(l.comment, "prints the receipt") && !strings.Contains(out, "receipt") {
				t.Errorf("%s does not print the receipt:\n%s", l.cmd, out)
			}
			if strings.Contains(l.comment, "both actions") && (!strings.Contains(out, "deploy_service") || !strings.Contains(out, "rotate_key")) {
				t.Errorf("%s does not list both actions:\n%s", l.cmd, out)
			}
		default:
			t.Fatalf("a walkthrough line this test does not know: %q", l.cmd)
		}
	}
	if !started || w.vars["RUN2"] == "" {
		t.Fatalf("the walkthrough started no target (%v) or did not submit twice (%v)", started, w.vars)
	}
}

// startGoRun starts `[NAME=value…] go run ./PKG ARGS…` of a walkthrough in
// the background: the package is built from this checkout into dir and run
// there with its ARGS and -addr 127.0.0.1:0, since tests run side by side;
// $NAME in a value is taken from env. It returns the address the program
// says it listens on, and stops it when the test ends.
func startGoRun(t *testing.T, dir string, env, words []string) string {
	t.Helper()
	var extra []string
	for strings.Contains(words[0], "=") {
		name, value, _ := strings.Cut(words[0], "=")
		value = os.Expand(value, func(k string) string {
			for _, kv := range env {
				if v, ok := strings.CutPrefix(kv, k+"="); ok {
					return v
				}
			}
			t.Fatalf("%s names $%s, which the walkthrough did not set", words[0], k)
			return ""
		})
		extra, words = append(extra, name+"="+value), words[1:]
	}
	if len(words) < 3 || words[0] != "go" || words[1] != "run" {
		t.Fatalf("not a go run: %q", words)
	}
	bin := filepath.Join(dir, "bin", filepath.Base(words[2]))
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, words[2])
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", words[2], err, out)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cmd := exec.CommandContext(ctx, bin, append(words[3:], "-addr", "127.0.0.1:0")...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), extra...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	listening := regexp.MustCompile(`listening on http://(\S+)`)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-addr:
		return a
	case <-time.After(time.Minute):
		t.Fatalf("%s did not say where it listens", words[2])
		return ""
	}
}
