package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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
			if err := os.WriteFile(cfg, []byte(tmp(strings.ReplaceAll(string(b), "127.0.0.1:8787", addr))), 0o600); err != nil {
				t.Fatal(err)
			}
			started = true
		case strings.Join(words, " ") == "go build -o "+dir+"/signoff ./cmd/signoff":
			// The binary it builds is this program.
		case words[0] == "mkdir":
			for _, p := range words[1:] {
				if p != "-p" {
					if err := os.MkdirAll(p, 0o755); err != nil {
						t.Fatal(err)
					}
				}
			}
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

// sampleLine matches one line of a sample of output as the docs write it:
// "…" stands for anything, and a comment after two spaces is the docs'.
func sampleLine(want string) *regexp.Regexp {
	if i := strings.Index(want, "  # "); i >= 0 {
		want = strings.TrimRight(want[:i], " ")
	}
	return regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(want), "…", ".*") + "$")
}

// TestTheTokenOfTheDocs: "Tokens" shows `token new` as it is typed and what
// it prints, line for line; the lines it prints are the config's.
func TestTheTokenOfTheDocs(t *testing.T) {
	t.Parallel()
	shs := blocksOf(docSection(t, "docs/agent-api.md", "Tokens"), "sh")
	if len(shs) != 1 {
		t.Fatalf("want one block, got %d", len(shs))
	}
	lines := strings.Split(strings.TrimRight(shs[0], "\n"), "\n")
	typed, ok := strings.CutPrefix(lines[0], "$ signoff ")
	if !ok {
		t.Fatalf("the block does not start with a signoff command: %q", lines[0])
	}
	code, out, errs := docRun(t, t.TempDir(), nil, "", shellWords(t, typed)...)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", lines[0], code, out, errs)
	}
	got := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(got) != len(lines)-1 {
		t.Fatalf("%s printed %d lines, the docs show %d:\n%s", lines[0], len(got), len(lines)-1, out)
	}
	for i, want := range lines[1:] {
		if !sampleLine(want).MatchString(got[i]) {
			t.Errorf("line %d: %q, the docs show %q", i+1, got[i], want)
		}
	}
}

// TestTheAgentAPIWalkthrough: the curl walkthrough of the agent API, each
// command run with curl against serve, answering with the status and the
// body (in its order, "…" standing for anything) its comment shows. Where
// the comment says a team lead approves, one does, with signoff approve,
// while the wait before it is under way.
func TestTheAgentAPIWalkthrough(t *testing.T) {
	t.Parallel()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	sec := docSection(t, "docs/agent-api.md", "A walkthrough")
	shs := blocksOf(sec, "sh")
	if len(shs) != 1 {
		t.Fatalf("want one walkthrough, got %d", len(shs))
	}
	dir := t.TempDir()
	code, out, errs := docRun(t, dir, nil, "", "token", "new", "--id", "resolver", "--requester", "agent:resolver", "--scopes", "submit,read,cancel")
	if code != 0 {
		t.Fatalf("token new: exit %d\n%s", code, errs)
	}
	token, tokenLines, _ := strings.Cut(out, "\n")
	example, err := os.ReadFile(filepath.Join(repoRoot, "fixtures", "signoff.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "signoff.yaml"), append(example, "\napi:\n  tokens:\n"+tokenLines...), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startBackground(t, dir, nil, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0").addr(t)

	// The block's lines: each command (continued lines joined), then the
	// comments after it, a sample answer continued on lines of its own.
	type step struct {
		cmd      string
		comments []string
	}
	var steps []step
	for _, line := range strings.Split(strings.ReplaceAll(strings.TrimSpace(shs[0]), "\\\n", " "), "\n") {
		if c, ok := strings.CutPrefix(line, "#"); ok {
			if len(steps) == 0 {
				t.Fatalf("a comment before any command: %q", line)
			}
			s := &steps[len(steps)-1]
			if strings.HasPrefix(c, "     ") && len(s.comments) > 0 {
				s.comments[len(s.comments)-1] += strings.TrimSpace(c)
			} else {
				s.comments = append(s.comments, strings.TrimSpace(c))
			}
			continue
		}
		steps = append(steps, step{cmd: line})
	}
	env := map[string]string{}
	id := ""
	answer := regexp.MustCompile(`^(\d{3}) (\{.*\})(?:\s+\(or "(\w+)", if .*\))?$`)
	calls := 0
	for _, s := range steps {
		cmd, _, _ := strings.Cut(s.cmd, "  # ")
		words := shellWords(t, os.Expand(cmd, func(k string) string { return env[k] }))
		if words[0] == "export" {
			for _, kv := range words[1:] {
				k, v, _ := strings.Cut(kv, "=")
				if v == "sk_…" {
					v = token
				}
				env[k] = v
			}
			continue
		}
		if words[0] != "curl" {
			t.Fatalf("a line that is not curl or export: %q", s.cmd)
		}
		for i, w := range words {
			w = strings.Replace(w, "localhost:8080", addr, 1)
			if id != "" {
				w = strings.ReplaceAll(w, "run_01a2…", id)
			}
			words[i] = w
		}
		c := exec.CommandContext(t.Context(), curl, append(words[1:], "-w", "\n%{http_code}", "--max-time", "90")...)
		c.Dir = repoRoot // the proposal is named from the repository's root
		var got []byte
		done := make(chan error, 1)
		go func() {
			var err error
			got, err = c.Output()
			done <- err
		}()
		var want []string
		for _, comment := range s.comments {
			if strings.Contains(comment, "a team lead approves") {
				// While the wait is under way, or before it began: a wait
				// with status= answers once the run has left that status.
				if code, out, errs := docRun(t, dir, nil, "", "approve", id, "--as", lead1); code != exitDone {
					t.Fatalf("approve: exit %d\n%s%s", code, out, errs)
				}
				continue
			}
			want = append(want, comment)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s: %v\n%s", s.cmd, err, got)
		}
		calls++
		i := strings.LastIndex(string(got), "\n")
		body, status := strings.TrimSpace(string(got[:i])), string(got[i+1:])
		if len(want) != 1 {
			t.Fatalf("%s: want one sample answer, got %q", s.cmd, want)
		}
		m := answer.FindStringSubmatch(want[0])
		if m == nil {
			t.Fatalf("%s: the sample answer %q is not STATUS {…}", s.cmd, want[0])
		}
		if status != m[1] {
			t.Fatalf("%s: %s %s, the docs show %s", s.cmd, status, body, m[1])
		}
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("%s: %v\n%s", s.cmd, err, body)
		}
		if id == "" {
			id, _ = v.(map[string]any)["id"].(string)
		}
		sample := strings.ReplaceAll(m[2], "run_01a2…", id)
		if problem := sampleJSON(t, sample).unlike(v); problem != "" && (m[3] == "" ||
			sampleJSON(t, strings.Replace(sample, `"status":"executing"`, `"status":"`+m[3]+`"`, 1)).unlike(v) != "") {
			t.Errorf("%s: %s\n%s\nthe docs show %s", s.cmd, problem, body, want[0])
		}
	}
	if calls != 4 {
		t.Fatalf("%d calls, want the four of the walkthrough", calls)
	}
}

// sample is a JSON answer as the docs show it: only some of its fields
// ("…" standing for the others), and "…" in a string standing for anything.
type sample struct{ v any }

// sampleJSON reads a sample answer.
func sampleJSON(t *testing.T, s string) sample {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(regexp.MustCompile(`,\s*…`).ReplaceAllString(s, "")), &v); err != nil {
		t.Fatalf("the sample answer %s: %v", s, err)
	}
	return sample{v}
}

// unlike says how got differs from the sample ("" when it does not): a
// field the sample shows that got lacks, or another value.
func (s sample) unlike(got any) string {
	switch want := s.v.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%v is not an object", got)
		}
		for k, w := range want {
			gv, ok := g[k]
			if !ok {
				return "no field " + k
			}
			if p := (sample{w}).unlike(gv); p != "" {
				return k + ": " + p
			}
		}
	case string:
		g, ok := got.(string)
		if !ok || !sampleLine(want).MatchString(g) {
			return fmt.Sprintf("%v, the docs show %q", got, want)
		}
	default:
		if fmt.Sprint(want) != fmt.Sprint(got) {
			return fmt.Sprintf("%v, the docs show %v", got, want)
		}
	}
	return ""
}

// TestTheFiveMinuteTour: the README's tour, in a folder of its own, each
// command with the exit code its comment gives, on the built-in config
// (which the first command announces); the trace shows the agent's three
// steps, the shop made one refund under RUN/1, and every seal checks.
func TestTheFiveMinuteTour(t *testing.T) {
	t.Parallel()
	shs := blocksOf(docSection(t, "README.md", "A five-minute tour"), "sh")
	if len(shs) != 1 {
		t.Fatalf("want one tour, got %d", len(shs))
	}
	dir := t.TempDir()
	w := newWalk(dir, nil, "RUN")
	for i, l := range shLines(shs[0]) {
		out, errs := w.signoff(t, l)
		switch words := shellWords(t, l.cmd); {
		case i == 0 && !strings.Contains(errs, "using the built-in demo config"):
			t.Errorf("%s does not say it uses the built-in config:\n%s", l.cmd, errs)
		case words[1] == "trace" && (!strings.Contains(out, "step 3 ") || strings.Contains(out, "step 4 ")):
			t.Errorf("%s does not show three steps:\n%s", l.cmd, out)
		case words[1] == "shop" && (strings.Count(out, "\nrefund ") != 1 || !strings.Contains(out, w.vars["RUN"]+"/1")):
			t.Errorf("%s does not show one refund under %s/1:\n%s", l.cmd, w.vars["RUN"], out)
		case words[1] == "verify" && !strings.Contains(out, "seals: checked"):
			t.Errorf("%s checked no seal:\n%s", l.cmd, out)
		}
	}
	if w.vars["FP"] == "" {
		t.Fatal("the tour approved without the fingerprint show printed")
	}
	for _, name := range []string{"signoff.db", "signoff.keys", "shop.db"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("the tour did not make %s in its folder: %v", name, err)
		}
	}
}
