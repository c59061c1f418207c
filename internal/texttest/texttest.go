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

// corpus is fixtures/hostile/strings.json.
type corpus struct {
	Strings       []string          `json:"strings"`
	Values        []json.RawMessage `json:"values"`
	LookalikeKeys [][]string        `json:"lookalike_keys"`
	Changed       []json.RawMessage `json:"numbers_changed"`
}

func read(t testing.TB) corpus {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "fixtures", "hostile", "strings.json"))
	if err != nil {
		t.Fatalf("read the hostile corpus: %v", err)
	}
	var c corpus
	if err := json.Unmarshal(raw, &c); err != nil || len(c.Strings) == 0 || len(c.Values) == 0 || len(c.LookalikeKeys) == 0 || len(c.Changed) == 0 {
		t.Fatalf("parse the hostile corpus: %v", err)
	}
	return c
}

// Values returns every distinct value of the corpus as JSON: each hostile
// string as it is (without a marker), each look-alike key as a string, and
// the values of every other type, numbers as written. No two are the same
// text, so a renderer must show no two alike.
func Values(t testing.TB) []json.RawMessage {
	t.Helper()
	c := read(t)
	var out []json.RawMessage
	seen := map[string]bool{}
	add := func(v json.RawMessage) {
		if !seen[string(v)] {
			seen[string(v)] = true
			out = append(out, v)
		}
	}
	strs := c.Strings
	for _, g := range c.LookalikeKeys {
		strs = append(strs, g...)
	}
	for _, s := range strs {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		add(b)
	}
	for _, v := range c.Values {
		add(v)
	}
	return out
}

// LookalikeKeys returns groups of keys that read the same (a variation
// selector, a trailing or no-break space, a Cyrillic letter, another case,
// NFD against NFC…): any two of one group in one object are refused.
func LookalikeKeys(t testing.TB) [][]string { return read(t).LookalikeKeys }

// ChangedNumbers returns numbers, as written, that a 64-bit float does not
// hold exactly (past 2^53, out of range, more digits than it keeps).
func ChangedNumbers(t testing.TB) []json.RawMessage { return read(t).Changed }

// Corpus returns the hostile strings of fixtures/hostile/strings.json, each
// made unique with a marker ("HOSTILE0:", "HOSTILE1:", …) so that a test can
// tell where each one ended up.
func Corpus(t testing.TB) []string {
	t.Helper()
	c := read(t)
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
