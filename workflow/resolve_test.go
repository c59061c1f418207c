package workflow_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// unprovable makes a run whose refund's outcome cannot be proven: the call's
// answer is lost (after the effect when happened, before it otherwise) and
// the register refuses to say.
func unprovable(t *testing.T, h *harness, happened bool) *record.Run {
	t.Helper()
	if happened {
		h.target.afterFail = []error{errors.New("timeout")}
	} else {
		h.target.failNext = []error{errors.New("connection reset after sending")}
	}
	h.target.lookupErr = workflow.Permanent(errors.New("register refuses to say"))
	run := h.run(refund("PAY-2", 5))
	if run.Status != record.StatusNeedsAttention || !strings.Contains(run.Reason, "cannot be proven") {
		t.Fatalf("status %s (%s), want needs_attention over an unprovable outcome", run.Status, run.Reason)
	}
	h.target.lookupErr = nil
	return run
}

func resolve(h *harness, id, who string, choice record.Resolution, receipt string) (*record.Run, error) {
	in := workflow.ResolveInput{RunID: id, By: record.Person{ID: who}, Choice: choice, Reason: "checked the ledger", Via: "cli"}
	if receipt != "" {
		in.Receipt = json.RawMessage(receipt)
	}
	return h.engine.Resolve(ctx, in)
}

// resolvedEvent is the run's resolved audit event, decoded, or fails.
func resolvedEvent(t *testing.T, h *harness, id string) (actor string, detail map[string]string) {
	t.Helper()
	evs, err := h.engine.AuditLog(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Action == record.EventResolved {
			if err := json.Unmarshal(e.Detail, &detail); err != nil {
				t.Fatal(err)
			}
			return e.Actor, detail
		}
	}
	t.Fatalf("run %s has no resolved event", id)
	return "", nil
}

func TestResolveHappenedRecordsThePersonsReceipt(t *testing.T) {
	h := newHarness(t, withKeys(testKeys(t)))
	run := unprovable(t, h, true)
	got, err := resolve(h, run.ID, "U0MGR00001", record.ResolveHappened, `{"id": "RF-1", "note": "seen in the ledger"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusDone {
		t.Fatalf("status %s (%s), want done", got.Status, got.Reason)
	}
	v := h.get(run.ID)
	var rc record.Receipt
	if err := json.Unmarshal(v.Operations[0].Receipt, &rc); err != nil {
		t.Fatal(err)
	}
	var detail struct {
		By    string          `json:"resolved_by"`
		Given json.RawMessage `json:"given"`
	}
	if err := json.Unmarshal(rc.Detail, &detail); err != nil || rc.ID != "RF-1" || detail.By != "U0MGR00001" || !strings.Contains(string(detail.Given), "seen in the ledger") {
		t.Fatalf("receipt %s (%v), want RF-1 given by U0MGR00001", v.Operations[0].Receipt, err)
	}
	if v.Operations[0].Status != record.OpCommitted || len(h.target.Effects()) != 1 {
		t.Fatalf("operation %+v, effects %v", v.Operations[0], h.target.Effects())
	}
	actor, d := resolvedEvent(t, h, run.ID)
	if actor != "U0MGR00001" || d["choice"] != "happened" || d["reason"] != "checked the ledger" || d["key"] != run.ID+"/1" {
		t.Fatalf("resolved event by %s: %v", actor, d)
	}
	if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify after resolving: %+v, %v", rep, err)
	}
}

func TestResolveRetrySendsItAgainUnderTheSameKey(t *testing.T) {
	h := newHarness(t)
	run := unprovable(t, h, false)
	got, err := resolve(h, run.ID, "U0MGR00001", record.ResolveRetry, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusExecuting || got.LeaseOwner != "" {
		t.Fatalf("status %s, lease %q: want executing, free for a worker", got.Status, got.LeaseOwner)
	}
	if n, err := h.engine.Work(ctx, 1); err != nil || n != 1 {
		t.Fatalf("work: claimed %d, %v", n, err)
	}
	v := h.get(run.ID)
	if v.Status != record.StatusDone || len(h.target.Effects()) != 1 || !strings.Contains(h.target.Effects()[0], "key="+run.ID+"/1") {
		t.Fatalf("status %s (%s), effects %v: want done, once, under %s/1", v.Status, v.Reason, h.target.Effects(), run.ID)
	}
}

func TestResolveAbandonEndsItFailedNeverCancelled(t *testing.T) {
	h := newHarness(t)
	run := unprovable(t, h, false)
	got, err := resolve(h, run.ID, "U0MGR00001", record.ResolveAbandon, "")
	if err != nil {
		t.Fatal(err)
	}
	v := h.get(run.ID)
	if got.Status != record.StatusFailed || v.Status != record.StatusFailed || !strings.Contains(v.Reason, "abandoned by U0MGR00001: checked the ledger") {
		t.Fatalf("status %s (%q), want failed, abandoned", v.Status, v.Reason)
	}
	if v.Operations[0].Status != record.OpFailed || len(h.target.Effects()) != 0 {
		t.Fatalf("operation %+v, effects %v", v.Operations[0], h.target.Effects())
	}
	if n, err := h.engine.Work(ctx, 5); err != nil || n != 0 || h.target.calls != 1 {
		t.Fatalf("after abandoning: claimed %d, %v, %d calls", n, err, h.target.calls)
	}
}

func TestResolveRefusals(t *testing.T) {
	tests := []struct {
		name    string
		who     string
		choice  record.Resolution
		receipt string
		reason  string
		code    string
	}{
		{"not the highest role", "U0LEAD0001", record.ResolveRetry, "", "checked", record.CodeNoRole},
		{"no reason", "U0MGR00001", record.ResolveRetry, "", "", record.CodeInvalidInput},
		{"a receipt with a retry", "U0MGR00001", record.ResolveRetry, `{"id": "x"}`, "checked", record.CodeInvalidInput},
		{"a receipt that is not an object", "U0MGR00001", record.ResolveHappened, `["x"]`, "checked", record.CodeInvalidInput},
		{"an unknown choice", "U0MGR00001", "maybe", "", "checked", record.CodeInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			run := unprovable(t, h, false)
			before := h.snapshot(run.ID)
			in := workflow.ResolveInput{RunID: run.ID, By: record.Person{ID: tt.who}, Choice: tt.choice, Reason: tt.reason}
			if tt.receipt != "" {
				in.Receipt = json.RawMessage(tt.receipt)
			}
			_, err := h.engine.Resolve(ctx, in)
			wantRefused(t, err, tt.code)
			if after := h.snapshot(run.ID); after != before {
				t.Fatalf("a refused resolve changed the run:\n%s\n%s", before, after)
			}
		})
	}
	t.Run("a run that needs no attention", func(t *testing.T) {
		h := newHarness(t)
		run := h.run(refund("PAY-2", 5))
		_, err := resolve(h, run.ID, "U0MGR00001", record.ResolveAbandon, "")
		wantRefused(t, err, record.CodeNothingToResolve)
		if v := h.get(run.ID); v.Status != record.StatusDone {
			t.Fatalf("status %s", v.Status)
		}
	})
	t.Run("a role the config names", func(t *testing.T) {
		h := newHarness(t, func(c *workflow.Config) { c.ResolveRole = "team_lead" })
		run := unprovable(t, h, false)
		if _, err := resolve(h, run.ID, "U0LEAD0001", record.ResolveAbandon, ""); err != nil {
			t.Fatalf("team_lead resolving with resolve role team_lead: %v", err)
		}
	})
}

func TestADamagedRunCanOnlyBeAbandonedAndStaysDamaged(t *testing.T) {
	h := newHarness(t, withKeys(testKeys(t)))
	run := unprovable(t, h, false)
	db, err := sqlite.OpenDB(h.path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE operations SET attempts = 9 WHERE run_id = ?`, run.ID); err != nil {
		t.Fatal(err)
	}
	db.Close()
	rep, err := h.engine.Verify(ctx)
	if err != nil || rep.OK() {
		t.Fatalf("verify before: %+v %v, want the damage found", rep, err)
	}
	before := len(rep.Damaged)

	for _, c := range []record.Resolution{record.ResolveHappened, record.ResolveRetry} {
		_, err := resolve(h, run.ID, "U0MGR00001", c, "")
		if r := wantRefused(t, err, record.CodeIntegrity); !strings.Contains(r.Msg, "only abandoning it") {
			t.Fatalf("%s: %v", c, r)
		}
	}
	if _, err := resolve(h, run.ID, "U0MGR00001", record.ResolveAbandon, ""); err != nil {
		t.Fatal(err)
	}
	v := h.get(run.ID)
	if v.Status != record.StatusFailed || !strings.Contains(v.Reason, "abandoned by U0MGR00001") || h.target.calls != 1 {
		t.Fatalf("status %s (%q), %d calls", v.Status, v.Reason, h.target.calls)
	}
	if rep, err := h.engine.Verify(ctx); err != nil || rep.OK() || len(rep.Damaged) < before {
		t.Fatalf("verify after abandoning: %+v %v, want the damage still shown", rep, err)
	}
	if actor, d := resolvedEvent(t, h, run.ID); actor != "U0MGR00001" || d["choice"] != "abandon" || d["damage"] == "" {
		t.Fatalf("resolved event by %s: %v", actor, d)
	}
}

// TestResumeAsksTheTargetAgainAboutAnUnprovenOutcome: a run handed to a
// person because its outcome could not be proven is not a dead end for
// resume: the target is asked again, and once it knows, the run carries on.
func TestResumeAsksTheTargetAgainAboutAnUnprovenOutcome(t *testing.T) {
	for _, happened := range []bool{true, false} {
		name := map[bool]string{true: "it happened", false: "it did not happen"}[happened]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.target.lookupErr = workflow.Permanent(errors.New("register refuses to say"))
			run := unprovable(t, h, happened)
			h.target.lookupErr = errors.New("still down")
			again, err := h.engine.Resume(ctx, run.ID)
			if err != nil || again.Status != record.StatusNeedsAttention {
				t.Fatalf("resume while the register is down: %s, %v", again.Status, err)
			}
			h.target.lookupErr = nil
			asked := h.target.lookups
			got, err := h.engine.Resume(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != record.StatusDone || h.target.lookups == asked || len(h.target.Effects()) != 1 {
				t.Fatalf("status %s (%s), lookups %d → %d, effects %v: want done, asked again, one effect",
					got.Status, got.Reason, asked, h.target.lookups, h.target.Effects())
			}
		})
	}
}
