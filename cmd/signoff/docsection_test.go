package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docSection is the text of a section of a document of the repository (file
// relative to its root), from the heading line to the next heading of the
// same or a higher level. It fails the test if there is none.
func docSection(t *testing.T, file, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", file))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	// headingAt is the level of the heading at line i, or 0; a line in a
	// fenced block is never one.
	levels, fenced := make([]int, len(lines)), false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if lv := len(l) - len(strings.TrimLeft(l, "#")); !fenced && lv > 0 && strings.HasPrefix(l[lv:], " ") {
			levels[i] = lv
		}
	}
	for i, l := range lines {
		if levels[i] == 0 || strings.TrimSpace(l[levels[i]:]) != heading {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			if levels[j] > 0 && levels[j] <= levels[i] {
				end = j
				break
			}
		}
		return strings.Join(lines[i:end], "\n")
	}
	t.Fatalf("%s has no section %q", file, heading)
	return ""
}
