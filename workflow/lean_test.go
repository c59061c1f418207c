package workflow_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/signoff-dev/signoff/workflow"
)

// chainReads counts the reads of whole checkpoint chains through a store.
type chainReads struct {
	workflow.Store
	n *atomic.Int64
}

func (s chainReads) Update(ctx context.Context, fn func(ctx context.Context, tx workflow.Tx) error) error {
	return s.Store.Update(ctx, func(ctx context.Context, tx workflow.Tx) error { return fn(ctx, chainTx{tx, s.n}) })
}

func (s chainReads) View(ctx context.Context, fn func(ctx context.Context, tx workflow.Tx) error) error {
	return s.Store.View(ctx, func(ctx context.Context, tx workflow.Tx) error { return fn(ctx, chainTx{tx, s.n}) })
}

type chainTx struct {
	workflow.Tx
	n *atomic.Int64
}

func (t chainTx) Checkpoints(ctx context.Context, runID string) ([]*workflow.Checkpoint, error) {
	t.n.Add(1)
	return t.Tx.Checkpoints(ctx, runID)
}

// LoadRun reads a whole chain when it is asked for the checkpoints.
func (t chainTx) LoadRun(ctx context.Context, id string, parts workflow.RunParts) (*workflow.RunBundle, error) {
	if parts.Checkpoints {
		t.n.Add(1)
	}
	return t.Tx.LoadRun(ctx, id, parts)
}

// Resume verifies a run's chain when it loads it, not again after each of its
// own writes: an approved run executes (intent, attempt, receipt, finish)
// from one read of its chain.
func TestResumeReadsTheChainOnce(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	var n atomic.Int64
	h.build(chainReads{h.store, &n}, testPolicy(t, "rev-1", h.roles))
	got, err := h.approve(run.ID, "U0LEAD0001")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.StatusDone {
		t.Fatalf("status = %s (%s)", got.Status, got.Reason)
	}
	// One read by the decision, one by the Resume that executes it.
	if got := n.Load(); got != 2 {
		t.Fatalf("checkpoint chains read = %d, want 2", got)
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
		err := h.store.Update(ctx, func(ctx context.Context, tx workflow.Tx) error {
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
	if got.Status != workflow.StatusDone {
		t.Fatalf("status = %s (%s)", got.Status, got.Reason)
	}
	if got := n.Load(); got < 3 {
		t.Fatalf("checkpoint chains read = %d, want the run loaded again after the other write", got)
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
	waiting := workflow.RunFilter{Statuses: []workflow.Status{workflow.StatusWaitingApproval}}
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
	env.exec(`UPDATE checkpoints SET state = replace(state, '118', '1180') WHERE run_id = ?`, b.ID)
	vs, err = h.engine.ListViews(ctx, waiting)
	if err != nil {
		t.Fatal(err)
	}
	if vs[0].Problem != "" || vs[1].Problem == "" || len(vs[1].Actions) != 0 {
		t.Fatalf("after tampering: %+v / %+v, want the second run's problem and none of its actions", vs[0], vs[1])
	}
}
