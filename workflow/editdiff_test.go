package workflow_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/workflow"
)

// TestChangedFields: an edit is listed field by field, old → new, with
// nested objects by their dotted path and whatever is not an object whole.
func TestChangedFields(t *testing.T) {
	act := func(args string) []record.Action {
		return []record.Action{{Name: "request_refund", Args: json.RawMessage(args)}}
	}
	tests := []struct {
		name          string
		before, after []record.Action
		want          string
	}{
		{"one field", act(`{"amount":119,"currency":"CAD"}`), act(`{"amount":60,"currency":"CAD"}`), `0 amount 119 → 60`},
		{"numbers keep their text", act(`{"amount":119.00}`), act(`{"amount":60.50}`), `0 amount 119.00 → 60.50`},
		{"added and removed", act(`{"a":1,"b":"x"}`), act(`{"a":1,"c":true}`), `0 b "x" → -; 0 c - → true`},
		{"nested", act(`{"card":{"last4":"1234","exp":"12/30"}}`), act(`{"card":{"last4":"9999","exp":"12/30"}}`), `0 card.last4 "1234" → "9999"`},
		{"an array is one field", act(`{"items":[1,2]}`), act(`{"items":[1,3]}`), `0 items [1,2] → [1,3]`},
		{"nothing", act(`{"a":1}`), act(`{"a":1}`), ``},
		{"second action", append(act(`{"a":1}`), record.Action{Name: "x", Args: json.RawMessage(`{"b":1}`)}),
			append(act(`{"a":1}`), record.Action{Name: "x", Args: json.RawMessage(`{"b":2}`)}), `1 b 1 → 2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range policy.ChangedFields(tt.before, tt.after) {
				from, to := string(c.From), string(c.To)
				if c.From == nil {
					from = "-"
				}
				if c.To == nil {
					to = "-"
				}
				got = append(got, fmt.Sprintf("%d %s %s → %s", c.Action, c.Field, from, to))
			}
			if s := strings.Join(got, "; "); s != tt.want {
				t.Errorf("got %q, want %q", s, tt.want)
			}
		})
	}
}

// TestHides: a change is hidden when its field is redacted, lies inside a
// redacted field, or holds one.
func TestHides(t *testing.T) {
	spec, err := workflow.NewActionSpec("pay", nil, nil, []string{"token", "card.number"})
	if err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]bool{
		"token": true, "token.part": true, "card.number": true, "card": true, "": true,
		"card.exp": false, "amount": false, "tokens": false,
	} {
		if got := spec.Hides(field); got != want {
			t.Errorf("Hides(%q) = %v, want %v", field, got, want)
		}
	}
}
