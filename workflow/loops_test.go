package workflow_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/workflow"
)

// loopNamed is the loop of loops with that name.
func loopNamed(t *testing.T, loops []*workflow.Loop, name string) *workflow.Loop {
	t.Helper()
	for _, l := range loops {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("no loop %q", name)
	return nil
}

// handPaced sets the pace of l to a hand-driven one, and returns it.
func handPaced(l *workflow.Loop) *clocktest.Pace {
	l.Pace.Stop()
	p := clocktest.NewPace()
	l.Pace = p
	return p
}

// waitStatus waits until run id leaves from, and returns its status then.
func waitStatus(t *testing.T, e *workflow.Engine, id string, from record.Status) record.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), clocktest.WaitBound)
	defer cancel()
	v, changed, err := e.WaitRun(ctx, id, from)
	if err != nil || !changed {
		t.Fatalf("run %s is still %s (%v)", id, from, err)
	}
	return v.Status
}

// TestExecuteLoopIsWokenByADecision: the engine's execute loop executes a
// run approved by a process that died right after committing the decision,
// woken by the commit, without its pace coming round.
func TestExecuteLoopIsWokenByADecision(t *testing.T) {
	h := newHarness(t, crashAt("after-decision-commit"))
	l := loopNamed(t, h.engine.Loops(time.Hour, nil), "execute approved runs")
	if l.Changes != h.engine.Changes() {
		t.Fatal("the execute loop is not woken by the engine's changes")
	}
	pace := handPaced(l)
	run := h.submit(refund("PAY-1", 119))
	runLoop(t, l)
	pace.RoundEnded(t) // at start: nothing approved yet
	if !survive(t, func() { h.approve(run.ID, "U0LEAD0001") }) {
		t.Fatal("failpoint never fired")
	}
	if s := waitStatus(t, h.engine, run.ID, record.StatusExecuting); s != record.StatusDone {
		t.Fatalf("run %s, want done by the loop", s)
	}
	if e := h.target.Effects(); len(e) != 1 {
		t.Fatalf("effects %v, want one", e)
	}
}

// TestExpireLoopExpiresAtItsPace: the expire loop is not woken by commits;
// a run whose deadline passed is expired at the next tick of its pace.
func TestExpireLoopExpiresAtItsPace(t *testing.T) {
	h := newHarness(t)
	l := loopNamed(t, h.engine.Loops(time.Hour, nil), "expire runs past their deadline")
	if l.Changes != nil {
		t.Fatal("the expire loop is woken by commits: only time makes its work due")
	}
	pace := handPaced(l)
	run := h.submit(refund("PAY-1", 119))
	runLoop(t, l)
	pace.RoundEnded(t)
	if s := h.get(run.ID).Status; s != record.StatusWaitingApproval {
		t.Fatalf("run %s before its deadline", s)
	}
	h.clock.Advance(72*time.Hour + time.Millisecond)
	pace.Tick(t)
	pace.RoundEnded(t)
	if s := h.get(run.ID).Status; s != record.StatusExpired {
		t.Fatalf("run %s after its deadline and a tick, want expired", s)
	}
}

// feed is a hand-written change feed: it fails its first call, and then
// feeds until ctx ends.
type feed struct {
	calls   atomic.Int32
	changes chan *storage.Changes
}

func (f *feed) FeedChanges(ctx context.Context, c *storage.Changes) error {
	if f.calls.Add(1) == 1 {
		return errors.New("listen: connection refused")
	}
	f.changes <- c
	<-ctx.Done()
	return nil
}

// TestFeedLoopIsStartedAgainAtItsPace: with a change feed, the engine's loops
// feed its Changes; a feed that fails is logged and started again at the
// next tick. Without one there is no such loop.
func TestFeedLoopIsStartedAgainAtItsPace(t *testing.T) {
	var log recorder
	h := newHarness(t, func(c *workflow.Config) { c.Logger = slog.New(&log) })
	const name = "wake waiters on other processes' commits"
	for _, l := range h.engine.Loops(time.Hour, nil) {
		if l.Name == name {
			t.Fatal("a feed loop without a feed")
		}
	}
	f := &feed{changes: make(chan *storage.Changes, 1)}
	l := loopNamed(t, h.engine.Loops(time.Hour, f), name)
	pace := handPaced(l)
	runLoop(t, l)
	pace.RoundEnded(t)
	lines := log.lines(name)
	if len(lines) != 1 || !strings.Contains(lines[0].attrs["error"], "connection refused") {
		t.Fatalf("logged %+v, want the feed's error", lines)
	}
	pace.Tick(t)
	select {
	case c := <-f.changes:
		if c != h.engine.Changes() {
			t.Fatal("the feed was given another Changes than the engine's")
		}
	case <-time.After(clocktest.WaitBound):
		t.Fatal("the feed was not started again at the tick")
	}
}

// TestPruneLoop: the retention loop prunes at start and at each tick, with
// the cutoff taken from its clock then, gives the space back after each
// prune, and says what it pruned; a failure to give the space back is
// logged as the prune's error.
func TestPruneLoop(t *testing.T) {
	var log recorder
	h := newHarness(t, func(c *workflow.Config) { c.Logger = slog.New(&log) })
	seed := seedRuns(t, h, 3, 1)
	start := h.clock.Now()
	now := make(chan time.Time, 1)
	var reclaims atomic.Int32
	reclaimErr := make(chan error, 1)
	pace := clocktest.NewPace()
	runLoop(t, h.engine.PruneLoop(workflow.Retention{OlderThan: retention, Pace: pace,
		Clock: clocktest.Chan(now),
		Reclaim: func(context.Context) error {
			reclaims.Add(1)
			select {
			case err := <-reclaimErr:
				return err
			default:
				return nil
			}
		}}))
	now <- start // at start: nothing ended 90 days ago
	pace.RoundEnded(t)
	now <- start.Add(retention + 24*time.Hour)
	pace.Tick(t)
	pace.RoundEnded(t)
	for _, id := range seed.ended() {
		if v := h.get(id); v.Pruned == nil {
			t.Fatalf("run %s (%s) was not pruned at the tick", id, v.Status)
		}
	}
	if v := h.get(seed.waiting[0]); v.Pruned != nil {
		t.Fatal("a waiting run was pruned")
	}
	done := log.lines("prune done")
	if len(done) != 2 || done[0].attrs["runs"] != "0" || done[1].attrs["runs"] != "9" || done[1].attrs["skipped"] != "0" {
		t.Fatalf("logged %+v, want two prunes, of 0 and 9 runs", done)
	}
	if n := reclaims.Load(); n != 2 {
		t.Fatalf("space given back %d times, want after each of 2 prunes", n)
	}
	reclaimErr <- errors.New("reclaim: disk I/O error")
	now <- start.Add(retention + 24*time.Hour)
	pace.Tick(t)
	pace.RoundEnded(t)
	if lines := log.lines("prune"); len(lines) != 1 || !strings.Contains(lines[0].attrs["error"], "disk I/O error") {
		t.Fatalf("logged %+v, want the failure to give the space back", lines)
	}
	if n := len(log.lines("prune done")); n != 2 {
		t.Fatalf("%d prune done lines, want none for the failed prune", n)
	}
}
