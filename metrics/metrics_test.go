package metrics

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signoff-dev/signoff/workflow"
)

// fakeExecutor answers every call with err.
type fakeExecutor struct{ err error }

func (f fakeExecutor) Check(context.Context, workflow.Action) error { return nil }
func (f fakeExecutor) Execute(context.Context, string, workflow.Action) (workflow.Receipt, error) {
	return workflow.Receipt{}, f.err
}
func (f fakeExecutor) Lookup(context.Context, string) (workflow.Receipt, bool, error) {
	return workflow.Receipt{}, false, nil
}

// fakeCallExecutor wants the whole call.
type fakeCallExecutor struct{ fakeExecutor }

func (f fakeCallExecutor) ExecuteCall(context.Context, workflow.Call) (workflow.Receipt, error) {
	return workflow.Receipt{}, f.err
}

// TestExecutorOutcomes: each call is counted under the outcome the engine
// will act on, whichever interface the executor has.
func TestExecutorOutcomes(t *testing.T) {
	boom := errors.New("connection reset")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{workflow.Permanent(boom), "refused"},
		{workflow.Transient(boom), "retryable"},
		{boom, "unknown"},
	} {
		m := New("test")
		plain := m.Executor("refund", fakeExecutor{tc.err})
		if _, err := plain.Execute(t.Context(), "k", workflow.Action{}); err != tc.err {
			t.Fatalf("the error changed: %v", err)
		}
		call, ok := m.Executor("refund", fakeCallExecutor{fakeExecutor{tc.err}}).(workflow.CallExecutor)
		if !ok {
			t.Fatal("a CallExecutor lost ExecuteCall")
		}
		if _, err := call.ExecuteCall(t.Context(), workflow.Call{}); err != tc.err {
			t.Fatalf("the error changed: %v", err)
		}
		if got := testutil.ToFloat64(m.executions.WithLabelValues("refund", tc.want)); got != 2 {
			t.Errorf("%v: executions{outcome=%q} = %v, want 2", tc.err, tc.want, got)
		}
		if got := testutil.CollectAndCount(m.execSeconds); got != 1 {
			t.Errorf("%v: %d latency series, want 1", tc.err, got)
		}
	}
}

// TestLint: the exposition follows Prometheus' naming rules.
func TestLint(t *testing.T) {
	m := New("test")
	m.ObserveHTTP("/readyz", 200, 0)
	m.SlackError("chat.update", "ratelimited")
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
