package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// document indexes a parsed YAML file by field path (policy.rules[0].when), so
// that a problem found after decoding can still name its line.
type document struct {
	keys     map[string]ast.Node // path → the key that names it
	values   map[string]ast.Node // path → its value
	tokPath  map[*token.Token]string
	keyOwner map[*token.Token]string // a key's token → the path of its mapping
}

// decode parses data strictly into v: one document, no duplicate keys, no
// unknown fields, every value of the right type.
func decode(name string, data []byte, v any) (doc *document, err error) {
	// A malformed file must be an error, never a crash of the process that
	// reads it; the YAML library is large and fuzzing has found panics in such
	// parsers before.
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, &Error{File: name, Err: fmt.Errorf("cannot read this YAML (parser failure: %v)", r)}
		}
	}()
	file, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		return nil, yamlError(name, nil, err)
	}
	var body ast.Node
	for _, d := range file.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		if _, ok := d.Body.(*ast.CommentGroupNode); ok {
			continue
		}
		if body != nil {
			return nil, &Error{File: name, Line: line(d.Body.GetToken()), Err: errors.New("more than one YAML document: a config is one document")}
		}
		body = d.Body
	}
	if body == nil {
		return nil, &Error{File: name, Err: errors.New("the config is empty")}
	}
	doc = &document{
		keys:     map[string]ast.Node{},
		values:   map[string]ast.Node{},
		tokPath:  map[*token.Token]string{},
		keyOwner: map[*token.Token]string{},
	}
	if err := doc.index(name, "", body, 0); err != nil {
		return nil, err
	}
	// The parser let duplicate keys through so that index could report them
	// with their path; merge keys (<<) may legitimately repeat a key.
	if err := yaml.NodeToValue(body, v, yaml.Strict(), yaml.AllowDuplicateMapKey()); err != nil {
		return nil, yamlError(name, doc, err)
	}
	return doc, nil
}

// maxDepth bounds recursion over the tree; a real config is five levels deep.
const maxDepth = 64

func (d *document) index(name, path string, n ast.Node, depth int) error {
	if n == nil {
		return nil
	}
	if depth > maxDepth {
		return &Error{File: name, Line: line(n.GetToken()), Path: path, Err: errors.New("nested too deeply")}
	}
	if _, seen := d.values[path]; !seen {
		d.values[path] = n
	}
	if tk := n.GetToken(); tk != nil {
		if _, seen := d.tokPath[tk]; !seen {
			d.tokPath[tk] = path
		}
	}
	switch n := n.(type) {
	case *ast.AnchorNode:
		return d.index(name, path, n.Value, depth+1)
	case *ast.TagNode:
		return d.index(name, path, n.Value, depth+1)
	case *ast.SequenceNode:
		for i, el := range n.Values {
			if s := adjacentPair(el); s != nil {
				n.Values[i], el = s, s
			}
			if err := d.index(name, fmt.Sprintf("%s[%d]", path, i), el, depth+1); err != nil {
				return err
			}
		}
	case ast.MapNode:
		first := map[string]ast.Node{}
		for it := n.MapRange(); it.Next(); {
			k := it.Key()
			if k.IsMergeKey() {
				continue
			}
			key := keyString(k)
			child := joinKey(path, key)
			if tk := k.GetToken(); tk != nil {
				d.keyOwner[tk] = path
			}
			if prev, dup := first[key]; dup {
				where := fmt.Sprintf("line %d", line(prev.GetToken()))
				if line(prev.GetToken()) == line(k.GetToken()) {
					where = fmt.Sprintf("column %d of this line", prev.GetToken().Position.Column)
				}
				return &Error{File: name, Line: line(k.GetToken()), Path: child,
					Err: fmt.Errorf("duplicate key %q (first at %s)", key, where)}
			}
			first[key] = k
			d.keys[child] = k
			if err := d.index(name, child, it.Value(), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// adjacentPair undoes a parser mistake. In YAML a colon not followed by a space
// is part of a plain scalar, so [agent:resolver] is the list of one string
// "agent:resolver" (the member ids of agents look like that). The parser gets
// it right at the top level but, inside a flow mapping such as
// {name: agent, members: [agent:resolver]}, reads the entry as the pair
// agent: resolver. adjacentPair returns the string such an entry should have
// been, or nil when n is not such an entry.
func adjacentPair(n ast.Node) ast.Node {
	m, ok := n.(*ast.MappingNode)
	if !ok || len(m.Values) != 1 {
		return nil
	}
	kv := m.Values[0]
	if kv.Key == nil || kv.Value == nil || kv.Start == nil {
		return nil
	}
	k, colon, v := kv.Key.GetToken(), kv.Start, kv.Value.GetToken()
	if k == nil || v == nil || k.Position == nil || colon.Position == nil || v.Position == nil {
		return nil
	}
	if !plainScalar(kv.Key) || !plainScalar(kv.Value) {
		return nil
	}
	sameLine := k.Position.Line == colon.Position.Line && colon.Position.Line == v.Position.Line
	if !sameLine || colon.Position.Column != k.Position.Column+len(k.Value) || v.Position.Column != colon.Position.Column+1 {
		return nil
	}
	tk := token.New(k.Value+":"+v.Value, k.Value+":"+v.Value, k.Position)
	tk.Type = token.StringType
	return ast.String(tk)
}

// plainScalar reports whether n is an unquoted scalar written as it reads.
func plainScalar(n ast.Node) bool {
	switch n.(type) {
	case *ast.StringNode, *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
	default:
		return false
	}
	tk := n.GetToken()
	return tk.Type != token.SingleQuoteType && tk.Type != token.DoubleQuoteType &&
		strings.TrimSpace(tk.Origin) == tk.Value
}

func keyString(k ast.MapKeyNode) string {
	switch k := k.(type) {
	case *ast.StringNode:
		return k.Value
	case *ast.MappingKeyNode:
		if s, ok := k.Value.(*ast.StringNode); ok {
			return s.Value
		}
		if k.Value != nil && k.Value.GetToken() != nil {
			return k.Value.GetToken().Value
		}
	}
	if tk := k.GetToken(); tk != nil {
		return tk.Value
	}
	return k.String()
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// keySegment renders a map key as part of a path: .request_refund, or
// ["odd key"] when the key would be ambiguous written plainly.
func keySegment(key string) string {
	if plainKey.MatchString(key) {
		return "." + key
	}
	return "[" + strconv.Quote(key) + "]"
}

func joinKey(path, key string) string {
	seg := keySegment(key)
	if path == "" && seg[0] == '.' {
		return seg[1:]
	}
	return path + seg
}

func line(tk *token.Token) int {
	if tk == nil || tk.Position == nil {
		return 0
	}
	return tk.Position.Line
}

// line finds where path is written: its key, else its value, else the nearest
// enclosing field that exists (a missing field is reported at its parent).
func (d *document) line(path string) int {
	for p := path; ; {
		if k, ok := d.keys[p]; ok {
			if l := line(k.GetToken()); l > 0 {
				return l
			}
		}
		if v, ok := d.values[p]; ok && p != "" {
			if l := line(v.GetToken()); l > 0 {
				return l
			}
		}
		parent := parentPath(p)
		if parent == p {
			return 0
		}
		p = parent
	}
}

// parentPath strips the last segment: a.b[0] → a.b, a.b → a, a → "".
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// keysInOrder returns m's keys in the order the file writes them under path, so
// that the first problem reported is the first in the file.
func keysInOrder[V any](d *document, path string, m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		la, lb := d.line(joinKey(path, a)), d.line(joinKey(path, b))
		if la != lb {
			return la - lb
		}
		return strings.Compare(a, b)
	})
	return keys
}

// yamlError rewrites the YAML library's errors in the config's own terms: the
// field path instead of Go struct names, and what is expected.
func yamlError(name string, doc *document, err error) error {
	var ye yaml.Error
	if !errors.As(err, &ye) {
		return &Error{File: name, Err: err}
	}
	tk := ye.GetToken()
	e := &Error{File: name, Line: line(tk)}
	var path string
	var pathKnown bool
	if doc != nil && tk != nil {
		path, pathKnown = doc.tokPath[tk]
	}

	var unknown *yaml.UnknownFieldError
	var typeErr *yaml.TypeError
	var nodeErr *yaml.UnexpectedNodeTypeError
	var overflow *yaml.OverflowError
	switch {
	case errors.As(err, &unknown):
		owner := path
		if doc != nil && tk != nil {
			if o, ok := doc.keyOwner[tk]; ok {
				owner = o
			}
		}
		e.Path = owner
		e.Err = unknownField(owner, tk)
	case errors.As(err, &typeErr):
		e.Path = path
		e.Err = fmt.Errorf("must be %s, got %s", expectedKind(typeErr.DstType), doc.describe(tk))
	case errors.As(err, &nodeErr):
		e.Path = path
		e.Err = fmt.Errorf("must be %s, got %s", nodeTypeName(nodeErr.Expected), doc.describe(tk))
	case errors.As(err, &overflow):
		e.Path = path
		e.Err = fmt.Errorf("number %s is out of range", overflow.SrcNum)
	default:
		if pathKnown {
			e.Path = path
		}
		e.Err = errors.New(ye.GetMessage())
	}
	return e
}

// secretFields are names someone might try to put in the file.
var secretFields = []string{"token", "bot_token", "signing_secret", "secret", "client_secret", "app_token"}

func unknownField(owner string, tk *token.Token) error {
	field := ""
	if tk != nil {
		field = tk.Value
	}
	if owner == "slack" && slices.Contains(secretFields, field) {
		return fmt.Errorf("%q does not belong in the file: secrets come from the environment (SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET)", field)
	}
	if known := knownFields(owner); len(known) > 0 {
		return fmt.Errorf("unknown field %q (known: %s)", field, strings.Join(known, ", "))
	}
	return fmt.Errorf("unknown field %q", field)
}

// knownFields lists the fields the file may have at path, read from the
// fileConfig types so the list cannot drift from the decoder.
func knownFields(path string) []string {
	t := reflect.TypeFor[fileConfig]()
	for _, seg := range splitPath(path) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case seg == "[]" && t.Kind() == reflect.Slice, t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			f, ok := fieldByTag(t, seg)
			if !ok {
				return nil
			}
			t = f.Type
		default:
			return nil
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for f := range t.Fields() {
		out = append(out, f.Tag.Get("yaml"))
	}
	return out
}

func fieldByTag(t reflect.Type, tag string) (reflect.StructField, bool) {
	for f := range t.Fields() {
		if f.Tag.Get("yaml") == tag {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// splitPath splits policy.rules[0].approval into policy, rules, [], approval;
// a quoted map key (["a.b"]) is one segment.
func splitPath(p string) []string {
	var out []string
	for p != "" {
		switch {
		case p[0] == '.':
			p = p[1:]
		case strings.HasPrefix(p, `["`):
			if key, err := strconv.QuotedPrefix(p[1:]); err == nil {
				unq, _ := strconv.Unquote(key)
				out = append(out, unq)
				p = strings.TrimPrefix(p[1+len(key):], "]")
				continue
			}
			return out
		case p[0] == '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return out
			}
			out = append(out, "[]")
			p = p[end+1:]
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			out = append(out, p[:end])
			p = p[end:]
		}
	}
	return out
}

func expectedKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "text"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

func nodeTypeName(t ast.NodeType) string {
	switch t {
	case ast.SequenceType:
		return "a list"
	case ast.MappingType, ast.MappingValueType:
		return "a mapping"
	}
	return t.YAMLName()
}

// describe says what the file has where tk is: a list, a mapping, or the text.
func (d *document) describe(tk *token.Token) string {
	if tk == nil {
		return "something else"
	}
	if d != nil {
		if p, ok := d.tokPath[tk]; ok {
			switch d.values[p].(type) {
			case *ast.SequenceNode:
				return "a list"
			case ast.MapNode:
				return "a mapping"
			case *ast.NullNode:
				return "nothing"
			}
		}
	}
	return strconv.Quote(tk.Value)
}
