package metrics

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// fakeExecutor answers every call with err.
type fakeExecutor struct{ err error }

func (f fakeExecutor) Check(context.Context, record.Action) error { return nil }
func (f fakeExecutor) Execute(context.Context, string, record.Action) (record.Receipt, error) {
	return record.Receipt{}, f.err
}
func (f fakeExecutor) Lookup(context.Context, string) (record.Receipt, bool, error) {
	return record.Receipt{}, false, nil
}

// fakeCallExecutor wants the whole call.
type fakeCallExecutor struct{ fakeExecutor }

func (f fakeCallExecutor) ExecuteCall(context.Context, workflow.Call) (record.Receipt, error) {
	return record.Receipt{}, f.err
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
		if _, err := plain.Execute(t.Context(), "k", record.Action{}); err != tc.err {
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

// TestOutboxBacklogByKind: every undelivered row counts, under its kind, a
// callback as much as a Slack message; delivered rows do not.
func TestOutboxBacklogByKind(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "signoff.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	err = st.Update(context.Background(), func(ctx context.Context, tx storage.Tx) error {
		for _, k := range []record.OutboxKind{"callback", "callback", "slack.post", "callback"} {
			m := &record.OutboxMessage{RunID: "run-1", Kind: k, NextAttempt: now.Add(time.Hour), CreatedAt: now.Add(-time.Minute)}
			if err := tx.EnqueueOutbox(ctx, m); err != nil {
				return err
			}
			if k == "callback" && m.ID == 4 {
				m.DeliveredAt = now
				if err := tx.UpdateOutbox(ctx, m); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m := New("test")
	if err := m.Refresh(context.Background(), engineOn(t, st), now); err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]float64{"callback": 2, "slack.post": 1} {
		if got := testutil.ToFloat64(m.outboxBacklog.WithLabelValues(kind)); got != want {
			t.Errorf("backlog of %s = %v, want %v", kind, got, want)
		}
	}
	for kind, want := range map[string]float64{"callback": 60, "slack.post": 60} {
		if got := testutil.ToFloat64(m.outboxOldest.WithLabelValues(kind)); got != want {
			t.Errorf("oldest %s = %v s, want %v", kind, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.outboxOldest); n != 2 {
		t.Errorf("%d oldest-age series, want one per kind waiting (2)", n)
	}
}

// TestRemindersAreCounted: each reminded transition counts once; other
// transitions do not.
func TestRemindersAreCounted(t *testing.T) {
	m := New("test")
	for _, ev := range []record.Event{record.EventReminded, record.EventExtended, record.EventReminded} {
		if _, err := m.Hook().OnTransition(t.Context(), &workflow.Transition{Event: ev, Run: &record.Run{}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(m.reminders); got != 2 {
		t.Fatalf("reminders_total = %v, want 2", got)
	}
}

// TestEscalationsAreCounted: each escalated transition counts once.
func TestEscalationsAreCounted(t *testing.T) {
	m := New("test")
	for _, ev := range []record.Event{record.EventEscalated, record.EventReminded, record.EventEscalated} {
		if _, err := m.Hook().OnTransition(t.Context(), &workflow.Transition{Event: ev, Run: &record.Run{}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(m.escalations); got != 2 {
		t.Fatalf("escalations_total = %v, want 2", got)
	}
}

// TestForcedApprovalsAreCounted: each policy_bypassed transition counts
// once, and is not counted as a decision.
func TestForcedApprovalsAreCounted(t *testing.T) {
	m := New("test")
	for _, ev := range []record.Event{record.EventPolicyBypassed, record.EventEscalated, record.EventPolicyBypassed} {
		if _, err := m.Hook().OnTransition(t.Context(), &workflow.Transition{Event: ev, Run: &record.Run{}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(m.breakGlass); got != 2 {
		t.Fatalf("break_glass_total = %v, want 2", got)
	}
}
