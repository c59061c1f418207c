package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/storage/sqlstore"
	"github.com/signoff-dev/signoff/workflow"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
)

// tamperLatest rewrites the latest checkpoint of a run behind the engine's back,
// as someone with access to the database file could. With rehash the chain stays
// consistent, so only checks other than the hash can catch it.
func tamperLatest(h *harness, id string, edit func(st map[string]any), rehash bool) {
	h.t.Helper()
	rewriteLatest(h, id, func(b []byte) []byte {
		var st map[string]any
		if err := json.Unmarshal(b, &st); err != nil {
			h.t.Fatal(err)
		}
		edit(st)
		out, err := json.Marshal(st)
		if err != nil {
			h.t.Fatal(err)
		}
		return out
	}, rehash)
}

func rewriteLatest(h *harness, id string, edit func([]byte) []byte, rehash bool) {
	h.t.Helper()
	db, err := sqlite.OpenDB(h.path)
	if err != nil {
		h.t.Fatal(err)
	}
	defer db.Close()
	// The latest state as a whole, written back whole (without a base):
	// whoever can write the file can do that too.
	rows, err := db.Query(`SELECT run_id, seq, schema_version, state, prev_hash, created_at, base_seq FROM checkpoints WHERE run_id = ? ORDER BY seq`, id)
	if err != nil {
		h.t.Fatal(err)
	}
	var cps []*record.Checkpoint
	for rows.Next() {
		var c record.Checkpoint
		var at int64
		if err := rows.Scan(&c.RunID, &c.Seq, &c.SchemaVersion, &c.State, &c.PrevHash, &at, &c.BaseSeq); err != nil {
			h.t.Fatal(err)
		}
		c.State = sqlstore.StateOf(c.State) // stored compressed
		c.CreatedAt = time.UnixMilli(at).UTC()
		cps = append(cps, &c)
	}
	if err := rows.Close(); err != nil || len(cps) == 0 {
		h.t.Fatalf("read checkpoints of run %s: %d, %v", id, len(cps), err)
	}
	c := cps[len(cps)-1]
	whole, err := chain.Resolve(cps, len(cps)-1)
	if err != nil {
		h.t.Fatal(err)
	}
	c.State, c.BaseSeq = edit(whole), 0
	hash := "0000"
	if rehash {
		hash = record.CheckpointHash(c)
	}
	if _, err := db.Exec(`UPDATE checkpoints SET state = ?, hash = ?, base_seq = 0 WHERE run_id = ? AND seq = ?`, c.State, hash, c.RunID, c.Seq); err != nil {
		h.t.Fatal(err)
	}
}

func TestDamagedStateStopsOnlyThatRun(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(h *harness, id string)
		problem string
	}{
		{"duplicate key", func(h *harness, id string) {
			rewriteLatest(h, id, func(b []byte) []byte {
				return []byte(strings.Replace(string(b), `"status":`, `"status":"done","status":`, 1))
			}, true)
		}, "duplicate"},
		{"unknown field", func(h *harness, id string) {
			tamperLatest(h, id, func(st map[string]any) { st["approved_by_magic"] = true }, true)
		}, "unknown"},
		{"newer schema version", func(h *harness, id string) {
			tamperLatest(h, id, func(st map[string]any) { st["schema_version"] = record.SchemaVersion + 1 }, true)
		}, "newer than this build"},
		{"broken chain", func(h *harness, id string) {
			tamperLatest(h, id, func(st map[string]any) { st["summary"] = "quietly changed" }, false)
		}, "broken hash chain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			damaged := h.submit(refund("PAY-1", 119))
			healthy := h.submit(refund("PAY-1", 100))
			tt.damage(h, damaged.ID)

			rep, err := h.engine.Verify(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Damaged) != 1 || rep.Damaged[0].RunID != damaged.ID || !strings.Contains(rep.Damaged[0].Problem, tt.problem) {
				t.Fatalf("verify found %+v, want %s with %q", rep.Damaged, damaged.ID, tt.problem)
			}

			_, err = h.approve(damaged.ID, "U0LEAD0001")
			wantRefused(t, err, record.CodeIntegrity)
			v := h.get(damaged.ID)
			if v.Status != record.StatusNeedsAttention || !strings.Contains(v.Reason, tt.problem) {
				t.Fatalf("damaged run: status %s reason %q", v.Status, v.Reason)
			}
			if v.Problem == "" {
				t.Fatal("show does not name the problem")
			}
			// Resume does not guess either.
			got, err := h.engine.Resume(ctx, damaged.ID)
			if err != nil || got.Status != record.StatusNeedsAttention {
				t.Fatalf("resume damaged: %v %v", got, err)
			}

			// The other run carries on.
			if got, err := h.approve(healthy.ID, "U0LEAD0001"); err != nil || got.Status != record.StatusDone {
				t.Fatalf("healthy run: %v %v", got, err)
			}
			if e := h.target.Effects(); len(e) != 1 || !strings.Contains(e[0], "100.00") {
				t.Fatalf("effects %v", e)
			}
		})
	}
}

func TestAuditChainIsVerified(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	if _, err := h.approve(run.ID, "U0LEAD0001"); err != nil {
		t.Fatal(err)
	}
	rep, err := h.engine.Verify(ctx)
	if err != nil || !rep.OK() || rep.AuditEvents < 4 {
		t.Fatalf("verify %+v %v", rep, err)
	}
	db, err := sqlite.OpenDB(h.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Wherever the store keeps the event: a row of audit, or the row of
	// the checkpoint its transition wrote.
	if err := sqlite.EditAuditEvents(ctx, db, func(e *record.AuditEvent) bool {
		if e.Seq == 2 {
			e.Actor = "someone-else"
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	rep, err = h.engine.Verify(ctx)
	if err != nil || rep.OK() || !strings.Contains(rep.AuditProblem, "event 2") {
		t.Fatalf("verify after tamper %+v %v", rep, err)
	}
}

// crash is what a failpoint raises in these in-process tests; the real binary
// kills itself instead (see cmd/signoff's crash tests).
type crash string

func crashAt(name string) harnessOption {
	return func(c *workflow.Config) {
		c.Failpoint = func(at string) {
			if at == name {
				panic(crash(at))
			}
		}
	}
}

// survive runs f and recovers the simulated crash.
func survive(t *testing.T, f func()) (crashed bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crash); !ok {
				panic(r)
			}
			crashed = true
		}
	}()
	f()
	return false
}

func TestCrashAtEachBoundaryThenResume(t *testing.T) {
	for _, point := range []string{"before-decision-commit", "after-decision-commit", "after-intent", "after-effect", "after-receipt"} {
		t.Run(point, func(t *testing.T) {
			h := newHarness(t, crashAt(point))
			run := h.submit(refund("PAY-1", 119))
			crashed := survive(t, func() {
				if _, err := h.approve(run.ID, "U0LEAD0001"); err != nil {
					t.Fatal(err)
				}
			})
			if !crashed {
				t.Fatalf("failpoint %s never fired", point)
			}
			h.open(testPolicy(t, "rev-1", h.roles)) // a new process, no failpoint
			got, err := h.engine.Resume(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if point == "before-decision-commit" {
				// The decision never committed: the run still waits, and nothing ran.
				if got.Status != record.StatusWaitingApproval || len(h.get(run.ID).Decisions) != 0 || len(h.target.Effects()) != 0 {
					t.Fatalf("status %s effects %v", got.Status, h.target.Effects())
				}
				if got, err = h.approve(run.ID, "U0LEAD0001"); err != nil {
					t.Fatal(err)
				}
			}
			if got.Status != record.StatusDone {
				t.Fatalf("status %s (%s)", got.Status, got.Reason)
			}
			if e := h.target.Effects(); len(e) != 1 {
				t.Fatalf("effects %v, want exactly one", e)
			}
			v := h.get(run.ID)
			if len(v.Decisions) != 1 || len(v.Operations) != 1 || v.Operations[0].Status != record.OpCommitted {
				t.Fatalf("decisions %+v operations %+v", v.Decisions, v.Operations)
			}
			rep, err := h.engine.Verify(ctx)
			if err != nil || !rep.OK() {
				t.Fatalf("verify %+v %v", rep, err)
			}
		})
	}
}

// countingAgent looks something up in each of two steps and proposes in the third.
type countingAgent struct{ calls *int }

func (a countingAgent) Step(_ context.Context, st *record.State) (bool, error) {
	*a.calls++
	st.ModelCalls++
	switch st.Step {
	case 0, 1:
		st.Evidence = append(st.Evidence, record.Evidence{Source: fmt.Sprintf("lookup-%d", st.Step+1), Data: json.RawMessage(`{"ok":true}`)})
		return false, nil
	default:
		st.Actions = []record.Action{{Name: "request_refund", Args: json.RawMessage(`{"payment_id":"PAY-1","amount":119}`)}}
		return true, nil
	}
}

func TestAgentCrashAfterStepOneResumesAtStepTwo(t *testing.T) {
	calls := 0
	withAgent := func(c *workflow.Config) { c.Agents = map[string]workflow.Agent{"resolver": countingAgent{&calls}} }
	h := newHarness(t, withAgent, crashAt("after-step-1"))
	var run *record.Run
	crashed := survive(t, func() {
		var err error
		run, err = h.engine.Start(ctx, "resolver", "T-1", record.Person{ID: "agent:resolver"})
		if err != nil {
			t.Fatal(err)
		}
	})
	if !crashed {
		t.Fatal("failpoint never fired")
	}
	runs, err := h.engine.List(ctx, storage.RunFilter{})
	if err != nil || len(runs) != 1 || runs[0].Step != 1 || runs[0].Status != record.StatusRunning {
		t.Fatalf("after crash: %+v %v", runs, err)
	}
	h.open(testPolicy(t, "rev-1", h.roles), withAgent)
	run, err = h.engine.Resume(ctx, runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != record.StatusWaitingApproval || calls != 3 || h.get(run.ID).ModelCalls != 3 {
		t.Fatalf("status %s, %d calls, state says %d", run.Status, calls, h.get(run.ID).ModelCalls)
	}
}

func TestConcurrentEnginesOnOneFile(t *testing.T) {
	// A CLI and a server share the file: both decide and resume; one effect.
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	other := newHarness(t)
	other.path, other.target, other.clock = h.path, h.target, h.clock
	other.store = nil
	other.open(testPolicy(t, "rev-1", h.roles))
	done := make(chan error, 2)
	for _, e := range []*workflow.Engine{h.engine, other.engine} {
		go func() {
			_, err := e.Decide(context.Background(), workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"})
			if err != nil && !record.IsRefused(err, record.CodeAlreadyDecided, record.CodeAlreadyVoted) {
				done <- err
				return
			}
			_, err = e.Resume(context.Background(), run.ID)
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if e := h.target.Effects(); len(e) != 1 {
		t.Fatalf("effects %v", e)
	}
}

func TestWorkerTakesOverOnlyAfterTheLeaseRunsOut(t *testing.T) {
	owner := func(name string) harnessOption {
		return func(c *workflow.Config) { c.Owner, c.LeaseTTL = name, 30*time.Second }
	}
	h := newHarness(t, owner("cli"), crashAt("after-intent"))
	run := h.submit(refund("PAY-1", 119))
	if !survive(t, func() { h.approve(run.ID, "U0LEAD0001") }) {
		t.Fatal("failpoint never fired")
	}
	h.open(testPolicy(t, "rev-1", h.roles), owner("server"))
	if n, err := h.engine.Work(ctx, 10); err != nil || n != 0 {
		t.Fatalf("claimed %d (%v) while the crashed process's lease still held", n, err)
	}
	h.clock.Advance(31 * time.Second)
	if n, err := h.engine.Work(ctx, 10); err != nil || n != 1 {
		t.Fatalf("claimed %d, %v; want the abandoned run", n, err)
	}
	v := h.get(run.ID)
	if v.Status != record.StatusDone || len(h.target.Effects()) != 1 {
		t.Fatalf("status %s effects %v", v.Status, h.target.Effects())
	}
	if n, err := h.engine.Work(ctx, 10); err != nil || n != 0 {
		t.Fatalf("a finished run was claimed again: %d %v", n, err)
	}
}

func TestRetriedSubmitFinishesWhatACrashLeftActive(t *testing.T) {
	h := newHarness(t, crashAt("after-effect"))
	p := refund("PAY-2", 5)
	p.IdempotencyKey = "automation-42"
	if !survive(t, func() { h.submit(p) }) {
		t.Fatal("failpoint never fired")
	}
	h.open(testPolicy(t, "rev-1", h.roles))
	run := h.submit(p) // the automation retries after the crash
	if run.Status != record.StatusDone {
		t.Fatalf("retried submit left the run %s", run.Status)
	}
	if e := h.target.Effects(); len(e) != 1 {
		t.Fatalf("effects %v", e)
	}
}

type brokenAgent struct{}

func (brokenAgent) Step(context.Context, *record.State) (bool, error) {
	return false, workflow.Permanent(fmt.Errorf("no transcript for this ticket"))
}

func TestPermanentStepErrorFailsTheRun(t *testing.T) {
	h := newHarness(t, func(c *workflow.Config) { c.Agents = map[string]workflow.Agent{"broken": brokenAgent{}} })
	run, err := h.engine.Start(ctx, "broken", "T-0", record.Person{ID: "agent:resolver"})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != record.StatusFailed || !strings.Contains(run.Reason, "no transcript") {
		t.Fatalf("status %s reason %q", run.Status, run.Reason)
	}
}

// flakyModel fails every call, as a model provider that is down would.
type flakyModel struct{ calls *int }

func (a flakyModel) Step(_ context.Context, st *record.State) (bool, error) {
	*a.calls++
	st.Summary = "half-written by a failing step"
	return false, fmt.Errorf("model provider unavailable")
}

func TestAStepThatKeepsFailingGoesToAPerson(t *testing.T) {
	calls := 0
	h := newHarness(t, func(c *workflow.Config) { c.Agents = map[string]workflow.Agent{"flaky": flakyModel{&calls}} })
	_, err := h.engine.Start(ctx, "flaky", "T-1", record.Person{ID: "agent:resolver"})
	if err == nil {
		t.Fatal("a failing step reported no error")
	}
	runs, _ := h.engine.List(ctx, storage.RunFilter{})
	id := runs[0].ID
	for i := 2; i <= 4; i++ {
		if _, err := h.engine.Resume(ctx, id); err == nil {
			t.Fatalf("attempt %d: no error", i)
		}
		if v := h.get(id); v.Status != record.StatusRunning || v.Summary != "" {
			t.Fatalf("attempt %d: status %s summary %q (a failed step must leave nothing)", i, v.Status, v.Summary)
		}
	}
	run, err := h.engine.Resume(ctx, id)
	if err != nil || run.Status != record.StatusNeedsAttention || !strings.Contains(run.Reason, "5 times in a row") {
		t.Fatalf("after 5 failures: %v %v", run, err)
	}
	if calls != 5 {
		t.Fatalf("%d calls", calls)
	}
}

// TestResumeRechecksTheIntent: after the intent was recorded, someone who can
// write the database lowers the refund everywhere an unkeyed check would look
// (the arguments, every copy of the fingerprint, the checkpoint chain). On
// resume the engine compares the operation's recorded arguments with the
// approved ones before sending or reconciling anything: the run goes to
// needs_attention and the target is never called.
func TestResumeRechecksTheIntent(t *testing.T) {
	h := newHarness(t, crashAt("after-intent"))
	run := h.submit(refund("PAY-1", 119))
	if !survive(t, func() { _, _ = h.approve(run.ID, "U0LEAD0001") }) {
		t.Fatal("failpoint after-intent never fired")
	}
	forged := ""
	tamperLatest(h, run.ID, func(st map[string]any) {
		st["actions"].([]any)[0].(map[string]any)["args"].(map[string]any)["amount"] = 1.5
		var s record.State
		b, _ := json.Marshal(st)
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		fp, err := policy.Fingerprint(policy.FingerprintInput{RunID: s.RunID, Actions: s.Actions, Evidence: s.Evidence, Risk: s.Gate.Risk, PolicyRevision: s.Gate.PolicyRevision})
		if err != nil {
			t.Fatal(err)
		}
		forged = fp
		st["gate"].(map[string]any)["fingerprint"] = fp
	}, true)
	db, err := sqlite.OpenDB(h.path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE runs SET fingerprint = ? WHERE id = ?`, `UPDATE approval_requests SET fingerprint = ? WHERE run_id = ?`} {
		if _, err := db.Exec(q, forged, run.ID); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	h.open(testPolicy(t, "rev-1", h.roles)) // a new process
	got, err := h.engine.Resume(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusNeedsAttention || !strings.Contains(got.Reason, "recorded arguments") {
		t.Fatalf("status %s (%s), want needs_attention over the recorded arguments", got.Status, got.Reason)
	}
	if e := h.target.Effects(); len(e) != 0 || h.target.calls != 0 {
		t.Fatalf("the target was called: %v", e)
	}
}

// TestARunWaitingOutARetryAfterIsHeldByNoWorker: worker A's call fails with
// a Retry-After longer than its lease. A does not wait it out holding the
// run: it parks the run and is free at once. Until the wait is over, no
// worker (B, another process) claims or calls it; then B does, once, and
// finishes it with one effect.
func TestARunWaitingOutARetryAfterIsHeldByNoWorker(t *testing.T) {
	owner := func(name string) harnessOption {
		return func(c *workflow.Config) { c.Owner, c.LeaseTTL = name, 30*time.Second }
	}
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"},
		Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	b := newHarness(t)
	b.path, b.target, b.clock = h.path, h.target, h.clock
	b.store = nil
	b.open(testPolicy(t, "rev-1", h.roles), owner("worker-b"))
	h.open(testPolicy(t, "rev-1", h.roles), owner("worker-a"))

	h.target.failNext = []error{workflow.RetryAfter(errors.New("busy"), 40*time.Second)} // A's call
	start := h.clock.Now()
	if n, err := h.engine.Work(ctx, 1); err != nil || n != 1 {
		t.Fatalf("worker A: claimed %d, %v", n, err)
	}
	if waited := h.clock.Now().Sub(start); waited != 0 {
		t.Errorf("worker A waited %v holding the run; it should have parked it", waited)
	}
	v := h.get(run.ID)
	if v.Status != record.StatusExecuting || !strings.Contains(v.Reason, "asking the target again at "+start.Add(40*time.Second).UTC().Format(time.RFC3339)) {
		t.Fatalf("status %s (%q), want executing and asking again in 40s", v.Status, v.Reason)
	}
	h.clock.Advance(39 * time.Second)
	if n, err := b.engine.Work(ctx, 1); err != nil || n != 0 {
		t.Fatalf("worker B before the Retry-After is over: claimed %d, %v", n, err)
	}
	if h.target.calls != 1 {
		t.Fatalf("%d calls before the Retry-After was over, want 1", h.target.calls)
	}
	h.clock.Advance(time.Second)
	if n, err := b.engine.Work(ctx, 1); err != nil || n != 1 {
		t.Fatalf("worker B once the Retry-After is over: claimed %d, %v", n, err)
	}
	if v := h.get(run.ID); v.Status != record.StatusDone || v.Reason != "" || len(h.target.Effects()) != 1 || h.target.calls != 2 {
		t.Fatalf("status %s (%q), effects %v, calls %d", v.Status, v.Reason, h.target.Effects(), h.target.calls)
	}
}

// TestOneSlowTargetHoldsUpNoOtherRun: run A's target answers 503 with a
// Retry-After of a minute; run B, approved after it, is executed in the
// same round while A waits, not a minute later.
func TestOneSlowTargetHoldsUpNoOtherRun(t *testing.T) {
	h := newHarness(t)
	a, b := h.submit(refund("PAY-1", 60)), h.submit(refund("PAY-1", 55))
	for _, id := range []string{a.ID, b.ID} {
		if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: id, Approver: record.Person{ID: "U0LEAD0001"},
			Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Millisecond) // claimed in this order
	}
	h.target.failNext = []error{workflow.RetryAfter(errors.New("503: deploy in progress"), time.Minute)}
	start := h.clock.Now()
	var callsAt []time.Duration
	h.target.onExecute = func() { callsAt = append(callsAt, h.clock.Now().Sub(start)) }
	if n, err := h.engine.Work(ctx, 20); err != nil || n != 2 {
		t.Fatalf("claimed %d, %v; want both runs in one round", n, err)
	}
	if v := h.get(b.ID); v.Status != record.StatusDone {
		t.Fatalf("run B is %s (%s): it waited for A's target", v.Status, v.Reason)
	}
	if !slices.Equal(callsAt, []time.Duration{0, 0}) {
		t.Fatalf("calls at %v after the round began, want A's and B's at once", callsAt)
	}
	if v := h.get(a.ID); v.Status != record.StatusExecuting || !strings.Contains(v.Reason, "asking the target again at") {
		t.Fatalf("run A is %s (%q), want executing, asking again later", v.Status, v.Reason)
	}
	h.clock.Advance(time.Minute)
	if n, err := h.engine.Work(ctx, 20); err != nil || n != 1 {
		t.Fatalf("after the minute: claimed %d, %v", n, err)
	}
	if v := h.get(a.ID); v.Status != record.StatusDone || len(h.target.Effects()) != 2 {
		t.Fatalf("run A is %s (%q), effects %v", v.Status, v.Reason, h.target.Effects())
	}
}

// TestTheRowsDeadlineOfAWaitingRunIsChecked: the run row's deadline decides
// whether a decision is still allowed, and the row is not sealed. Moved a day
// later behind the engine's back, it no longer agrees with the sealed state:
// verify names the run, and nobody can approve it on the strength of the
// forged deadline.
func TestTheRowsDeadlineOfAWaitingRunIsChecked(t *testing.T) {
	h := newHarness(t, withKeys(testKeys(t)))
	run := h.submit(refund("PAY-1", 119))
	db, err := sqlite.OpenDB(h.path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE runs SET deadline = deadline + 86400000 WHERE id = ?`, run.ID); err != nil {
		t.Fatal(err)
	}
	db.Close()
	rep, err := h.engine.Verify(ctx)
	if err != nil || rep.OK() || len(rep.Damaged) != 1 || rep.Damaged[0].RunID != run.ID || !strings.Contains(rep.Damaged[0].Problem, "deadline") {
		t.Fatalf("verify: %+v %v, want the run's deadline named", rep, err)
	}
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"}); err == nil {
		t.Fatal("an approval was taken on a forged deadline")
	}
	if v := h.get(run.ID); v.Status != record.StatusNeedsAttention || len(h.target.Effects()) != 0 {
		t.Fatalf("status %s, effects %v", v.Status, h.target.Effects())
	}
}
