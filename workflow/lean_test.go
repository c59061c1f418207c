package workflow_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// chainReads counts the reads of whole checkpoint chains through a store.
type chainReads struct {
	storage.Store
	n *atomic.Int64
}

func (s chainReads) Update(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	return s.Store.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return fn(ctx, chainTx{tx, s.n}) })
}

func (s chainReads) View(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	return s.Store.View(ctx, func(ctx context.Context, tx storage.Tx) error { return fn(ctx, chainTx{tx, s.n}) })
}

type chainTx struct {
	storage.Tx
	n *atomic.Int64
}

func (t chainTx) Checkpoints(ctx context.Context, runID string) ([]*record.Checkpoint, error) {
	t.n.Add(1)
	return t.Tx.Checkpoints(ctx, runID)
}

// LoadRun reads a whole chain when it is asked for the checkpoints.
func (t chainTx) LoadRun(ctx context.Context, id string, parts storage.RunParts) (*storage.RunBundle, error) {
	if parts.Checkpoints {
		t.n.Add(1)
	}
	return t.Tx.LoadRun(ctx, id, parts)
}

// Resume verifies a run's chain when it loads it, not again after each of its
// own writes: an approved run executes (intent with its attempt, receipt with the end)
// from one read of its chain. An approval in the same process hands the run
// on as it wrote it, so the Resume after it reads no chain at all.
func TestResumeReadsTheChainOnce(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	var n atomic.Int64
	h.build(chainReads{h.store, &n}, testPolicy(t, "rev-1", h.roles))
	got, err := h.approve(run.ID, "U0LEAD0001")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusDone {
		t.Fatalf("status = %s (%s)", got.Status, got.Reason)
	}
	// One read by the decision; the Resume that executes it takes the run
	// the decision wrote.
	if got := n.Load(); got != 1 {
		t.Fatalf("checkpoint chains read = %d, want 1", got)
	}
	if e := h.target.Effects(); len(e) != 1 {
		t.Fatalf("effects = %v, want exactly one", e)
	}
}

// A write by anyone else between two steps of a Resume makes it load and
// verify the run afresh: the row's version no longer matches what it wrote.
func TestResumeReloadsARunWrittenByAnother(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	var n atomic.Int64
	h.build(chainReads{h.store, &n}, testPolicy(t, "rev-1", h.roles))
	// During the target's call another writer bumps the run row (as a
	// worker that took over the lease would): the write after the call is
	// refused, and the run is loaded again and reconciled.
	h.target.onExecute = func() {
		err := h.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
			r, err := tx.Run(ctx, run.ID)
			if err != nil {
				return err
			}
			return tx.UpdateRun(ctx, r)
		})
		if err != nil {
			t.Error(err)
		}
	}
	got, err := h.approve(run.ID, "U0LEAD0001")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusDone {
		t.Fatalf("status = %s (%s)", got.Status, got.Reason)
	}
	// The decision's read, then the read after the other write.
	if got := n.Load(); got != 2 {
		t.Fatalf("checkpoint chains read = %d, want the run loaded again after the other write", got)
	}
	if e := h.target.Effects(); len(e) != 1 {
		t.Fatalf("effects = %v, want exactly one", e)
	}
}

// A run approved in one process and executed by another before the first
// resumes it: the run the first process handed on is stale, and its Resume
// loads the run afresh, finds it done and runs nothing again.
func TestHandedOnRunExecutedElsewhereRunsOnce(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	var n atomic.Int64
	h.build(chainReads{h.store, &n}, testPolicy(t, "rev-1", h.roles))
	first := h.engine
	decided, err := first.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	if decided.Status != record.StatusExecuting {
		t.Fatalf("approved run is %s", decided.Status)
	}
	h.build(h.store, testPolicy(t, "rev-1", h.roles)) // the other process
	if got, err := h.engine.Resume(ctx, run.ID); err != nil || got.Status != record.StatusDone {
		t.Fatalf("the other process's Resume: %v, %v", got, err)
	}
	before := n.Load()
	got, err := first.Resume(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusDone {
		t.Fatalf("status = %s (%s)", got.Status, got.Reason)
	}
	if n.Load() == before {
		t.Error("the first process resumed from the run it handed on, not from the store")
	}
	if e := h.target.Effects(); len(e) != 1 {
		t.Fatalf("effects = %v, want exactly one", e)
	}
}

// ListViews shows what Get shows of each waiting run, from one query; a run
// whose latest checkpoint was changed behind the engine's back shows nothing
// of it, only the problem.
func TestListViewsShowWhatGetShows(t *testing.T) {
	env := sqliteTamperEnv(t)
	h := env.h
	a := h.submit(refund("PAY-1", 119))
	b := h.submit(refund("PAY-1", 118))
	waiting := storage.RunFilter{Statuses: []record.Status{record.StatusWaitingApproval}}
	vs, err := h.engine.ListViews(ctx, waiting)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].ID != a.ID || vs[1].ID != b.ID {
		t.Fatalf("views = %v, want %s and %s", vs, a.ID, b.ID)
	}
	for _, v := range vs {
		g := h.get(v.ID)
		if v.Problem != "" || v.Summary != g.Summary || v.Requester != g.Requester || !v.CreatedAt.Equal(g.CreatedAt) ||
			len(v.Actions) != 1 || string(v.Actions[0].Args) != string(g.Actions[0].Args) || !v.Deadline.Equal(*g.Deadline) {
			t.Fatalf("view %+v, want what Get shows: %+v", v, g)
		}
	}
	// The amount changed in place: the checkpoint no longer matches its hash.
	env.editStates(t, b.ID, func(state []byte) []byte { return bytes.ReplaceAll(state, []byte("118"), []byte("1180")) })
	vs, err = h.engine.ListViews(ctx, waiting)
	if err != nil {
		t.Fatal(err)
	}
	if vs[0].Problem != "" || vs[1].Problem == "" || len(vs[1].Actions) != 0 {
		t.Fatalf("after tampering: %+v / %+v, want the second run's problem and none of its actions", vs[0], vs[1])
	}
}

// commits counts the Updates that committed through a store.
type commits struct {
	storage.Store
	n *atomic.Int64
}

func (s commits) Update(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	err := s.Store.Update(ctx, fn)
	if err == nil {
		s.n.Add(1)
	}
	return err
}

// A gated run with one action is four commits: the submission, the decision,
// the intent with its first attempt, and the receipt with the run's end. A
// crash between any two of them is what the crash tests kill the binary at.
func TestAGatedRunCommitsFourTimes(t *testing.T) {
	h := newHarness(t)
	var n atomic.Int64
	h.build(commits{h.store, &n}, testPolicy(t, "rev-1", h.roles))
	run := h.submit(refund("PAY-1", 119))
	if got := n.Load(); got != 1 {
		t.Fatalf("commits by submit = %d, want 1", got)
	}
	got, err := h.approve(run.ID, "U0LEAD0001")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusDone {
		t.Fatalf("status = %s (%s)", got.Status, got.Reason)
	}
	if got := n.Load(); got != 4 {
		t.Fatalf("commits for the whole run = %d, want 4", got)
	}
	v, err := h.engine.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Operations) != 1 || v.Operations[0].Attempts != 1 || v.Operations[0].Status != record.OpCommitted {
		t.Fatalf("operations = %+v, want one committed after one attempt", v.Operations)
	}
	if e := h.target.Effects(); len(e) != 1 {
		t.Fatalf("effects = %v, want exactly one", e)
	}
}

// A decider that follows its decision (the CLI's approve) leaves the run to a
// worker that took it first: it calls nothing while that worker's lease holds,
// and takes over only when the lease lapses (its holder died), so the two
// never attempt the same operation at once.
func TestFollowLeavesARunToTheWorkerThatTookIt(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: record.ViaCLI}); err != nil {
		t.Fatal(err)
	}
	// A worker of another process claims the approved run.
	var until time.Time
	err := h.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		now := h.clock.Now().UTC().Truncate(time.Millisecond)
		until = now.Add(30 * time.Second)
		runs, err := tx.ClaimRuns(ctx, "replica-b", []record.Status{record.StatusExecuting}, now, until, 1)
		if err == nil && len(runs) != 1 {
			err = fmt.Errorf("claimed %d runs, want the approved one", len(runs))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var calledAt []time.Time
	h.target.onExecute = func() { calledAt = append(calledAt, h.clock.Now()) }
	got, err := h.engine.Follow(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusDone {
		t.Fatalf("status = %s (%s)", got.Status, got.Reason)
	}
	if len(calledAt) != 1 || calledAt[0].Before(until) {
		t.Fatalf("calls at %v; want one, once the other worker's lease ended at %v", calledAt, until)
	}
	if v := h.get(run.ID); v.Operations[0].Attempts != 1 {
		t.Fatalf("attempts = %d, want 1", v.Operations[0].Attempts)
	}
}

// Resume is an operator's "do it now": it does not wait for a lease.
func TestResumeDoesNotWaitForALease(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: record.ViaCLI}); err != nil {
		t.Fatal(err)
	}
	err := h.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		now := h.clock.Now().UTC().Truncate(time.Millisecond)
		_, err := tx.ClaimRuns(ctx, "replica-b", []record.Status{record.StatusExecuting}, now, now.Add(30*time.Second), 1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	start := h.clock.Now()
	got, err := h.engine.Resume(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusDone || h.clock.Now().Sub(start) >= 30*time.Second {
		t.Fatalf("status %s after %v; want done at once", got.Status, h.clock.Now().Sub(start))
	}
}

// afterView runs then once, after the first View through it returns.
type afterView struct {
	storage.Store
	then func()
}

func (s *afterView) View(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	err := s.Store.View(ctx, fn)
	if then := s.then; then != nil {
		s.then = nil
		then()
	}
	return err
}

// A decision reads the run's requests and decisions before its write; when
// another approver's decision lands in between, the write counts it: what
// was read before is used only while the run is still at the version it
// was read at.
func TestADecisionCountsOneThatLandedSinceItsRead(t *testing.T) {
	h := newHarness(t)
	p := twoLeads(t, h)
	h.open(p)
	run := h.submit(refund("PAY-1", 119))
	st := &afterView{Store: h.store}
	h.build(st, p)
	st.then = func() {
		got, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"})
		if err != nil || got.Status != record.StatusWaitingApproval {
			t.Errorf("first approval: %v %v", got, err)
		}
	}
	got, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0MGR00001"}, Verdict: record.VerdictApprove, Via: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	if st.then != nil {
		t.Fatal("the first approval did not land between the read and the write")
	}
	if got.Status != record.StatusExecuting {
		t.Fatalf("after two approvals: status %s (%s)", got.Status, got.Reason)
	}
	if v := h.get(run.ID); len(v.Decisions) != 2 {
		t.Fatalf("decisions %+v, want both", v.Decisions)
	}
}

// views counts the read-only transactions through a store.
type views struct {
	storage.Store
	n *atomic.Int64
}

func (s views) View(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	s.n.Add(1)
	return s.Store.View(ctx, fn)
}

// The write that ends a run answers Resume: the run it returns is the one
// stored, and it is not read back after that write.
func TestResumeReturnsTheRunItsLastWriteEnded(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	h.build(views{h.store, &n}, testPolicy(t, "rev-1", h.roles))
	got, err := h.engine.Resume(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The run with its operations, as the Resume began.
	if n.Load() != 1 {
		t.Errorf("read-only transactions = %d, want 1", n.Load())
	}
	var stored *record.Run
	if err := h.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		stored, err = tx.Run(ctx, run.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got.Status != record.StatusDone || got.Status != stored.Status || got.Version != stored.Version || got.Seq != stored.Seq ||
		got.LeaseOwner != stored.LeaseOwner || !got.LeaseUntil.Equal(stored.LeaseUntil) || !got.UpdatedAt.Equal(stored.UpdatedAt) {
		t.Errorf("Resume returned %+v, but the store holds %+v", got, stored)
	}
	if e := h.target.Effects(); len(e) != 1 {
		t.Fatalf("effects = %v, want exactly one", e)
	}
}
