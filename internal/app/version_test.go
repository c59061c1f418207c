package app

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		version  string
		settings map[string]string
		stamped  string
		want     string
	}{
		{"a release", "v1.4.0", map[string]string{"vcs.revision": "0d399d6e1f2a", "vcs.time": "2026-11-30T18:00:00Z", "vcs.modified": "false"}, "",
			"signoff v1.4.0 (revision 0d399d6e1f2a, 2026-11-30T18:00:00Z)"},
		{"a local build with changes", "(devel)", map[string]string{"vcs.revision": "0d399d6e1f2a", "vcs.modified": "true"}, "",
			"signoff (devel) (revision 0d399d6e1f2a, with uncommitted changes)"},
		{"no VCS information, a stamped revision", "", nil, "0d399d6e1f2a", "signoff (devel) (revision 0d399d6e1f2a)"},
		{"VCS information and a stamped revision", "(devel)", map[string]string{"vcs.revision": "0d399d6e1f2a", "vcs.time": "2026-11-30T18:00:00Z"}, "5b1c07aa9e3f",
			"signoff (devel) (revision 0d399d6e1f2a, 2026-11-30T18:00:00Z)"},
		{"neither", "", nil, "", "signoff (devel) (no VCS information in this build)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/signoff-dev/signoff", Version: tt.version}}
			for k, v := range tt.settings {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: k, Value: v})
			}
			if got := versionOf(bi, tt.stamped); got != tt.want {
				t.Errorf("versionOf = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestVersionFlag: --version prints one line about this build and exits 0,
// touching no store; a build that knows no revision says so.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := must(t, dir, 0, "--version")
	if !strings.HasPrefix(out, "signoff ") || strings.Count(out, "\n") != 1 {
		t.Errorf("--version printed %q", out)
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Errorf("--version made files: %v", files)
	}
	// The test binary is neither stamped nor given VCS information.
	if !strings.HasSuffix(out, " (no VCS information in this build)\n") {
		t.Errorf("--version printed %q, want it to say the build has no VCS information", out)
	}
}

// dockerfileRevisionFlag is the -X flag with which the Dockerfile stamps the
// revision, as name=${REVISION}; the build arg must be declared in the build
// stage before the go build that uses it.
func dockerfileRevisionFlag(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	docker := string(b)
	build := regexp.MustCompile(`(?s)FROM \S+ AS build\n(.*?)\nFROM `).FindStringSubmatch(docker)
	if build == nil {
		t.Fatal("the Dockerfile has no build stage")
	}
	arg := regexp.MustCompile(`(?m)^ARG REVISION$`).FindStringIndex(build[1])
	goBuild := strings.Index(build[1], "go build")
	if arg == nil || goBuild < 0 || arg[0] > goBuild {
		t.Fatal("the Dockerfile's build stage does not declare ARG REVISION before go build")
	}
	x := regexp.MustCompile(`-X (\S+=)\$\{REVISION\}`).FindStringSubmatch(build[1][goBuild:])
	if x == nil {
		t.Fatal(`the Dockerfile's go build does not pass -ldflags "-X …=${REVISION}"`)
	}
	return x[1]
}

// TestVersionStampedAtBuild: a binary built as the Dockerfile builds it, with
// a revision and no VCS information (its context has no .git), prints that
// revision.
func TestVersionStampedAtBuild(t *testing.T) {
	t.Parallel()
	flag := dockerfileRevisionFlag(t)
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build with")
	}
	const rev = "0d399d6e1f2a4c5b6a7d8e9f0a1b2c3d4e5f6a7b"
	bin := filepath.Join(t.TempDir(), "signoff")
	build := exec.Command(gobin, "build", "-buildvcs=false", "-ldflags", "-X "+flag+rev, "-o", bin, filepath.Join(repoRoot, "cmd", "signoff"))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := exec.Command(bin, "--version")
	out, err := run.Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	if want := "signoff (devel) (revision " + rev + ")\n"; string(out) != want {
		t.Errorf("--version printed %q, want %q", out, want)
	}
}
