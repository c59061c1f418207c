package workflow_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/internal/texttest"
	"github.com/signoff-dev/signoff/workflow"
)

// TestNumbersAFloatDoesNotHoldAreRefused: a number of the hostile corpus
// that a 64-bit float does not hold exactly (past 2^53, out of range, more
// digits than it keeps) is refused at any depth, naming the field and the
// number as written; one it holds is taken.
func TestNumbersAFloatDoesNotHoldAreRefused(t *testing.T) {
	spec, err := workflow.NewActionSpec("a", nil, nil, nil)
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
	spec, err := workflow.NewActionSpec("a", []byte(`{"type":"object","properties":{
		"amount":{"type":"number","maximum":100.25,"multipleOf":0.01},
		"qty":{"type":"number","minimum":0.000001}}}`), nil, nil)
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

// callRecorder is a target that records every call it is sent.
type callRecorder struct{ calls []workflow.Call }

func (r *callRecorder) Check(context.Context, record.Action) error { return nil }
func (r *callRecorder) Execute(context.Context, string, record.Action) (record.Receipt, error) {
	panic("ExecuteCall is used")
}
func (r *callRecorder) ExecuteCall(_ context.Context, c workflow.Call) (record.Receipt, error) {
	r.calls = append(r.calls, c)
	return record.Receipt{ID: "r-1"}, nil
}
func (r *callRecorder) Lookup(context.Context, string) (record.Receipt, bool, error) {
	return record.Receipt{}, false, nil
}

// TestTheExecutorGetsTheFingerprintedNumbers: a proposal's numbers are
// stored in the canonical form the fingerprint covers, and the executor is
// sent exactly those bytes under that fingerprint: 1.1950e2 is approved and
// sent as 119.5, the same number.
func TestTheExecutorGetsTheFingerprintedNumbers(t *testing.T) {
	target := &callRecorder{}
	h := newHarness(t, func(c *workflow.Config) {
		spec, err := workflow.NewActionSpec("request_refund", []byte(refundSchema), target, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Actions = map[string]*workflow.ActionSpec{"request_refund": spec}
	})
	p := refund("PAY-1", 0)
	p.Actions[0].Args = json.RawMessage(`{"payment_id":"PAY-1","amount":1.1950e2}`)
	run := h.submit(p)
	v, err := h.engine.Get(t.Context(), run.ID)
	if err != nil || v.Gate == nil {
		t.Fatalf("%+v, %v", v, err)
	}
	if string(v.Actions[0].Args) != `{"amount":119.5,"payment_id":"PAY-1"}` {
		t.Fatalf("stored %s", v.Actions[0].Args)
	}
	if _, err := h.approve(run.ID, "U0LEAD0001"); err != nil {
		t.Fatal(err)
	}
	if len(target.calls) != 1 {
		t.Fatalf("%d calls", len(target.calls))
	}
	c := target.calls[0]
	fp, err := policy.Fingerprint(policy.FingerprintInput{RunID: v.ID, Actions: []record.Action{c.Action}, Evidence: v.Evidence, Risk: v.Gate.Risk, PolicyRevision: v.Gate.PolicyRevision})
	if err != nil || string(c.Action.Args) != string(v.Actions[0].Args) || fp != c.Fingerprint || fp != v.Fingerprint {
		t.Errorf("the executor got %s under fingerprint %s; stored %s under %s; its own fingerprint is %s (%v)",
			c.Action.Args, c.Fingerprint, v.Actions[0].Args, v.Fingerprint, fp, err)
	}
}
