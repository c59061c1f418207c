package show

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// What an approver reads of an action's arguments must say exactly what
// runs: the string "false" and the boolean false, "10" and 10, a string that
// holds JSON and the object itself, null and "" all look different. Every
// surface that shows arguments (Slack, the terminal, any later one) renders
// them here, so that they all show a value the same way: as JSON, a string
// always in quotes, a number as it was written.

// Value renders one JSON value as people are shown it: compact JSON with
// the keys of objects sorted, every string quoted (see String) and every
// number as written. A field redaction hid reads "[redacted]", which no
// argument may hold (see ActionSpec.Validate). Text that is not one JSON value
// is shown as "(not JSON) " and its bytes escaped, which no JSON value starts
// with.
func Value(raw json.RawMessage) string {
	n, err := parseShown(raw)
	if err != nil {
		return notJSON(raw)
	}
	var b strings.Builder
	n.write(&b)
	return b.String()
}

// Field is one top-level argument as a surface lists it, one per line.
type Field struct {
	Key   string // Key of the key
	Value string // Value of its value
}

// Fields lists the fields of raw, an object, sorted by key, rendered as
// Value renders them; ok is false when raw is not an object.
func Fields(raw json.RawMessage) (fields []Field, ok bool) {
	n, err := parseShown(raw)
	if err != nil || n.kind != '{' {
		return nil, false
	}
	for i, k := range n.keys {
		var b strings.Builder
		n.vals[i].write(&b)
		fields = append(fields, Field{Key: Key(k), Value: b.String()})
	}
	return fields, true
}

// Key renders an object key on its own (a row's label): a plain name
// (amount, card_number) as it is, any other key quoted as String quotes
// it, so that no key reads like another.
func Key(k string) string {
	if PlainKey.MatchString(k) {
		return k
	}
	return String(k)
}

// String quotes s as a JSON string literal that reads back as exactly s,
// in printable ASCII: ", \ and line breaks and tabs are escaped as JSON
// escapes them (\", \\, \n, \r, \t), and every other character that is not
// printable ASCII, or that Slack's mrkdwn acts on even in a code span (the
// backtick that would end it, &, < and >), as \uXXXX. Every character has
// one spelling and the backslash is itself escaped, so two different strings
// never show alike: a backtick (\u0060) and its look-alike U+02CB (\u02cb),
// a Latin a and a Cyrillic а (\u0430), é and e + U+0301, a space and a
// no-break space (\u00a0) all read apart. A byte that is not UTF-8, which
// no JSON string holds, reads \xNN.
func String(s string) string {
	var b strings.Builder
	writeString(&b, s)
	return b.String()
}

func writeString(b *strings.Builder, s string) {
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\ufffd"):
			// Not UTF-8 (no JSON string holds it): the byte, as Inert shows it.
			fmt.Fprintf(b, `\x%02x`, s[i])
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r >= 0x7f || mrkdwnActive(r):
			writeEscape(b, r)
		default:
			b.WriteByte(byte(r))
		}
	}
	b.WriteByte('"')
}

// mrkdwnActive reports whether Slack acts on r inside a code span.
func mrkdwnActive(r rune) bool { return r == '`' || r == '&' || r == '<' || r == '>' }

// writeEscape writes r as JSON's \uXXXX, a pair of them above the BMP.
func writeEscape(b *strings.Builder, r rune) {
	if r > 0xffff {
		r -= 0x10000
		fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		return
	}
	fmt.Fprintf(b, `\u%04x`, r)
}

// notJSON shows bytes that are not one JSON value: marked, with every byte
// that is not printable ASCII, or is active in mrkdwn, escaped as \xNN (and
// the backslash doubled).
func notJSON(raw []byte) string {
	var b strings.Builder
	b.WriteString("(not JSON) ")
	for _, c := range raw {
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c < 0x20 || c >= 0x7f || mrkdwnActive(rune(c)):
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// shownNode is a JSON value as read for showing: numbers keep the text they
// were written with, objects their keys sorted.
type shownNode struct {
	kind byte   // n t f " 0 { [
	text string // a string's value, a number's text
	keys []string
	vals []*shownNode
}

// parseShown reads exactly one JSON value; duplicate keys and invalid UTF-8
// are refused, as everywhere else.
func parseShown(raw []byte) (*shownNode, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, io.ErrUnexpectedEOF
	}
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	n, err := readShown(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return n, nil
}

func readShown(dec *jsontext.Decoder) (*shownNode, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	n := &shownNode{kind: byte(tok.Kind())}
	switch n.kind {
	case '"', '0':
		n.text = tok.String()
	case '{':
		type field struct {
			key string
			val *shownNode
		}
		var fs []field
		for dec.PeekKind() != '}' {
			k, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			key := k.String()
			v, err := readShown(dec)
			if err != nil {
				return nil, err
			}
			fs = append(fs, field{key, v})
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		slices.SortFunc(fs, func(a, b field) int { return strings.Compare(a.key, b.key) })
		for _, f := range fs {
			n.keys = append(n.keys, f.key)
			n.vals = append(n.vals, f.val)
		}
	case '[':
		for dec.PeekKind() != ']' {
			v, err := readShown(dec)
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (n *shownNode) write(b *strings.Builder) {
	switch n.kind {
	case 'n':
		b.WriteString("null")
	case 't':
		b.WriteString("true")
	case 'f':
		b.WriteString("false")
	case '0':
		b.WriteString(n.text)
	case '"':
		writeString(b, n.text)
	case '[':
		b.WriteByte('[')
		for i, v := range n.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			v.write(b)
		}
		b.WriteByte(']')
	case '{':
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			n.vals[i].write(b)
		}
		b.WriteByte('}')
	}
}

// PlainKey matches a key that needs no quoting in a path (a.b, not a["b c"]).
var PlainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// Duration is d as a person writes it: 5m rather than 5m0s, 1h30m, 45s.
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
