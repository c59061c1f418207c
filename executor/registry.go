// Package executor maps the `type:` of an action's executor block in the
// config to the package that implements it (executor/webhook,
// executor/command, and whatever a build adds, such as the demo's shop).
// Adding a type is a package and one line in Builtin; no command changes.
//
// A factory reads its fields through Block, which refuses unknown fields and
// values of the wrong kind with the field's name, so that the config can point
// at the line.
package executor

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// Block is one action's executor block, as the config holds it.
type Block struct {
	Action string
	Type   string
	Fields map[string]any // everything but type
	// Dir is the config file's folder: relative paths in the block start there.
	Dir string
	// Getenv reads the environment, for secret_env and env.
	Getenv func(string) string
	// CallLimit is how long the engine lets one call run (half the lease);
	// a longer timeout is warned about. Zero: no warning.
	CallLimit time.Duration
	// NoSecrets builds the executor for a command that only reads and never
	// calls it: the secrets the block names (secret_env) are neither required
	// nor read, everything else is checked as usual, and the executor refuses
	// every call, having done nothing.
	NoSecrets bool
	// Private are signoff's own files no program may reach, whatever the
	// block lists: the store and the integrity keys.
	Private []string

	used     map[string]bool
	warnings []*FieldError
}

// FieldError is a problem with one field of a block ("" for the block).
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// Factory builds the executor of one block.
type Factory func(b *Block) (workflow.Executor, error)

// Registry maps a type to its factory.
type Registry map[string]Factory

// Builtin is every executor type in this package tree.
func Builtin() Registry {
	return Registry{"webhook": newWebhook, "command": newCommand}
}

// Types lists the registry's types, sorted.
func (r Registry) Types() []string { return slices.Sorted(maps.Keys(r)) }

// Build makes the executor for b and returns it with the warnings about the
// block (a plaintext URL, a timeout the engine cuts short). Errors are
// *FieldError.
func (r Registry) Build(b Block) (workflow.Executor, []*FieldError, error) {
	f, ok := r[b.Type]
	if !ok {
		return nil, nil, &FieldError{Field: "type", Err: fmt.Errorf("unknown executor type %q (this build has: %s)", b.Type, strings.Join(r.Types(), ", "))}
	}
	if b.Getenv == nil {
		b.Getenv = func(string) string { return "" }
	}
	b.used = map[string]bool{}
	x, err := f(&b)
	if err != nil {
		var fe *FieldError
		if !errors.As(err, &fe) {
			fe = &FieldError{Err: err}
		}
		return nil, nil, fe
	}
	for _, k := range slices.Sorted(maps.Keys(b.Fields)) {
		if !b.used[k] {
			known := slices.Sorted(maps.Keys(b.used))
			return nil, nil, &FieldError{Field: k, Err: fmt.Errorf("unknown field for a %s executor (known: type, %s)", b.Type, strings.Join(known, ", "))}
		}
	}
	return x, b.warnings, nil
}

// Warn records a warning about field.
func (b *Block) Warn(field, format string, args ...any) {
	b.warnings = append(b.warnings, &FieldError{Field: field, Err: fmt.Errorf(format, args...)})
}

// Errorf is an error about field.
func (b *Block) Errorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// String reads a string field; "" when absent.
func (b *Block) String(field string, required bool) (string, error) {
	b.used[field] = true
	v, ok := b.Fields[field]
	if !ok || v == nil {
		if required {
			return "", b.Errorf(field, "required")
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", b.Errorf(field, "must be a string, got %s", kind(v))
	}
	if required && strings.TrimSpace(s) == "" {
		return "", b.Errorf(field, "required")
	}
	return s, nil
}

// Strings reads a list of strings; nil when absent.
func (b *Block) Strings(field string, required bool) ([]string, error) {
	b.used[field] = true
	return b.StringsOf(field, b.Fields[field], required)
}

// Mapping reads a mapping whose keys must be among known; nil when absent.
// Its values are read with StringsOf and the like, naming "field.key".
func (b *Block) Mapping(field string, known ...string) (map[string]any, error) {
	b.used[field] = true
	v, ok := b.Fields[field]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, b.Errorf(field, "must be a mapping (%s), got %s", strings.Join(known, ", "), kind(v))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(known, k) {
			return nil, b.Errorf(field+"."+k, "unknown field (known: %s)", strings.Join(known, ", "))
		}
	}
	return m, nil
}

// StringsOf reads v, the value of field (a path such as paths.read), as a
// list of strings; nil when absent.
func (b *Block) StringsOf(field string, v any, required bool) ([]string, error) {
	if v == nil {
		if required {
			return nil, b.Errorf(field, "required")
		}
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, b.Errorf(field, "must be a list of strings, got %s", kind(v))
	}
	out := make([]string, len(list))
	for i, el := range list {
		s, ok := el.(string)
		if !ok {
			return nil, b.Errorf(fmt.Sprintf("%s[%d]", field, i), "must be a string, got %s", kind(el))
		}
		out[i] = s
	}
	if required && len(out) == 0 {
		return nil, b.Errorf(field, "required: at least one element")
	}
	return out, nil
}

// Duration reads a duration like 10s; def when absent. It must be positive
// and at most max.
func (b *Block) Duration(field string, def, max time.Duration) (time.Duration, error) {
	s, err := b.String(field, false)
	if err != nil || s == "" {
		return def, err
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, b.Errorf(field, "want a positive duration like 10s, got %q", s)
	}
	if d > max {
		return 0, b.Errorf(field, "%v is longer than the %v allowed", d, max)
	}
	if b.CallLimit > 0 && d > b.CallLimit {
		b.Warn(field, "%v is longer than the engine lets one call run (%v, half the lease): raise SIGNOFF_LEASE_TTL to at least %v", d, b.CallLimit, 2*d)
	}
	return d, nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// EnvName checks the name of an environment variable.
func (b *Block) EnvName(field, name string) error {
	if !envName.MatchString(name) {
		return b.Errorf(field, "%q is not the name of an environment variable", name)
	}
	return nil
}

func kind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any, map[any]any:
		return "a mapping"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a number"
}
