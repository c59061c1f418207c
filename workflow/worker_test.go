package workflow_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/workflow"
)

// logRecord is one line a loop logged.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// recorder is a slog handler that keeps every record.
type recorder struct {
	mu      sync.Mutex
	records []logRecord
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	l := logRecord{level: rec.Level, msg: rec.Message, attrs: map[string]string{}}
	rec.Attrs(func(a slog.Attr) bool { l.attrs[a.Key] = a.Value.String(); return true })
	r.mu.Lock()
	r.records = append(r.records, l)
	r.mu.Unlock()
	return nil
}

// lines returns the records logged with msg.
func (r *recorder) lines(msg string) []logRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logRecord
	for _, l := range r.records {
		if l.msg == msg {
			out = append(out, l)
		}
	}
	return out
}

// runLoop runs l until the test ends, and returns a function that ends it
// and waits for Run to return.
func runLoop(t *testing.T, l *workflow.Loop) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	stop = func() {
		t.Helper()
		cancel()
		select {
		case <-done:
		case <-time.After(clocktest.WaitBound):
			t.Fatal("the loop did not return when its context ended")
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestLoopCoalescesABurstOfChanges: a change wakes a loop at once (its pace
// never comes here); changes committed during a round, however many, bring
// exactly one more round, after which the loop sleeps.
func TestLoopCoalescesABurstOfChanges(t *testing.T) {
	c := storage.NewChanges()
	pace := clocktest.NewPace()
	var count atomic.Int32
	entered, proceed := make(chan int32), make(chan struct{})
	stop := runLoop(t, &workflow.Loop{Name: "work", Changes: c, Pace: pace, Round: func(ctx context.Context) error {
		n := count.Add(1)
		select {
		case entered <- n:
			<-proceed
		case <-ctx.Done():
		}
		return nil
	}})
	next := func(want int32) {
		t.Helper()
		select {
		case n := <-entered:
			if n != want {
				t.Fatalf("round %d, want %d", n, want)
			}
		case <-time.After(clocktest.WaitBound):
			t.Fatalf("no round %d", want)
		}
	}
	next(1) // at start
	proceed <- struct{}{}
	pace.RoundEnded(t)
	c.Notify("run_a")
	next(2)
	// A burst while round 2 runs.
	c.Notify("run_a")
	c.Notify("run_b", "run_c")
	c.NotifyAll()
	proceed <- struct{}{}
	pace.RoundEnded(t)
	next(3)
	proceed <- struct{}{}
	pace.RoundEnded(t)
	stop()
	if n := count.Load(); n != 3 {
		t.Errorf("%d rounds, want 3: one at start, one for the change, one for the burst", n)
	}
}

// TestLoopComesRoundAtItsPace: with no change to wake it, a loop still comes
// round at each tick of its pace (what becomes due by time alone), and only
// then; a loop without Changes is not woken by one.
func TestLoopComesRoundAtItsPace(t *testing.T) {
	c := storage.NewChanges()
	pace := clocktest.NewPace()
	var count atomic.Int32
	runLoop(t, &workflow.Loop{Name: "expire", Pace: pace, Round: func(context.Context) error {
		count.Add(1)
		return nil
	}})
	pace.RoundEnded(t) // at start
	for i := range 3 {
		c.NotifyAll() // not this loop's wake-up
		pace.Tick(t)
		pace.RoundEnded(t)
		if n := count.Load(); n != int32(i+2) {
			t.Fatalf("%d rounds after %d ticks, want %d", n, i+1, i+2)
		}
	}
	if c.Wanted() {
		t.Error("a loop without Changes waits on them")
	}
}

// TestLoopStopsWhenItsContextEnds: Run returns once ctx ends, whether the
// loop sleeps or is in a round, and stops its pace; the error of a round
// that ctx cut short is not logged.
func TestLoopStopsWhenItsContextEnds(t *testing.T) {
	for _, during := range []string{"sleep", "round"} {
		t.Run(during, func(t *testing.T) {
			c := storage.NewChanges()
			pace := clocktest.NewPace()
			var log recorder
			inRound := make(chan struct{}, 1)
			first := true
			stop := runLoop(t, &workflow.Loop{Name: "deliver", Changes: c, Pace: pace, Logger: slog.New(&log),
				Round: func(ctx context.Context) error {
					if first {
						first = false
						return nil
					}
					inRound <- struct{}{}
					<-ctx.Done()
					return ctx.Err()
				}})
			pace.RoundEnded(t)
			if during == "round" {
				c.Notify("run_a")
				<-inRound
			}
			stop()
			if !pace.Stopped() {
				t.Error("the pace was not stopped")
			}
			if c.Wanted() {
				t.Error("the stopped loop still waits on changes")
			}
			if l := log.lines("deliver"); len(l) != 0 {
				t.Errorf("logged %+v for a round its context ended", l)
			}
		})
	}
}

// TestLoopLogsAFailedRoundAndComesRoundAgain: a failed round is logged at
// error level under the loop's name, with the error, and the next tick
// brings the next round.
func TestLoopLogsAFailedRoundAndComesRoundAgain(t *testing.T) {
	pace := clocktest.NewPace()
	var log recorder
	var count atomic.Int32
	runLoop(t, &workflow.Loop{Name: "deliver slack messages", Pace: pace, Logger: slog.New(&log),
		Round: func(context.Context) error {
			if count.Add(1) == 1 {
				return errors.New("read the outbox: database is locked")
			}
			return nil
		}})
	pace.RoundEnded(t)
	pace.Tick(t)
	pace.RoundEnded(t)
	lines := log.lines("deliver slack messages")
	if len(lines) != 1 || lines[0].level != slog.LevelError || !strings.Contains(lines[0].attrs["error"], "database is locked") {
		t.Fatalf("logged %+v, want one error line with the round's error", lines)
	}
	if n := count.Load(); n != 2 {
		t.Fatalf("%d rounds, want the failed one and the next", n)
	}
}

// TestPaceAfterWaitsAfterEachRound: the default pace delivers its tick the
// interval after each call of Next, for as many rounds as come.
func TestPaceAfterWaitsAfterEachRound(t *testing.T) {
	p := workflow.PaceAfter(time.Millisecond)
	defer p.Stop()
	for i := range 3 {
		select {
		case <-p.Next():
		case <-time.After(clocktest.WaitBound):
			t.Fatalf("no tick %d", i+1)
		}
	}
}
