package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/show"
)

// The kinds of field the edit form has: one input per top-level property
// of the action's schema, a JSON textarea for what no simple input holds.
const (
	kindString  = "string"
	kindNumber  = "number"
	kindInteger = "integer"
	kindBoolean = "boolean"
	kindEnum    = "enum"
	kindJSON    = "json"
)

// maxEditField bounds one field of the edit form, as the engine bounds a
// proposal's arguments.
const maxEditField = 64 << 10

// editForm is the form that edits one action's arguments and approves
// them.
type editForm struct {
	Index  int
	Name   string
	Fields []editField
}

// editField is one top-level argument as the form shows it.
type editField struct {
	Key      string
	Kind     string
	Value    string   // the input's value: the text of a string, a number's JSON, JSON for kindJSON
	Options  []option // for kindEnum and kindBoolean
	Required bool
	Redacted bool   // hidden from people: shown as kept, never sent back
	Kept     string // why the field is kept as stored and not offered ("" when offered)
}

type option struct {
	Value, Label string
	Selected     bool
}

// schemaProps is what the form reads of a JSON Schema: the top-level
// properties, their types and enums, and which are required.
type schemaProps struct {
	Properties map[string]struct {
		Type json.RawMessage   `json:"type"`
		Enum []json.RawMessage `json:"enum"`
	} `json:"properties"`
	Required []string `json:"required"`
}

// editFormOf is the edit form of action index with args (as stored,
// unredacted), by the schema (nil: each argument by the kind of its
// value) and with the fields of redact kept out of reach.
func editFormOf(index int, name string, schema, args json.RawMessage, redact []string) editForm {
	var sp schemaProps
	if len(schema) > 0 {
		_ = json.Unmarshal(schema, &sp) // the engine compiled it; what cannot be read is left to the JSON fallback
	}
	var cur map[string]json.RawMessage
	_ = json.Unmarshal(args, &cur)
	keys := make([]string, 0, len(sp.Properties)+len(cur))
	for k := range sp.Properties {
		keys = append(keys, k)
	}
	for k := range cur {
		if _, ok := sp.Properties[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	f := editForm{Index: index, Name: name}
	for _, k := range keys {
		p, inSchema := sp.Properties[k]
		ef := editField{Key: k, Required: slices.Contains(sp.Required, k), Redacted: redacted(k, redact)}
		switch {
		case ef.Redacted:
			ef.Kept = "hidden from people; kept as proposed"
		case show.Inert(k) != k:
			// A name that cannot be shown as it is cannot name a form's field either.
			ef.Kept = "its name cannot be shown as it is; kept as proposed"
		}
		if ef.Kept != "" {
			f.Fields = append(f.Fields, ef)
			continue
		}
		v, has := cur[k]
		switch {
		case len(p.Enum) > 0:
			ef.Kind = kindEnum
			for _, e := range p.Enum {
				ef.Options = append(ef.Options, option{Value: string(e), Label: show.Value(e), Selected: has && sameJSON(e, v)})
			}
		case inSchema:
			ef.Kind = kindOfType(p.Type)
		default:
			ef.Kind = kindOfValue(v)
		}
		ef.Value, ef.Options = fieldValue(ef, v, has)
		if ef.Kind == kindString && show.Inert(ef.Value) != ef.Value {
			// Characters that would change how the page reads are shown
			// as JSON escapes, which the form reads back as they were.
			ef.Kind, ef.Value = kindJSON, string(v)
		}
		if ef.Kind == kindJSON {
			ef.Value = escapedJSON(ef.Value)
		}
		f.Fields = append(f.Fields, ef)
	}
	return f
}

// redacted says whether key, or a path inside it, is hidden from people:
// such a field keeps its stored value.
func redacted(key string, redact []string) bool {
	return slices.ContainsFunc(redact, func(p string) bool { return p == key || strings.HasPrefix(p, key+".") })
}

func kindOfType(t json.RawMessage) string {
	var s string
	if json.Unmarshal(t, &s) != nil {
		return kindJSON // several types, or none: JSON says any of them
	}
	switch s {
	case kindString, kindNumber, kindInteger, kindBoolean:
		return s
	}
	return kindJSON
}

func kindOfValue(v json.RawMessage) string {
	switch jsonvalue.Kind(decoded(v)) {
	case "string":
		return kindString
	case "number":
		return kindNumber
	case "boolean":
		return kindBoolean
	}
	return kindJSON
}

func decoded(v json.RawMessage) any {
	if len(v) == 0 {
		return nil
	}
	x, err := jsonvalue.Decode(v, jsonvalue.Exact)
	if err != nil {
		return nil
	}
	return x
}

// fieldValue is what the input starts with: the proposed value.
func fieldValue(ef editField, v json.RawMessage, has bool) (string, []option) {
	switch ef.Kind {
	case kindEnum:
		return "", ef.Options
	case kindBoolean:
		cur := ""
		if has {
			cur = string(v)
		}
		return "", []option{{Value: "", Label: "(absent)", Selected: cur == ""},
			{Value: "true", Label: "true", Selected: cur == "true"}, {Value: "false", Label: "false", Selected: cur == "false"}}
	case kindString:
		var s string
		if has && json.Unmarshal(v, &s) == nil {
			return s, nil
		}
	}
	if !has {
		return "", nil
	}
	return string(v), nil
}

func sameJSON(a, b json.RawMessage) bool {
	ca, err1 := jsonvalue.Canonical(a)
	cb, err2 := jsonvalue.Canonical(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

// editedArgs reads the form posted for f over the stored args: each field
// by its kind (an empty field leaves the argument out), the redacted ones
// kept as stored. A value that is not of its kind is refused, in words.
func editedArgs(f editForm, args json.RawMessage, form url.Values) (json.RawMessage, error) {
	var cur map[string]json.RawMessage
	if err := json.Unmarshal(args, &cur); err != nil || cur == nil {
		return nil, fmt.Errorf("the arguments of %s are not an object: edit them in Slack or have them proposed again", show.String(f.Name))
	}
	out := map[string]json.RawMessage{}
	for _, ef := range f.Fields {
		if ef.Kept != "" {
			if v, ok := cur[ef.Key]; ok {
				out[ef.Key] = v
			}
			continue
		}
		text := form.Get("arg." + ef.Key)
		if len(text) > maxEditField {
			return nil, fmt.Errorf("%s: %d bytes; at most %d", ef.Key, len(text), maxEditField)
		}
		v, err := fieldJSON(ef, text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ef.Key, err)
		}
		if v != nil {
			out[ef.Key] = v
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode the edited arguments: %w", err)
	}
	return jsonvalue.Canonical(b)
}

// fieldJSON is text, as the form sent it, as the JSON of a field of kind
// ef.Kind; nil when the field was left empty (the argument is left out).
func fieldJSON(ef editField, text string) (json.RawMessage, error) {
	switch ef.Kind {
	case kindString:
		b, err := json.Marshal(text)
		return b, err
	case kindEnum, kindBoolean:
		if text == "" {
			return nil, nil
		}
		if !slices.ContainsFunc(ef.Options, func(o option) bool { return o.Value == text }) {
			return nil, fmt.Errorf("%s is not one of the choices offered", show.String(text))
		}
		return json.RawMessage(text), nil
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, nil
	}
	if ef.Kind == kindNumber || ef.Kind == kindInteger {
		if !json.Valid([]byte(text)) || jsonvalue.Kind(decoded(json.RawMessage(text))) != "number" {
			return nil, fmt.Errorf("%s is not a number", show.String(text))
		}
		if p := jsonvalue.NumberProblem(text); p != "" {
			return nil, fmt.Errorf("%s", p)
		}
		return json.RawMessage(text), nil
	}
	c, err := jsonvalue.Canonical([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", show.Inert(err.Error()))
	}
	return c, nil
}

// editable says whether the run's pending request lets an approver edit.
func editable(g *record.Gate) bool {
	return g != nil && g.Approval != nil && g.Approval.Edit
}

// escapedJSON is JSON text with every character that is not shown as it
// is (a bidi control, a zero-width space) written as its \u escape: such
// characters are only ever inside JSON strings, where the escape means
// the same character.
func escapedJSON(s string) string {
	if show.Inert(s) == s {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if show.AsIs(r) || r == '\n' || r == '\t' {
			b.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&b, `\u%04x`, u)
		}
	}
	return b.String()
}
