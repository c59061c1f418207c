package workflow_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/workflow"
)

// TestShowValueSaysTheType: every value reads as the JSON it is, so that a
// string never passes for a number, a boolean, null or an object, and a
// number reads as it was written.
func TestShowValueSaysTheType(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`false`, `false`},
		{`"false"`, `"false"`},
		{`10`, `10`},
		{`"10"`, `"10"`},
		{`119.00`, `119.00`},
		{`null`, `null`},
		{`"null"`, `"null"`},
		{`""`, `""`},
		{`{"x":1}`, `{"x":1}`},
		{`"{\"x\":1}"`, `"{\"x\":1}"`},
		{` { "b" : [ 1 , "1" ], "a" : true } `, `{"a":true,"b":[1,"1"]}`},
		{`"line\nbreak\ttab \\ back"`, `"line\nbreak\ttab \\ back"`},
		{`"\u001b[2K\u202e"`, `"\u001b[2K\u202e"`},
		{`{"a":1,"a":2}`, `(not JSON) {"a":1,"a":2}`},
		{"\"\xff\"", `(not JSON) "\xff"`},
		{``, `(not JSON) `},
	} {
		if got := show.Value(json.RawMessage(tc.in)); got != tc.want {
			t.Errorf("ShowValue(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestRedactionReadsOnlyAsHidden: a hidden field reads "[redacted]", and an
// argument may not hold that text at any depth, so that what reads as hidden
// always is: the refusal names the field.
func TestRedactionReadsOnlyAsHidden(t *testing.T) {
	spec, err := workflow.NewActionSpec("a", nil, nil, []string{"token", "card.number"})
	if err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"token":"tok-1","card":{"number":"4242","exp":"12/30"},"note":"ok"}`)
	shown, err := spec.Redacted(args)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"card":{"exp":"12/30","number":"[redacted]"},"note":"ok","token":"[redacted]"}`
	if got := show.Value(shown); got != want {
		t.Errorf("ShowValue(redacted) = %s, want %s", got, want)
	}
	for _, tc := range []struct{ args, field string }{
		{`{"note":"[redacted]"}`, "note"},
		{`{"card":{"number":"[redacted]"}}`, "card.number"},
		{`{"items":[{"sku":"A"},{"sku":"[redacted]"}]}`, "items[1].sku"},
	} {
		err := spec.Validate(json.RawMessage(tc.args))
		var ae *policy.ArgsError
		if !errors.As(err, &ae) || len(ae.Problems) != 1 || ae.Problems[0].Path != tc.field {
			t.Errorf("Validate(%s) = %v, want a refusal of %s", tc.args, err, tc.field)
		}
	}
	if err := spec.Validate(json.RawMessage(`{"note":"[redacted] by the customer"}`)); err != nil {
		t.Errorf("a note that only mentions it is refused: %v", err)
	}
}

// TestShowStringReadsApart: strings that look alike, or that an escaping
// without a doubled backslash would merge, read apart, in printable ASCII
// without a backtick, & < or >, which Slack acts on inside a code span.
func TestShowStringReadsApart(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"`", `"\u0060"`},
		{"\u02cb", `"\u02cb"`},
		{`\u0060`, `"\\u0060"`},
		{"amount", `"amount"`},
		{"\u0430mount", `"\u0430mount"`},
		{"amount\ufe0f", `"amount\ufe0f"`},
		{"amount\u00a0", `"amount\u00a0"`},
		{"caf\u00e9", `"caf\u00e9"`},
		{"cafe\u0301", `"cafe\u0301"`},
		{"<@U0LEAD0001> &amp;", `"\u003c@U0LEAD0001\u003e \u0026amp;"`},
		{"\U0001F600", `"\ud83d\ude00"`},
		{"\ufffd", `"\ufffd"`},
		{"\xff", `"\xff"`},
		{"\x1b\x7f\u0085", `"\u001b\u007f\u0085"`},
	} {
		if got := show.String(tc.in); got != tc.want {
			t.Errorf("ShowString(%+q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if got := show.Value(json.RawMessage("{\"`\":\"<b>\"}")); got != `{"\u0060":"\u003cb\u003e"}` {
		t.Errorf("keys and values inside an object: %s", got)
	}
}

// TestRedactedViewHidesARedactedValueWherever: what a redact: field holds
// is hidden wherever the run shows it: a receipt's echo at any depth (by the
// field's path, whatever the value there, and by value), a number, an
// error, a check, the summary, the evidence, another argument; what no
// redact: field holds is left as it was. An action the config does not know
// has every value of its arguments hidden.
func TestRedactedViewHidesARedactedValueWherever(t *testing.T) {
	deploy, err := workflow.NewActionSpec("deploy", nil, nil, []string{"token", "card.number"})
	if err != nil {
		t.Fatal(err)
	}
	find := func(name string) (*workflow.ActionSpec, bool) { return deploy, name == "deploy" }
	const tok = "tok-Q7w1"
	v := &workflow.RunView{
		Summary: "deploy api with " + tok,
		Reason:  "refused by the target: token " + tok + " expired",
		Actions: []record.Action{
			{Name: "deploy", Args: json.RawMessage(`{"service":"api","token":"` + tok + `","card":{"number":4242424242424242},"note":"` + tok + `"}`)},
			{Name: "unknown", Args: json.RawMessage(`{"ticket":"T-99 secret"}`)},
		},
		Evidence: []record.Evidence{{Source: "vault", Data: json.RawMessage(`{"found":"` + tok + `","other":"kept"}`)}},
		Checks:   []record.Check{{Name: "deploy", Error: "check saw " + tok}},
		Operations: []workflow.OperationView{{Action: "deploy", Error: "first try: " + tok + " rejected",
			Receipt: json.RawMessage(`{"id":"d-1","detail":{"echo":{"request":{"token":"` + tok + `","card":{"number":4242424242424242}}},` +
				`"refreshed":{"token":"tok-NEW-2"},"cards":[{"card":{"number":"5555"}}],"log":["used ` + tok + `","for T-99 secret"],"n":4242424242424242,"service":"api"}}`)}},
		Decisions: []workflow.DecisionView{{Reason: "ok with " + tok, Edited: json.RawMessage(`{"service":"api","token":"` + tok + `"}`)}},
	}
	before, _ := json.Marshal(v)
	out, err := json.Marshal(workflow.RedactedView(v, find))
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, secret := range []string{tok, "4242424242424242", "tok-NEW-2", "5555", "T-99 secret"} {
		if strings.Contains(got, secret) {
			t.Errorf("%s is shown:\n%s", secret, got)
		}
	}
	for _, kept := range []string{`"id":"d-1"`, `"service":"api"`, `"other":"kept"`, `"used [redacted]"`, `deploy api with [redacted]`,
		`token [redacted] expired`, `check saw [redacted]`, `"note":"[redacted]"`, `"n":"[redacted]"`} {
		if !strings.Contains(got, kept) {
			t.Errorf("%s is not shown:\n%s", kept, got)
		}
	}
	if after, _ := json.Marshal(v); string(after) != string(before) {
		t.Errorf("the view itself was changed:\n%s", after)
	}
}
