package show

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Everything an agent or a requester writes (a summary, a task id, evidence,
// a name, argument strings) is untrusted text. Shown raw, it can drive a
// terminal (ESC sequences that erase a line and print another), reorder what
// a reader sees (bidirectional overrides), hide itself (zero-width
// characters) or add lines that look like signoff's own. Inert is the one
// primitive every renderer builds on; JSON output stays exact and never goes
// through it.

// Inert returns s with every character that could change how the text around
// it reads shown as a visible escape instead: C0 and C1 controls and DEL
// (`\x1b`, `\n`, `\u0085`), format characters such as bidirectional
// overrides and zero-width spaces (`\u202e`, `\u200b`), line and paragraph
// separators, invisible fillers, and bytes that are not UTF-8 (`\xff`).
// Everything else, letters of every script and emoji included, is kept. The
// result is one line: a newline in s is shown as `\n`.
func Inert(s string) string {
	if isInert(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !AsIs(r) && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case !AsIs(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isInert reports whether Inert would return s unchanged; most text is, and
// then nothing is allocated.
func isInert(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			goto slow
		}
	}
	return true
slow:
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f || !AsIs(r) {
			return false
		}
	}
	return true
}

// AsIs reports whether r can be printed as it is: not a control, format
// (Cf: bidi controls, zero-width characters, tag characters), line or
// paragraph separator, nor one of the fillers that render as nothing.
func AsIs(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return false
	case r < 0x80:
		return true
	case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return false
	}
	switch r {
	case 0x115f, 0x1160, 0x3164, 0xffa0, // Hangul fillers: letters that show nothing
		0x180e, // Mongolian vowel separator, once a space
		0x034f, // combining grapheme joiner
		0x2800: // braille blank
		return false
	}
	return true
}

// LineProblem says why s cannot be a single-line field (an id, a name), or
// returns "": such a field is shown on one line everywhere, so a line break,
// a control character or a bidi control in it could only serve to deceive.
func LineProblem(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r):
			return "must be one line"
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			return fmt.Sprintf("must not contain control characters (found %s)", Inert(string(r)))
		case IsBidiControl(r):
			return fmt.Sprintf("must not contain bidirectional controls (found %s)", Inert(string(r)))
		}
	}
	return ""
}

// IsBidiControl reports whether r changes the direction of the text after it.
func IsBidiControl(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}
