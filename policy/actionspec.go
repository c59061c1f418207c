package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/show"
)

// ActionSpec describes the arguments of one kind of action: the JSON Schema
// they must satisfy, and the fields a person must not be shown.
type ActionSpec struct {
	Name string
	// Redact lists argument fields hidden from people: top-level keys
	// ("payment_id") or dotted paths ("card.number"). A path that meets an array
	// applies to every element.
	Redact []string
	// Schema is the JSON Schema source, kept for display (edit forms, docs).
	// Empty when the action accepts any object.
	Schema json.RawMessage

	schema *jsonschema.Schema // nil: any object
}

// NewActionSpec compiles schemaJSON (JSON Schema 2020-12 unless it names
// another draft with $schema). An empty schemaJSON accepts any JSON object.
// The schema must be self-contained: references to other documents are
// refused, so compiling a schema never reads a file or the network.
func NewActionSpec(name string, schemaJSON []byte, redact []string) (*ActionSpec, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("action name: %w", err)
	}
	s := &ActionSpec{Name: name, Redact: slices.Clone(redact)}
	for _, p := range redact {
		if err := checkRedactPath(p); err != nil {
			return nil, fmt.Errorf("action %s: redact: %w", name, err)
		}
	}
	if len(bytes.TrimSpace(schemaJSON)) == 0 {
		return s, nil
	}
	doc, err := jsonvalue.Decode(schemaJSON, jsonvalue.Exact)
	if err != nil {
		return nil, fmt.Errorf("action %s: read schema: %w", name, err)
	}
	const url = "signoff:///action.schema.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// A schema that says "format": "date" means it; 2020-12 would only annotate.
	c.AssertFormat()
	c.UseLoader(noLoader{})
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("action %s: add schema: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("action %s: compile schema: %w", name, err)
	}
	s.schema = sch
	s.Schema = slices.Clone(json.RawMessage(schemaJSON))
	return s, nil
}

// SchemaArgs lists the top-level properties the arguments' schema names, in
// properties (also through $ref and allOf, anyOf, oneOf, if, then and
// else), sorted; patterns are its patternProperties. Both are empty for an
// action without a schema, or whose schema names none: it says nothing then
// about which arguments there are.
func (s *ActionSpec) SchemaArgs() (names []string, patterns []jsonschema.Regexp) {
	if s == nil || s.schema == nil {
		return nil, nil
	}
	seen := map[*jsonschema.Schema]bool{}
	var walk func(sch *jsonschema.Schema)
	walk = func(sch *jsonschema.Schema) {
		if sch == nil || seen[sch] {
			return
		}
		seen[sch] = true
		for name := range sch.Properties {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
		for re := range sch.PatternProperties {
			patterns = append(patterns, re)
		}
		walk(sch.Ref)
		if sch.DynamicRef != nil {
			walk(sch.DynamicRef.Ref)
		}
		for _, sub := range slices.Concat(sch.AllOf, sch.AnyOf, sch.OneOf, []*jsonschema.Schema{sch.If, sch.Then, sch.Else}) {
			walk(sub)
		}
	}
	walk(s.schema)
	slices.Sort(names)
	return names, patterns
}

// DeclaresArg says whether the arguments' schema names the top-level
// property name (see SchemaArgs), and known whether it names any: without,
// nothing can be said.
func (s *ActionSpec) DeclaresArg(name string) (declared, known bool) {
	names, patterns := s.SchemaArgs()
	if len(names) == 0 && len(patterns) == 0 {
		return false, false
	}
	if slices.Contains(names, name) {
		return true, true
	}
	for _, re := range patterns {
		if re.MatchString(name) {
			return true, true
		}
	}
	return false, true
}

// noLoader refuses every external reference.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references %s: external references are not allowed", url)
}

func checkRedactPath(p string) error {
	if p == "" {
		return errors.New("empty path")
	}
	for seg := range strings.SplitSeq(p, ".") {
		if seg == "" || strings.TrimSpace(seg) != seg {
			return fmt.Errorf("bad path %q: want a key or keys joined by dots, like card.number", p)
		}
	}
	return nil
}

// ArgsError lists everything wrong with an action's arguments, so that a person
// editing them can fix all of it at once.
type ArgsError struct {
	Action   string
	Problems []ArgProblem // sorted by path
}

// ArgProblem is one thing wrong with the arguments.
type ArgProblem struct {
	Path   string // amount, items[0].sku; "" for the arguments as a whole
	Reason string
}

func (p ArgProblem) String() string {
	if p.Path == "" {
		return p.Reason
	}
	return p.Path + ": " + p.Reason
}

func (e *ArgsError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("invalid arguments for %s: %s", e.Action, strings.Join(parts, "; "))
}

// Validate checks args strictly: one JSON object, no duplicate keys, no
// value that reads as a hidden one, no key that is not NFC, holds an
// invisible character or reads like another of its object (see checkKeys),
// and everything the schema says. The
// error is an *ArgsError naming every problem.
func (s *ActionSpec) Validate(args json.RawMessage) error {
	inst, err := s.decodeArgs(args)
	if err != nil {
		return err
	}
	ae := &ArgsError{Action: s.Name}
	checkValues(inst, "", ae)
	s.checkKeys(inst, "", nil, ae)
	if s.schema != nil {
		err = s.schema.Validate(inst)
		var verr *jsonschema.ValidationError
		switch {
		case err == nil:
		case errors.As(err, &verr):
			collectProblems(verr, inst, ae)
		default:
			return fmt.Errorf("validate arguments for %s: %w", s.Name, err)
		}
	}
	if len(ae.Problems) == 0 {
		return nil
	}
	slices.SortStableFunc(ae.Problems, func(a, b ArgProblem) int { return strings.Compare(a.Path, b.Path) })
	ae.Problems = slices.Compact(ae.Problems)
	return ae
}

// checkValues refuses, at any depth, a number that a float does not hold
// exactly (see NumberProblem), and a string that is record.Redaction: people are
// shown it in place of a hidden field, so an argument holding it would read
// as hidden while it runs as written.
func checkValues(v any, at string, ae *ArgsError) {
	switch c := v.(type) {
	case json.Number:
		checkNumber(c, at, ae)
	case string:
		if c == record.Redaction {
			ae.Problems = append(ae.Problems, ArgProblem{Path: at,
				Reason: fmt.Sprintf("must not be %q: signoff shows that in place of a hidden field", record.Redaction)})
		}
	case []any:
		for i, el := range c {
			checkValues(el, at+"["+strconv.Itoa(i)+"]", ae)
		}
	case map[string]any:
		for k, el := range c {
			checkValues(el, joinPath(at, k), ae)
		}
	}
}

// decodeArgs reads args as one JSON object with exact numbers. Empty args mean
// an action without arguments: {}.
func (s *ActionSpec) decodeArgs(args json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		return map[string]any{}, nil
	}
	v, err := jsonvalue.Decode(args, jsonvalue.Exact)
	if err != nil {
		return nil, &ArgsError{Action: s.Name, Problems: []ArgProblem{{Reason: err.Error()}}}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &ArgsError{Action: s.Name, Problems: []ArgProblem{{Reason: "must be a JSON object, got " + jsonvalue.Kind(v)}}}
	}
	return m, nil
}

// collectProblems turns the leaves of a validation error tree into problems;
// the inner nodes only say "validation failed" and where.
func collectProblems(e *jsonschema.ValidationError, inst any, ae *ArgsError) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			collectProblems(c, inst, ae)
		}
		return
	}
	at := argPath(inst, e.InstanceLocation)
	add := func(path, reason string) { ae.Problems = append(ae.Problems, ArgProblem{Path: path, Reason: reason}) }
	// The number as the proposal wrote it (119.00, not 119).
	got := func(r *big.Rat) string {
		if n, ok := valueAt(inst, e.InstanceLocation).(json.Number); ok {
			return string(n)
		}
		return ratString(r)
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			add(joinPath(at, m), "is required")
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			add(joinPath(at, p), "is not allowed")
		}
	case *kind.Type:
		add(at, fmt.Sprintf("must be %s, got %s", strings.Join(k.Want, " or "), k.Got))
	case *kind.Minimum:
		add(at, fmt.Sprintf("must be at least %s, got %s", ratString(k.Want), got(k.Got)))
	case *kind.Maximum:
		add(at, fmt.Sprintf("must be at most %s, got %s", ratString(k.Want), got(k.Got)))
	case *kind.ExclusiveMinimum:
		add(at, fmt.Sprintf("must be greater than %s, got %s", ratString(k.Want), got(k.Got)))
	case *kind.ExclusiveMaximum:
		add(at, fmt.Sprintf("must be less than %s, got %s", ratString(k.Want), got(k.Got)))
	case *kind.MultipleOf:
		add(at, fmt.Sprintf("must be a multiple of %s, got %s", ratString(k.Want), got(k.Got)))
	case *kind.MinLength:
		add(at, fmt.Sprintf("must be at least %d characters long, got %d", k.Want, k.Got))
	case *kind.MaxLength:
		add(at, fmt.Sprintf("must be at most %d characters long, got %d", k.Want, k.Got))
	case *kind.MinItems:
		add(at, fmt.Sprintf("must have at least %d items, got %d", k.Want, k.Got))
	case *kind.MaxItems:
		add(at, fmt.Sprintf("must have at most %d items, got %d", k.Want, k.Got))
	default:
		// The library's own wording, through its public output API.
		out := (&jsonschema.ValidationError{ErrorKind: e.ErrorKind}).BasicOutput()
		reason := "is invalid"
		if out.Error != nil {
			reason = out.Error.String()
		}
		add(at, reason)
	}
}

// valueAt is the value at a JSON pointer's tokens in inst, or nil.
func valueAt(inst any, loc []string) any {
	cur := inst
	for _, tok := range loc {
		switch c := cur.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		case map[string]any:
			cur = c[tok]
		default:
			return nil
		}
	}
	return cur
}

// argPath renders a JSON pointer's tokens as amount or items[0].sku, looking at
// the instance to tell array indexes from object keys that look like numbers.
func argPath(inst any, loc []string) string {
	path := ""
	cur := inst
	for _, tok := range loc {
		switch c := cur.(type) {
		case []any:
			path += "[" + tok + "]"
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(c) {
				cur = c[i]
			} else {
				cur = nil
			}
		case map[string]any:
			path = joinPath(path, tok)
			cur = c[tok]
		default:
			path = joinPath(path, tok)
			cur = nil
		}
	}
	return path
}

// joinPath names key under path: a plain key after a dot, any other quoted
// as show.String quotes it, so that a path reads in printable ASCII and a key
// with a look-alike or invisible character reads unlike the plain one.
func joinPath(path, key string) string {
	if !show.PlainKey.MatchString(key) {
		return path + "[" + show.String(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// Redacted returns a copy of args with the Redact fields replaced by
// "[redacted]", for showing to people. Keys come out sorted; when nothing is
// redacted the arguments are returned as they came.
func (s *ActionSpec) Redacted(args json.RawMessage) (json.RawMessage, error) {
	m, err := s.decodeArgs(args)
	if err != nil {
		return nil, fmt.Errorf("redact: %w", err)
	}
	changed := false
	for _, p := range s.Redact {
		if RedactPath(m, strings.Split(p, ".")) {
			changed = true
		}
	}
	if !changed {
		if len(bytes.TrimSpace(args)) == 0 {
			return json.RawMessage("{}"), nil
		}
		return slices.Clone(args), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // shown to people, not embedded in HTML
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("redact: encode: %w", err)
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// redact replaces the field at path under v and reports whether it found one.
func RedactPath(v any, path []string) bool {
	switch c := v.(type) {
	case map[string]any:
		child, ok := c[path[0]]
		if !ok {
			return false
		}
		if len(path) == 1 {
			c[path[0]] = record.Redaction
			return true
		}
		return RedactPath(child, path[1:])
	case []any:
		found := false
		for _, el := range c {
			if RedactPath(el, path) {
				found = true
			}
		}
		return found
	}
	return false
}

// checkNumber adds a problem for a number at path at that a float does not
// hold exactly.
func checkNumber(n json.Number, at string, ae *ArgsError) {
	if p := jsonvalue.NumberProblem(string(n)); p != "" {
		ae.Problems = append(ae.Problems, ArgProblem{Path: at, Reason: "the number " + p})
	}
}

// ratString prints a schema's bound as the decimal it is (0.01, not 1/100,
// and not rounded through a float), or as a float when it has no finite
// decimal form.
func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.RatString()
	}
	// A fraction whose denominator is 2^a·5^b has max(a, b) decimals.
	d := new(big.Int).Set(r.Denom())
	places := 0
	for _, p := range []int64{2, 5} {
		n := 0
		m := new(big.Int)
		for {
			q, rem := new(big.Int).QuoRem(d, big.NewInt(p), m)
			if rem.Sign() != 0 {
				break
			}
			d, n = q, n+1
		}
		places = max(places, n)
	}
	if d.Cmp(big.NewInt(1)) == 0 && places <= 400 {
		return r.FloatString(places)
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
