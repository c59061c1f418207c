package workflow_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/internal/texttest"
	"github.com/signoff-dev/signoff/workflow"
)

// argProblems validates args and returns "path: reason" for each problem.
func argProblems(t *testing.T, spec *workflow.ActionSpec, args string) []string {
	t.Helper()
	err := spec.Validate(json.RawMessage(args))
	if err == nil {
		return nil
	}
	var ae *policy.ArgsError
	if !errors.As(err, &ae) {
		t.Fatalf("Validate(%s): %v, want an *ArgsError", args, err)
	}
	var out []string
	for _, p := range ae.Problems {
		out = append(out, p.String())
	}
	return out
}

// TestLookalikeKeysAreRefused: two keys of one look-alike group of the
// hostile corpus (a variation selector, a trailing or no-break space, a
// zero-width space, a Cyrillic а, another case, NFD and NFC, hyphens, l and
// 1) are refused side by side, at the top and nested, naming the field.
func TestLookalikeKeysAreRefused(t *testing.T) {
	spec, err := workflow.NewActionSpec("a", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range texttest.LookalikeKeys(t) {
		for i := range g {
			for j := range g {
				if i == j {
					continue
				}
				a, _ := json.Marshal(g[i])
				b, _ := json.Marshal(g[j])
				for _, wrap := range []struct{ args, at string }{
					{fmt.Sprintf(`{%s:1,%s:2}`, a, b), ""},
					{fmt.Sprintf(`{"card":{%s:1,%s:2}}`, a, b), "card"},
					{fmt.Sprintf(`{"items":[{},{%s:1,%s:2}]}`, a, b), "items[1]"},
				} {
					probs := argProblems(t, spec, wrap.args)
					if len(probs) == 0 {
						t.Errorf("%s is accepted", wrap.args)
						continue
					}
					for _, p := range probs {
						if !strings.HasPrefix(p, wrap.at) || strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r >= 0x7f }) {
							t.Errorf("%s: the problem %q does not name the field under %q in printable ASCII", wrap.args, p, wrap.at)
						}
					}
				}
			}
		}
	}
}

// TestKeysMustBeVisibleAndNFC: a key that is not NFC, holds an invisible or
// non-printing character, or starts or ends with a space is refused on its
// own, at any depth, naming the field and the character; a key in another
// script, or capitalised, is fine on its own.
func TestKeysMustBeVisibleAndNFC(t *testing.T) {
	spec, err := workflow.NewActionSpec("a", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ key, want string }{
		{"amount\ufe0f", `["amount\ufe0f"]: key "amount\ufe0f" holds an invisible or non-printing character (U+FE0F)`},
		{"amount\u200b", `(U+200B)`},
		{"amount\u00a0", `(U+00A0)`},
		{"amount\u3164", `(U+3164)`},
		{"amount\u202e", `(U+202E)`},
		{"amount\t", `(U+0009)`},
		{"amount ", `["amount "]: key "amount " starts or ends with a space`},
		{" amount", `starts or ends with a space`},
		{"cafe\u0301", `["cafe\u0301"]: key "cafe\u0301" is not in Unicode's composed form (NFC): write it "caf\u00e9"`},
		{"\u0430mount", ""},
		{"Amount", ""},
		{"caf\u00e9", ""},
		{"montant d\u00fb", ""},
		{"\u91d1\u984d", ""},
	} {
		for _, wrap := range []string{`{%s:1}`, `{"card":{"items":[{%s:1}]}}`} {
			k, _ := json.Marshal(tc.key)
			args := fmt.Sprintf(wrap, k)
			got := argProblems(t, spec, args)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("%s is refused: %v", args, got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("%s: %v, want one problem with %s", args, got, tc.want)
			case tc.want != "" && wrap != `{%s:1}` && !strings.HasPrefix(got[0], "card.items[0]["):
				t.Errorf("%s: %v does not name the nested field", args, got)
			}
		}
	}
}

// TestLookalikeKeysASchemaNamesAreFlagged: keys that read alike but that the
// schema names both (at the top, or in a nested object through $ref) are
// accepted, and LookalikeKeys lists them for every surface to flag.
func TestLookalikeKeysASchemaNamesAreFlagged(t *testing.T) {
	schema := `{"type":"object","properties":{"id":{"type":"string"},"ID":{"type":"string"},
		"items":{"type":"array","items":{"$ref":"#/$defs/item"}}},
		"$defs":{"item":{"type":"object","properties":{"sku":{},"SKU":{}}}}}`
	spec, err := workflow.NewActionSpec("a", []byte(schema), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const args = `{"ID":"A","id":"a","items":[{"SKU":1,"sku":2}]}`
	if got := argProblems(t, spec, args); got != nil {
		t.Errorf("keys the schema names are refused: %v", got)
	}
	want := [][]string{{"ID", "id"}, {"items[0].SKU", "items[0].sku"}}
	if got := policy.LookalikeKeys(json.RawMessage(args)); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("LookalikeKeys = %q, want %q", got, want)
	}
	// What the schema does not name is refused still.
	if got := argProblems(t, spec, `{"ID":"A","id":"a","items":[{"Sku":1,"sku":2}]}`); len(got) != 1 || !strings.HasPrefix(got[0], "items[0].sku: ") {
		t.Errorf("a look-alike the schema does not name: %v", got)
	}
}
