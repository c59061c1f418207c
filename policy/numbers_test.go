package policy_test

import (
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/internal/texttest"
	"github.com/signoff-dev/signoff/policy"
)

// TestNumbersAFloatDoesNotHoldAreRefused: a number of the hostile corpus
// that a 64-bit float does not hold exactly (past 2^53, out of range, more
// digits than it keeps) is refused at any depth, naming the field and the
// number as written; one it holds is taken.
func TestNumbersAFloatDoesNotHoldAreRefused(t *testing.T) {
	spec, err := policy.NewActionSpec("a", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range texttest.ChangedNumbers(t) {
		for _, tc := range []struct{ args, path string }{
			{`{"amount":` + string(n) + `}`, "amount: the number " + string(n) + " "},
			{`{"items":[{"qty":1},{"qty":` + string(n) + `}]}`, "items[1].qty: the number " + string(n) + " "},
		} {
			got := argProblems(t, spec, tc.args)
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.path) {
				t.Errorf("%s: %q, want one problem starting %q", tc.args, got, tc.path)
			}
		}
	}
	for _, n := range []string{"10", "10.0", "1e1", "-0", "0.1", "119.00", "9007199254740992", "1e308", "5e-324", "-1.5E-3",
		"123456789012345680000", "0.30000000000000004", "100.00000000000001"} {
		if got := argProblems(t, spec, `{"amount":`+n+`}`); got != nil {
			t.Errorf("%s is refused: %v", n, got)
		}
	}
	got := argProblems(t, spec, `{"amount":9007199254740993}`)
	if want := "amount: the number 9007199254740993 would be kept as 9007199254740992: "; len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestSchemaErrorsPrintNumbersAsWritten: the bound and the value a schema
// refuses are printed as written, not through a float.
func TestSchemaErrorsPrintNumbersAsWritten(t *testing.T) {
	spec, err := policy.NewActionSpec("a", []byte(`{"type":"object","properties":{
		"amount":{"type":"number","maximum":100.25,"multipleOf":0.01},
		"qty":{"type":"number","minimum":0.000001}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(argProblems(t, spec, `{"amount":119.000,"qty":0.0000005}`), "; ")
	for _, want := range []string{"amount: must be at most 100.25, got 119.000", "qty: must be at least 0.000001, got 0.0000005"} {
		if !strings.Contains(got, want) {
			t.Errorf("%s, want %q", got, want)
		}
	}
	if got := strings.Join(argProblems(t, spec, `{"amount":1.005}`), "; "); !strings.Contains(got, "must be a multiple of 0.01, got 1.005") {
		t.Errorf("%s", got)
	}
}
