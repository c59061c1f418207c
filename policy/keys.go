package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/mtibben/confusables"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/show"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// An argument's key is what a person reads to know which value is which. Two
// keys that read the same (amount and amount with a variation selector, a
// trailing or no-break space, a Cyrillic а, NFD against NFC, Amount) would
// show as two rows an approver cannot tell apart, while the target reads
// only one of them. So keys must be in NFC without invisible or non-printing
// characters, and one object may not hold two keys that are confusable,
// unless its schema names both (then every surface says so, loudly).

// keyProblem says what is wrong with one key on its own, or "".
func keyProblem(k string) string {
	for _, r := range k {
		if invisibleInKey(r) {
			return fmt.Sprintf("key %s holds an invisible or non-printing character (U+%04X)", show.String(k), r)
		}
	}
	if strings.TrimSpace(k) != k {
		return fmt.Sprintf("key %s starts or ends with a space", show.String(k))
	}
	if !norm.NFC.IsNormalString(k) {
		return fmt.Sprintf("key %s is not in Unicode's composed form (NFC): write it %s", show.String(k), show.String(norm.NFC.String(k)))
	}
	return ""
}

// invisibleInKey reports whether r shows as nothing, or as something else
// than itself: controls, format characters (zero-width, bidi, tags), spaces
// other than the ASCII one, private use and unassigned code points,
// variation selectors and the other default-ignorable fillers.
func invisibleInKey(r rune) bool {
	return (!unicode.IsPrint(r) && r != ' ') || !show.AsIs(r) ||
		unicode.Is(unicode.Variation_Selector, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
}

// keySkeletons are what a key reads as: its Unicode TR39 skeleton
// (confusable characters mapped to one prototype, after NFKC), case folded,
// taken once from the key as written and once from it case folded first:
// folding first meets ID and id, skeletons first meet itemI and item1 (I
// and 1 both read as l). Keys that share one read alike.
func keySkeletons(k string) [2]string {
	n := norm.NFKC.String(k)
	return [2]string{foldCase(confusables.Skeleton(n)), foldCase(confusables.Skeleton(foldCase(n)))}
}

func foldCase(s string) string { return cases.Fold().String(s) }

// lookalikes groups the keys of one object that read alike, directly or
// through another key; keys that read like no other are left out. Each
// group and the groups are sorted.
func lookalikes(keys []string) [][]string {
	parent := make([]int, len(keys))
	root := func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
	first := map[string]int{}
	for i, k := range keys {
		parent[i] = i
		for _, sk := range keySkeletons(k) {
			if j, ok := first[sk]; ok {
				parent[root(i)] = root(j)
			} else {
				first[sk] = i
			}
		}
	}
	by := map[int][]string{}
	for i, k := range keys {
		by[root(i)] = append(by[root(i)], k)
	}
	var out [][]string
	for _, g := range by {
		if len(g) > 1 {
			slices.Sort(g)
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return out
}

// checkKeys adds a problem for every key under v, at any depth, that is
// wrong on its own, and for every key that reads like another of its object
// where the schema does not name both. at is v's path, loc its tokens.
func (s *ActionSpec) checkKeys(v any, at string, loc []any, ae *ArgsError) {
	switch c := v.(type) {
	case []any:
		for i, el := range c {
			s.checkKeys(el, at+"["+strconv.Itoa(i)+"]", append(slices.Clip(loc), i), ae)
		}
	case map[string]any:
		keys := make([]string, 0, len(c))
		for k := range c {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var good []string // a key refused on its own is no model for another
		for _, k := range keys {
			if p := keyProblem(k); p != "" {
				ae.Problems = append(ae.Problems, ArgProblem{Path: joinPath(at, k), Reason: p})
			} else {
				good = append(good, k)
			}
		}
		var declared map[string]bool
		for _, g := range lookalikes(good) {
			if declared == nil {
				declared = s.namesAt(loc)
			}
			if !slices.ContainsFunc(g, func(k string) bool { return !declared[k] }) {
				continue // the schema names each: shown, flagged, not refused
			}
			for _, k := range g[1:] {
				ae.Problems = append(ae.Problems, ArgProblem{Path: joinPath(at, k),
					Reason: fmt.Sprintf("key %s reads like %s (another case or a look-alike character): one object may not hold both", show.String(k), show.String(g[0]))})
			}
		}
		for _, k := range keys {
			s.checkKeys(c[k], joinPath(at, k), append(slices.Clip(loc), k), ae)
		}
	}
}

// namesAt lists the property names the schema declares for the object at
// loc (keys and array indexes from the arguments' top), through $ref,
// allOf, anyOf, oneOf, if, then, else, and the schemas of properties,
// pattern and additional properties and items on the way.
func (s *ActionSpec) namesAt(loc []any) map[string]bool {
	names := map[string]bool{}
	if s.schema == nil {
		return names
	}
	cur := expandSchemas([]*jsonschema.Schema{s.schema})
	for _, tok := range loc {
		var next []*jsonschema.Schema
		for _, sch := range cur {
			switch t := tok.(type) {
			case string:
				next = append(next, sch.Properties[t])
				for re, p := range sch.PatternProperties {
					if re.MatchString(t) {
						next = append(next, p)
					}
				}
				if p, ok := sch.AdditionalProperties.(*jsonschema.Schema); ok {
					next = append(next, p)
				}
				next = append(next, sch.UnevaluatedProperties)
			case int:
				if t < len(sch.PrefixItems) {
					next = append(next, sch.PrefixItems[t])
				}
				next = append(next, sch.Items2020, sch.UnevaluatedItems)
				switch it := sch.Items.(type) {
				case *jsonschema.Schema:
					next = append(next, it)
				case []*jsonschema.Schema:
					if t < len(it) {
						next = append(next, it[t])
					}
				}
				if p, ok := sch.AdditionalItems.(*jsonschema.Schema); ok {
					next = append(next, p)
				}
			}
		}
		cur = expandSchemas(next)
	}
	for _, sch := range cur {
		for n := range sch.Properties {
			names[n] = true
		}
	}
	return names
}

// expandSchemas is every schema that applies where one of from does.
func expandSchemas(from []*jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	seen := map[*jsonschema.Schema]bool{}
	var walk func(sch *jsonschema.Schema)
	walk = func(sch *jsonschema.Schema) {
		if sch == nil || seen[sch] {
			return
		}
		seen[sch] = true
		out = append(out, sch)
		walk(sch.Ref)
		if sch.DynamicRef != nil {
			walk(sch.DynamicRef.Ref)
		}
		for _, sub := range slices.Concat(sch.AllOf, sch.AnyOf, sch.OneOf, []*jsonschema.Schema{sch.If, sch.Then, sch.Else}) {
			walk(sub)
		}
		for _, sub := range sch.DependentSchemas {
			walk(sub)
		}
	}
	for _, sch := range from {
		walk(sch)
	}
	return out
}

// LookalikeKeys lists the keys of args, at any depth, that read like another
// key of their object, one group of paths (amount, items[0].sku, as
// refusals name fields) per set. Submit refuses them unless the schema names
// each, so every surface that shows arguments shows these groups as a
// warning beside them. Arguments that cannot be read have none.
func LookalikeKeys(args json.RawMessage) [][]string {
	v, err := jsonvalue.Decode(args, jsonvalue.Exact)
	if err != nil {
		return nil
	}
	var out [][]string
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch c := v.(type) {
		case []any:
			for i, el := range c {
				walk(el, at+"["+strconv.Itoa(i)+"]")
			}
		case map[string]any:
			keys := slices.Sorted(maps.Keys(c))
			for _, g := range lookalikes(keys) {
				paths := make([]string, len(g))
				for i, k := range g {
					paths[i] = joinPath(at, k)
				}
				out = append(out, paths)
			}
			for _, k := range keys {
				walk(c[k], joinPath(at, k))
			}
		}
	}
	walk(v, "")
	return out
}
