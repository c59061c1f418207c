package clocktest

import (
	"sync/atomic"
	"testing"
	"time"
)

// WaitBound fails a test whose loop never came round: it bounds a wait for
// something that must happen, and is no timing.
const WaitBound = 10 * time.Second

// Pace is a loop's pace (workflow.Pace) moved by the test's hand: the next
// round comes when the test calls Tick, and the end of every round (each
// call of Next) is told to RoundEnded and RoundsUntil.
type Pace struct {
	ticks   chan time.Time
	ended   chan struct{}
	stopped atomic.Bool
}

// NewPace returns a pace that waits for the test's ticks.
func NewPace() *Pace {
	return &Pace{ticks: make(chan time.Time), ended: make(chan struct{}, 100)}
}

// Next tells the end of a round and returns the channel of the test's ticks.
func (p *Pace) Next() <-chan time.Time { p.ended <- struct{}{}; return p.ticks }

// Stop records that the loop stopped its pace.
func (p *Pace) Stop() { p.stopped.Store(true) }

// Stopped says whether the loop stopped its pace.
func (p *Pace) Stopped() bool { return p.stopped.Load() }

// RoundEnded waits until the loop has ended one more round.
func (p *Pace) RoundEnded(t testing.TB) {
	t.Helper()
	select {
	case <-p.ended:
	case <-time.After(WaitBound):
		t.Fatal("the round never ended")
	}
}

// Tick starts the next round.
func (p *Pace) Tick(t testing.TB) { t.Helper(); p.TickAt(t, time.Time{}) }

// TickAt starts the next round with the tick's time at.
func (p *Pace) TickAt(t testing.TB, at time.Time) {
	t.Helper()
	select {
	case p.ticks <- at:
	case <-time.After(WaitBound):
		t.Fatal("the loop never waited for its tick")
	}
}

// RoundsUntil waits for rounds of the loop until cond holds; what names it
// in the failure.
func (p *Pace) RoundsUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-p.ended:
		case <-time.After(WaitBound):
			t.Fatalf("no round brought %s", what)
		}
	}
}
