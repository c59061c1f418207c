package policy

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/record"
)

// FieldChange is one argument field that an edit changed.
type FieldChange struct {
	// Action is the index of the action whose arguments changed.
	Action int `json:"action"`
	// Field is the field's key, or keys joined by dots for a field inside an
	// object; "" for arguments that could not be read field by field.
	Field string `json:"field"`
	// From and To are the field's value before and after, as JSON; nil
	// where the field was absent.
	From json.RawMessage `json:"from,omitempty"`
	To   json.RawMessage `json:"to,omitempty"`
}

// ChangedFields lists the argument fields that differ between two versions
// of a proposal's actions (before an approver's edit and after it), action by
// action and by key. Objects are compared key by key; any other value, an
// array too, is one field.
func ChangedFields(before, after []record.Action) []FieldChange {
	var out []FieldChange
	for i := range max(len(before), len(after)) {
		var b, a json.RawMessage
		if i < len(before) {
			b = before[i].Args
		}
		if i < len(after) {
			a = after[i].Args
		}
		bv, berr := jsonvalue.Decode(orEmpty(b), jsonvalue.Exact)
		av, aerr := jsonvalue.Decode(orEmpty(a), jsonvalue.Exact)
		if berr != nil || aerr != nil {
			if !bytes.Equal(b, a) {
				out = append(out, FieldChange{Action: i, From: b, To: a})
			}
			continue
		}
		diffValue(&out, i, "", bv, av, true, true)
	}
	return out
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

// diffValue appends the changes from b to a at path; hasB and hasA say
// whether the field was there at all.
func diffValue(out *[]FieldChange, action int, path string, b, a any, hasB, hasA bool) {
	bm, bok := b.(map[string]any)
	am, aok := a.(map[string]any)
	if bok && aok {
		keys := slices.Collect(maps.Keys(bm))
		for k := range am {
			if _, ok := bm[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			bv, hb := bm[k]
			av, ha := am[k]
			diffValue(out, action, sub, bv, av, hb, ha)
		}
		return
	}
	var from, to json.RawMessage
	if hasB {
		from = jsonvalue.Encode(b)
	}
	if hasA {
		to = jsonvalue.Encode(a)
	}
	if hasB == hasA && bytes.Equal(from, to) {
		return
	}
	*out = append(*out, FieldChange{Action: action, Field: path, From: from, To: to})
}

// Hides says whether showing the values of field (as FieldChange names it)
// would show a redact: field: field is one, lies inside one or holds one
// (an object or array under it); "" holds them all.
func (s *ActionSpec) Hides(field string) bool {
	for _, r := range s.Redact {
		if field == "" || r == field || strings.HasPrefix(field, r+".") || strings.HasPrefix(r, field+".") {
			return true
		}
	}
	return false
}
