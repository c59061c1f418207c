package app

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTheSecurityModelNamesRealTests: every test the security model's table
// of attackers names exists in the package it names, so that the table's
// "shown by" is a list of tests that run, not of names.
func TestTheSecurityModelNamesRealTests(t *testing.T) {
	sec := docSection(t, "docs/security.md", "Who can attack, and what holds")
	rows := 0
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.Contains(cells[3], "`") {
			continue
		}
		rows++
		// "`pkg`: TestA, TestB; `pkg2`: TestC"
		for _, part := range strings.Split(cells[3], ";") {
			pkg, names, ok := strings.Cut(part, ":")
			if !ok {
				t.Errorf("a cell that names no package: %q", part)
				continue
			}
			pkg = strings.Trim(strings.TrimSpace(pkg), "`")
			src := testSources(t, filepath.Join(repoRoot, pkg))
			for _, name := range strings.Split(names, ",") {
				name = strings.TrimSpace(name)
				if !regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(name) + `\(`).MatchString(src) {
					t.Errorf("the security model names %s in %s, which has no such test", name, pkg)
				}
			}
		}
	}
	if rows < 8 {
		t.Fatalf("the table of attackers has %d rows, want one for each of the eight", rows)
	}
}

// testSources is every _test.go file of a package folder, joined.
func testSources(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files in %s (%v)", dir, err)
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}
