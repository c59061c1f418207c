package app

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestShellLineRoundTrips: what shellLine prints, a shell reads back as the
// same words.
func TestShellLineRoundTrips(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this machine")
	}
	tests := []struct {
		name  string
		words []string
		want  string // the line printed
	}{
		{"plain words stay plain", []string{"reject", "run_01a2", "--as", "U0LEAD0001"}, "reject run_01a2 --as U0LEAD0001"},
		{"a reason with a semicolon and spaces", []string{"--reason", "photo shows the box only; ask for a picture"}, "--reason 'photo shows the box only; ask for a picture'"},
		{"a single quote", []string{"it's"}, `'it'\''s'`},
		{"an empty word", []string{"--reason", ""}, "--reason ''"},
		{"shell syntax", []string{"$HOME", "`id`", "a|b", "<x>", "*", "~", "!", "#c", "a\nb", `back\slash`, `"q"`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := shellLine(tt.words...)
			if tt.want != "" && line != tt.want {
				t.Errorf("shellLine = %s, want %s", line, tt.want)
			}
			out, err := exec.Command(sh, "-c", "set -- "+line+`; for w in "$@"; do printf '%s\0' "$w"; done`).Output()
			if err != nil {
				t.Fatalf("sh -c %s: %v", line, err)
			}
			got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
			if !slices.Equal(got, tt.words) {
				t.Errorf("the shell reads %q as %q, want %q", line, got, tt.words)
			}
		})
	}
}
