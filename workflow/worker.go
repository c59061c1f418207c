package workflow

import (
	"context"
	"log/slog"
	"time"

	"github.com/signoff-dev/signoff/storage"
)

// Loop is one background worker of a server: it runs Round at once, and then
// again when its Pace says the next round is due or, when Changes is set, as
// soon as a run changes, until ctx ends. Every change a round makes is durable
// before it returns, so stopping a loop at any point loses nothing: the next
// round, here or on another replica, picks up where it stopped. A failed round
// is logged under Name and tried again at the next one, since the cause (a
// locked file, Slack being down) is usually gone by then.
//
// The loop waits for a change from before each round, so that a change
// committed during a round brings one more, and a burst of changes brings one:
// never a loop that spins, and never a change left for the next tick.
type Loop struct {
	// Name says what a round does: a failed round is logged under it.
	Name  string
	Round func(ctx context.Context) error
	// Changes, when set, wakes the loop at once after every commit that
	// writes a run: for work that a commit creates (an approved run, a
	// queued message).
	Changes *storage.Changes
	// Pace says when the next round is due when no change woke the loop
	// first: for work that time alone makes due. Nil: only changes do.
	Pace   Pace
	Logger *slog.Logger
}

// Pace is when a Loop's next round is due without a change. A Loop runs with
// one Pace and stops it when it ends.
type Pace interface {
	// Next is called after every round: its channel delivers when the next
	// round is due.
	Next() <-chan time.Time
	Stop()
}

// PaceAfter paces the rounds d after the end of the last one, so that a slow
// round never has the next one come at once.
func PaceAfter(d time.Duration) Pace { return &afterPace{t: time.NewTimer(d), d: d} }

type afterPace struct {
	t *time.Timer
	d time.Duration
}

func (p *afterPace) Next() <-chan time.Time { p.t.Reset(p.d); return p.t.C }
func (p *afterPace) Stop()                  { p.t.Stop() }

// PaceEvery paces the rounds every d from its start, like a time.Ticker: a
// slow round does not push the next ones back, and a tick it overran is
// dropped.
func PaceEvery(d time.Duration) Pace { return tickerPace{time.NewTicker(d)} }

type tickerPace struct{ t *time.Ticker }

func (p tickerPace) Next() <-chan time.Time { return p.t.C }
func (p tickerPace) Stop()                  { p.t.Stop() }

// Run runs the loop until ctx ends.
func (l *Loop) Run(ctx context.Context) {
	if l.Pace != nil {
		defer l.Pace.Stop()
	}
	log := l.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for {
		var woken <-chan struct{} // nil: only the pace or ctx ends the wait
		stop := func() {}
		if l.Changes != nil {
			woken, stop = l.Changes.Any()
		}
		if err := l.Round(ctx); err != nil && ctx.Err() == nil {
			log.Error(l.Name, "error", err)
		}
		var due <-chan time.Time
		if l.Pace != nil {
			due = l.Pace.Next()
		}
		select {
		case <-ctx.Done():
			stop()
			return
		case <-woken:
		case <-due:
		}
		stop()
	}
}
