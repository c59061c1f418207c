package main

import (
	"os"
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
		want     string
	}{
		{"a release", "v1.4.0", map[string]string{"vcs.revision": "0d399d6e1f2a", "vcs.time": "2026-11-30T18:00:00Z", "vcs.modified": "false"},
			"signoff v1.4.0 (revision 0d399d6e1f2a, 2026-11-30T18:00:00Z)"},
		{"a local build with changes", "(devel)", map[string]string{"vcs.revision": "0d399d6e1f2a", "vcs.modified": "true"},
			"signoff (devel) (revision 0d399d6e1f2a, with uncommitted changes)"},
		{"no VCS information", "", nil, "signoff (devel)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/signoff-dev/signoff", Version: tt.version}}
			for k, v := range tt.settings {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: k, Value: v})
			}
			if got := versionOf(bi); got != tt.want {
				t.Errorf("versionOf = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestVersionFlag: --version prints one line about this build and exits 0,
// touching no store.
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
	if bi, ok := debug.ReadBuildInfo(); ok && !strings.Contains(out, versionOf(bi)) {
		t.Errorf("--version printed %q, want %q", out, versionOf(bi))
	}
}
