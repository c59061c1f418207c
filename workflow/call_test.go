package workflow_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// callLedger is the ledger for an executor that wants the whole call, as a
// webhook does; it remembers every call it was given.
type callLedger struct {
	*ledger
	calls []workflow.Call
}

func (c *callLedger) ExecuteCall(ctx context.Context, call workflow.Call) (record.Receipt, error) {
	c.calls = append(c.calls, call)
	return c.Execute(ctx, call.Key, call.Action)
}

func TestExecuteCallCarriesTheRunFingerprintApproversAndAttempt(t *testing.T) {
	h := newHarness(t)
	cl := &callLedger{ledger: h.target}
	h.build(h.store, testPolicy(t, "rev-1", h.roles), func(c *workflow.Config) {
		spec, err := workflow.NewActionSpec("request_refund", []byte(refundSchema), cl, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Actions = map[string]*workflow.ActionSpec{"request_refund": spec}
	})
	h.target.failNext = []error{workflow.Transient(errors.New("connection refused"))}
	run := h.submit(refund("PAY-1", 119))
	got, err := h.approve(run.ID, "U0LEAD0001")
	if err != nil || got.Status != record.StatusDone {
		t.Fatalf("approve: %v %+v", err, got)
	}
	if len(cl.calls) != 2 {
		t.Fatalf("calls = %+v, want 2", cl.calls)
	}
	for i, c := range cl.calls {
		if c.Key != run.ID+"/1" || c.RunID != run.ID || c.Fingerprint != got.Fingerprint || c.Fingerprint == "" ||
			!slices.Equal(c.ApprovedBy, []string{"U0LEAD0001"}) || c.Attempt != i+1 || c.Action.Name != "request_refund" {
			t.Errorf("call %d = %+v", i+1, c)
		}
	}
}

func TestRetryAfterIsWaitedBeforeTheNextAttempt(t *testing.T) {
	tests := []struct {
		name     string
		asked    time.Duration
		atLeast  time.Duration
		atMostAt time.Duration
	}{
		{"the target's wait", 40 * time.Second, 40 * time.Second, 41 * time.Second},
		{"capped", 24 * time.Hour, workflow.MaxRetryAfter, workflow.MaxRetryAfter + time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.target.failNext = []error{workflow.RetryAfter(errors.New("429"), tt.asked)}
			start := h.clock.Now()
			run := h.run(refund("PAY-2", 5))
			if run.Status != record.StatusDone || len(h.target.Effects()) != 1 {
				t.Fatalf("status %s effects %v", run.Status, h.target.Effects())
			}
			if waited := h.clock.Now().Sub(start); waited < tt.atLeast || waited > tt.atMostAt {
				t.Fatalf("waited %v, want between %v and %v", waited, tt.atLeast, tt.atMostAt)
			}
		})
	}
}

// TestLookupDownForAWhileIsAskedAgain: a register that cannot say what
// became of an attempt is asked again, with a growing backoff, until the
// action's reconcile budget (counted from the attempt) is spent; the last
// ask is made when it ends, and only then is the outcome unprovable.
func TestLookupDownForAWhileIsAskedAgain(t *testing.T) {
	tests := []struct {
		name       string
		down       int
		within     time.Duration // the action's reconcile budget; 0: the default
		wantStatus record.Status
		wantAsked  int           // 0: not checked
		wantWaited time.Duration // on the engine's clock
		wantReason string
	}{
		{name: "back before the budget", down: 2, wantStatus: record.StatusDone, wantAsked: 3, wantWaited: 400 * time.Millisecond},
		{name: "down past the default budget", down: 1 << 20, wantStatus: record.StatusNeedsAttention,
			wantWaited: workflow.DefaultReconcileWithin, wantReason: "the target did not say within 10m0s"},
		{name: "down past a budget of 30m", down: 1 << 20, within: 30 * time.Minute, wantStatus: record.StatusNeedsAttention,
			wantWaited: 30 * time.Minute, wantReason: "the target did not say within 30m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *workflow.Config) { c.Actions["request_refund"].ReconcileWithin = tt.within })
			h.target.afterFail = []error{errors.New("timeout")} // it happened; the answer was lost
			h.target.lookupDown = tt.down
			start := h.clock.Now()
			run := h.run(refund("PAY-2", 5))
			if run.Status != tt.wantStatus || !strings.Contains(run.Reason, tt.wantReason) {
				t.Fatalf("status %s (%s), want %s (%s)", run.Status, run.Reason, tt.wantStatus, tt.wantReason)
			}
			if e := h.target.Effects(); len(e) != 1 {
				t.Fatalf("effects %v, want one", e)
			}
			if tt.wantAsked != 0 && h.target.lookups != tt.wantAsked {
				t.Fatalf("lookups %d, want %d", h.target.lookups, tt.wantAsked)
			}
			if waited := h.clock.Now().Sub(start); waited != tt.wantWaited {
				t.Fatalf("waited %v, want %v", waited, tt.wantWaited)
			}
		})
	}
}
