package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// TestTheSlowDeployWalkthrough runs docs/slow-deploys.md as written: its
// config and proposals in a folder of their own, and its walkthrough under
// bash, each command with the exit code its comment gives (0 where it names
// none). Only what would make the test slow or collide is changed: the
// deploy takes 4 s instead of 2 minutes, and the ports are free ones.
func TestTheSlowDeployWalkthrough(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (the walkthrough uses it)", tool)
		}
	}
	config := docSection(t, "docs/slow-deploys.md", "The config")
	walk := docSection(t, "docs/slow-deploys.md", "The walkthrough")
	blocks := func(sec, lang string) []string {
		var out []string
		for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(sec, -1) {
			out = append(out, m[1])
		}
		return out
	}
	yaml, proposals, script := blocks(config, "yaml"), blocks(config, "json"), blocks(walk, "sh")
	if len(yaml) != 1 || len(proposals) != 2 || len(script) != 1 {
		t.Fatalf("want one config, two proposals and one walkthrough; got %d, %d, %d", len(yaml), len(proposals), len(script))
	}
	dir := t.TempDir()
	target, api := freePort(t), freePort(t)
	ports := strings.NewReplacer("127.0.0.1:8787", target, "127.0.0.1:8080", api)
	files := map[string]string{"signoff.yaml": ports.Replace(yaml[0]), "deploy.json": proposals[0], "hotfix.json": proposals[1]}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	installTools(t, dir)

	sh := ports.Replace(strings.Replace(script[0], "-work 2m", "-work 4s", 1))
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", checkedScript(t, sh))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\n%s\nserve.log:\n%s\ntarget.log:\n%s", err, out, readOr(dir, "serve.log"), readOr(dir, "target.log"))
	}

	t.Logf("the walkthrough said:\n%s", out)
	ledger := strings.Count(readOr(dir, "ledger.jsonl"), "\n")
	if ledger != 2 {
		t.Errorf("the target's ledger has %d deploys, want one for each run\n%s", ledger, out)
	}
	for _, want := range []string{"asking the target again at", "resolved by U0MGR00001"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the walkthrough's output lacks %q:\n%s", want, out)
		}
	}
	runs := regexp.MustCompile(`run_[0-9a-f]+`).FindAllString(string(out), -1)
	if len(runs) == 0 {
		t.Fatalf("no run id in the output:\n%s", out)
	}
	var v workflow.RunView
	for _, id := range runs {
		v = showJSON(t, dir, id)
		if v.Status != record.StatusDone {
			t.Errorf("run %s is %s (%s), want done", id, v.Status, v.Reason)
		}
	}
}

// checkedScript turns a walkthrough into a script that stops at the first
// command whose exit code is not the one its comment gives (0 where it names
// none), and ends what it left running in the background.
func checkedScript(t *testing.T, sh string) string {
	t.Helper()
	exitComment := regexp.MustCompile(`#\s*exit (\d+)`)
	var b strings.Builder
	b.WriteString("trap 'kill $(jobs -p) 2>/dev/null' EXIT\n")
	for _, line := range strings.Split(strings.TrimSpace(sh), "\n") {
		cmdline := line
		if i := strings.Index(line, " #"); i >= 0 {
			cmdline = line[:i]
		}
		cmdline = strings.TrimSpace(cmdline)
		if strings.HasSuffix(cmdline, "&") {
			b.WriteString(cmdline + "\n")
			continue
		}
		want := "0"
		if m := exitComment.FindStringSubmatch(line); m != nil {
			want = m[1]
		}
		fmt.Fprintf(&b, "%s\nrc=$?; if [ $rc -ne %s ]; then echo %q \"exited $rc, want %s\" >&2; exit 99; fi\n", cmdline, want, line, want)
	}
	return b.String()
}

// installTools puts signoff (this test binary, run as the program) and the
// reference target, built now, in dir/bin, where the walkthrough finds them.
func installTools(t *testing.T, dir string) {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", asMainEnv, self)
	if err := os.WriteFile(filepath.Join(bin, "signoff"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	gobin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	build := exec.Command(gobin, "build", "-o", filepath.Join(bin, "target-server"), "../../examples/target/cmd/target-server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the reference target: %v\n%s", err, out)
	}
}

// freePort is a loopback address nothing listens on just now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func readOr(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return string(b)
}
