package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/signoff-dev/signoff/record"

	"github.com/go-json-experiment/json/jsontext"
)

// Mode says how Decode represents numbers.
type Mode int

const (
	// Exact keeps the number's text (json.Number): schemas check
	// multipleOf and big integers exactly, and redaction re-encodes it as it came.
	Exact Mode = iota
	// ForCEL gives int64 for integers that fit and float64 otherwise, so that
	// CEL's double() and comparisons work on 119 as well as on 119.0.
	ForCEL
)

// Decode decodes exactly one JSON value strictly: duplicate object keys,
// invalid UTF-8 and trailing data are refused, where encoding/json would keep
// the last duplicate silently.
func Decode(b []byte, mode Mode) (any, error) {
	// From a bytes.Buffer the decoder reads b in place instead of copying it.
	dec := jsontext.NewDecoder(bytes.NewBuffer(b))
	v, err := readJSON(dec, mode)
	if err != nil {
		return nil, jsonError(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			return nil, errors.New("data after the JSON value")
		}
		return nil, jsonError(err)
	}
	return v, nil
}

// jsonError drops the package prefix: people read these messages.
func jsonError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("unexpected end of JSON")
	}
	return errors.New(strings.TrimPrefix(err.Error(), "jsontext: "))
}

func readJSON(dec *jsontext.Decoder, mode Mode) (any, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return readNumber(tok.String(), mode)
	case '{':
		m := map[string]any{}
		for dec.PeekKind() != '}' {
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			name := tok.String() // before the next read voids tok
			v, err := readJSON(dec, mode)
			if err != nil {
				return nil, err
			}
			m[name] = v
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return m, nil
	case '[':
		a := []any{}
		for dec.PeekKind() != ']' {
			v, err := readJSON(dec, mode)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return a, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %s", tok)
}

func readNumber(text string, mode Mode) (any, error) {
	if mode == Exact {
		return json.Number(text), nil
	}
	if !strings.ContainsAny(text, ".eE") {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s is out of range", text)
	}
	return f, nil
}

// Kind names the JSON type of a decoded value, for messages.
func Kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number, int64, float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// Arguments are stored, fingerprinted and sent to the executor in canonical
// JSON (RFC 8785), whose numbers are 64-bit floats: 9007199254740993 would
// become 9007199254740992, 1e400 the largest float, 100.000000000000001 100,
// and the approver would have approved a number that is not the one that
// runs. A number a float does not hold exactly is refused instead, naming
// the field; one it holds (119.00, 1e2, 0.1) runs as its canonical text,
// which says the same number.

// NumberProblem says why the JSON number text does not survive the round
// trip through a 64-bit float, or "".
func NumberProblem(text string) string {
	if _, err := strconv.ParseFloat(text, 64); err != nil {
		return fmt.Sprintf("%s is out of the range signoff keeps numbers in (64-bit floats, about ±1.8e308): send it as a string", text)
	}
	// What Canonical stores, fingerprints and sends.
	c, err := Canonical([]byte(text))
	if err != nil {
		return fmt.Sprintf("%s cannot be read: %v", text, err)
	}
	if back := string(c); !SameDecimal(text, back) {
		return fmt.Sprintf("%s would be kept as %s: signoff keeps numbers as 64-bit floats, which hold about 16 significant digits; send it as a string, or with fewer digits", text, back)
	}
	return ""
}

// SameDecimal reports whether two JSON number texts are the same decimal
// number (-0 and 0 are).
func SameDecimal(a, b string) bool {
	na, oka := DecimalOf(a)
	nb, okb := DecimalOf(b)
	return oka && okb && na == nb
}

// Decimal is a number as sign, significant digits (no leading or trailing
// zero) and the power of ten of the last one; zero has no digits.
type Decimal struct {
	neg    bool
	digits string
	exp    int64
}

// DecimalOf reads a JSON number's text exactly, without big arithmetic, so
// that 1e-999999999 costs nothing.
func DecimalOf(s string) (Decimal, bool) {
	var d Decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	if hasExp {
		e, err := strconv.ParseInt(expText, 10, 64)
		if err != nil || e > 1<<40 || e < -(1<<40) {
			return d, false
		}
		d.exp = e
	}
	digits := intPart + frac
	d.exp -= int64(len(frac))
	trimmed := strings.TrimRight(digits, "0")
	d.exp += int64(len(digits) - len(trimmed))
	d.digits = strings.TrimLeft(trimmed, "0")
	if d.digits == "" {
		return Decimal{}, true
	}
	return d, true
}

// Canonical returns the RFC 8785 canonical form of one JSON value: sorted keys,
// normalised numbers, no insignificant space. Duplicate keys and invalid UTF-8 are
// refused, so that two encodings that mean different things never hash alike.
func Canonical(b []byte) (json.RawMessage, error) {
	v := jsontext.Value(append([]byte(nil), b...))
	if err := v.Canonicalize(); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return json.RawMessage(v), nil
}

// Digest is the hex SHA-256 of the canonical form of a JSON value.
func Digest(b []byte) (string, error) {
	c, err := Canonical(b)
	if err != nil {
		return "", err
	}
	return DigestCanonical(c), nil
}

// DigestOf marshals v deterministically and digests it.
func DigestOf(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("digest: %w", err)
	}
	return Digest(b)
}

// Readable rewords a decoding error for the people who wrote the JSON:
// it names the field and where it is, in JSON's words (field, string, number),
// never in Go's (workflow.Proposal, int64). Other errors pass unchanged.
func Readable(err error) error {
	var se *jsonv2.SemanticError
	if !errors.As(err, &se) {
		return err
	}
	ptr := string(se.JSONPointer)
	switch {
	case errors.Is(se.Err, jsonv2.ErrUnknownName):
		parent, name := ptr, ""
		if i := strings.LastIndex(ptr, "/"); i >= 0 {
			parent, name = ptr[:i], unescapePointer(ptr[i+1:])
		}
		msg := fmt.Sprintf("unknown field %q", name)
		if parent != "" {
			msg += " in " + parent
		}
		if known := jsonFields(se.GoType); len(known) > 0 {
			msg += " (known: " + strings.Join(known, ", ") + ")"
		}
		return errors.New(msg)
	case se.Err == nil && se.JSONKind != 0 && se.GoType != nil:
		where := ptr
		if where == "" {
			where = "the document"
		}
		return fmt.Errorf("%s: want %s, got %s", where, jsonKindOfGo(se.GoType), jsonKindName(se.JSONKind))
	}
	return err
}

// jsonFields lists the JSON names of a struct's fields, in their order.
func jsonFields(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

func jsonKindOfGo(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another kind of value"
}

func jsonKindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	case '{':
		return "an object"
	case '[':
		return "a list"
	}
	return "another kind of value"
}

func unescapePointer(s string) string {
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
}

// Encode is v as JSON, numbers with the text they came with.
func Encode(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // shown to people, not embedded in HTML
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(`"` + record.Redaction + `"`) // decoded JSON always encodes
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n"))
}
