// Package texttest holds what the tests of every renderer share about hostile
// text: the corpus an attacker would write (fixtures/hostile/strings.json) and
// an independent check that shown text carries none of it live. The check
// lists the forbidden characters itself rather than asking the code it tests.
package texttest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unicode/utf8"
)

// Corpus returns the hostile strings of fixtures/hostile/strings.json, each
// made unique with a marker ("HOSTILE0:", "HOSTILE1:", …) so that a test can
// tell where each one ended up.
func Corpus(t testing.TB) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "fixtures", "hostile", "strings.json"))
	if err != nil {
		t.Fatalf("read the hostile corpus: %v", err)
	}
	var c struct {
		Strings []string `json:"strings"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || len(c.Strings) == 0 {
		t.Fatalf("parse the hostile corpus: %v", err)
	}
	out := make([]string, len(c.Strings))
	for i, s := range c.Strings {
		out[i] = fmt.Sprintf("%s%d:%s", Marker, i, s)
	}
	return out
}

// Marker starts every corpus string.
const Marker = "HOSTILE"

// Live returns a description of the first character of s that would act
// rather than show on a terminal or in Slack, or "". Line feeds and tabs are
// allowed when structural is true: a renderer's own layout uses them.
func Live(s string, structural bool) string {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return fmt.Sprintf("invalid UTF-8 at byte %d", i)
			}
		}
		if structural && (r == '\n' || r == '\t') {
			continue
		}
		if forbidden(r) {
			return fmt.Sprintf("%U at byte %d in %q", r, i, around(s, i))
		}
	}
	return ""
}

func forbidden(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f: // C0, DEL, C1
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069: // bidi
		return true
	case r >= 0x200b && r <= 0x200d, r == 0x2060, r == 0xfeff, r == 0x00ad: // zero width, soft hyphen
		return true
	case r == 0x2028, r == 0x2029: // line and paragraph separators
		return true
	case r == 0x3164, r == 0x115f, r == 0x1160, r == 0xffa0: // fillers
		return true
	case r >= 0xe0000 && r <= 0xe007f: // tags
		return true
	}
	return false
}

func around(s string, i int) string {
	from, to := max(0, i-20), min(len(s), i+20)
	return s[from:to]
}
