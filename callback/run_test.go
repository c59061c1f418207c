package callback_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/callback"
	"github.com/signoff-dev/signoff/internal/clocktest"
)

// runLoop runs the dispatcher's loop on a hand pace until the test ends,
// and returns the pace once the round at start has ended.
func (e *env) runLoop(t *testing.T) *clocktest.Pace {
	t.Helper()
	l := e.disp.Loop(e.engine.Changes(), time.Hour)
	if l.Name != "deliver callbacks" || l.Changes != e.engine.Changes() {
		t.Fatalf("loop %q woken by %p, want deliver callbacks woken by the engine's changes", l.Name, l.Changes)
	}
	l.Pace.Stop()
	p := clocktest.NewPace()
	l.Pace = p
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	p.RoundEnded(t) // the round at start
	return p
}

// TestLoopDeliversWhenARunChanges: the callback of a run that starts waiting
// is sent at once, the loop woken by the commit without its pace coming round.
func TestLoopDeliversWhenARunChanges(t *testing.T) {
	e := newEnv(t)
	p := e.runLoop(t)
	run := e.submit("T-1")
	p.RoundsUntil(t, "the waiting event", func() bool { return len(e.recv.events()) == 1 })
	if ev := e.recv.events()[0]; ev.Run.ID != run.ID || ev.Type != callback.Types[record.StatusWaitingApproval] {
		t.Fatalf("event %+v, want run %s waiting", ev, run.ID)
	}
}

// TestLoopRetriesAtItsPace: an event the receiver failed is sent again at
// the first tick after its backoff, with no commit to wake the loop.
func TestLoopRetriesAtItsPace(t *testing.T) {
	e := newEnv(t)
	e.recv.mu.Lock()
	e.recv.answer = func(n int, _ string) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	}
	e.recv.mu.Unlock()
	p := e.runLoop(t)
	e.submit("T-1")
	p.RoundsUntil(t, "the failed first attempt", func() bool { return len(e.undelivered(true)) == 1 })
	if n := len(e.recv.events()); n != 1 {
		t.Fatalf("%d attempts, want the one the receiver failed", n)
	}
	e.clock.Advance(time.Minute)
	p.Tick(t)
	p.RoundsUntil(t, "the retry", func() bool { return len(e.recv.events()) == 2 })
	if rows := e.undelivered(false); len(rows) != 0 {
		t.Fatalf("%d undelivered rows after the retry", len(rows))
	}
}
