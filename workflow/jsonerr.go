package workflow

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// readableJSONError rewords a decoding error for the people who wrote the JSON:
// it names the field and where it is, in JSON's words (field, string, number),
// never in Go's (workflow.Proposal, int64). Other errors pass unchanged.
func readableJSONError(err error) error {
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
