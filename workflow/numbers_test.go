package workflow_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

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
