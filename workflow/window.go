package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// scheduler keeps an approved run inside its rule's execution window (the
// gate's Window): right before the first action's intent is written it
// parks a run whose window is closed as scheduled, until the window next
// opens, and releases a scheduled run to executing once it is open. A
// scheduled run holds no lease and its lease_until is when it is due, so
// the worker claims it then and not before (see runtx.Runs.Save). The
// deadline is over for an approved run, so nothing expires it meanwhile.
type scheduler struct {
	runs *runtx.Runs
	log  *slog.Logger
	fail func(string)
}

// due is the one answer to "does l, approved, run now or wait for its
// window, and until when": it waits when its gate has a window that is
// closed at now and none of its actions has started (once one has, the run
// finishes, as a person watching it expects, rather than stopping
// halfway), until the window next opens. at is zero for a window that
// never opens (a damaged gate: Check refuses one in the config). Every
// path that approves a run (approve), the check right before the first
// intent (hold) and the release of a scheduled run (release) ask it.
func (s *scheduler) due(l *runtx.Loaded, now time.Time) (at time.Time, wait bool) {
	g := l.State.Gate
	if g == nil || g.Window == nil || len(l.State.Operations) > 0 || g.Window.Open(now) {
		return time.Time{}, false
	}
	return g.Window.Next(now), true
}

// approve moves l on in the transition that approves it (a quorum met, an
// edit approved at once or needing no approval, a forced approval, a
// proposal that needs none, a resolution that sends it back to execution):
// to executing, or straight to scheduled when due says it waits, so that
// the run is never seen executing outside its window. The caller saves l
// with its own event, then calls the returned scheduling's audit in the
// same transaction: the approval and the scheduling are two audit events
// on the one checkpoint, as the last receipt and the run's end are, so the
// audit and history say both what was decided and that it waits, while
// hooks are told of the one transition (one rewrite of the approval
// message, one run.scheduled callback).
func (s *scheduler) approve(l *runtx.Loaded) *scheduling {
	l.Run.Status, l.Run.Reason, l.State.ScheduledFor = record.StatusExecuting, "", nil
	at, wait := s.due(l, s.runs.Now())
	if !wait || at.IsZero() {
		// A window that never opens is left to hold, which puts the run
		// in needs_attention before anything runs.
		return nil
	}
	at = at.UTC()
	l.Run.Status, l.State.ScheduledFor = record.StatusScheduled, &at
	return &scheduling{s: s, at: at, window: l.State.Gate.Window.String()}
}

// scheduling is an approval that scheduled its run (see approve); nil for
// one that did not, whose audit does nothing.
type scheduling struct {
	s      *scheduler
	at     time.Time
	window string
}

// then is the scheduled event the approving transition records after its
// own (none when it scheduled nothing).
func (sc *scheduling) then() []runtx.Event {
	if sc == nil {
		return nil
	}
	return []runtx.Event{{Actor: "signoff", Action: record.EventScheduled, Detail: sc.detail()}}
}

func (sc *scheduling) detail() map[string]string {
	return map[string]string{"at": sc.at.Format(time.RFC3339), "window": sc.window}
}

// hold schedules l, an executing run, when due says it waits: the window
// may have closed between its approval (or release) and its execution.
// held says whether it did (or another moved the run on first); the caller
// reloads.
func (s *scheduler) hold(ctx context.Context, l *runtx.Loaded) (held bool, err error) {
	at, wait := s.due(l, s.runs.Now())
	if !wait {
		return false, nil
	}
	return true, s.schedule(ctx, l, record.StatusExecuting, at)
}

// schedule moves l from from to scheduled, due at at.
func (s *scheduler) schedule(ctx context.Context, l *runtx.Loaded, from record.Status, at time.Time) error {
	w := l.State.Gate.Window
	if at.IsZero() {
		// Check refused such a window in the config: a damaged gate.
		return s.runs.Attention(ctx, l.Run.ID, fmt.Sprintf("the execution window %s never opens; nothing was run", w))
	}
	at = at.UTC()
	l.Run.Status, l.Run.Reason = record.StatusScheduled, ""
	l.State.ScheduledFor = &at
	err := s.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
		return s.runs.Save(ctx, tx, l, from, record.EventScheduled, "signoff", map[string]string{
			"at": at.Format(time.RFC3339), "window": w.String(),
		}, nil)
	})
	if errors.Is(err, storage.ErrConflict) {
		return nil // another moved the run on; the caller reloads
	}
	if err != nil {
		return fmt.Errorf("schedule run %s for %s: %w", l.Run.ID, at.Format(time.RFC3339), err)
	}
	s.log.Info("run scheduled for its execution window", "run_id", l.Run.ID, "at", at, "window", w.String())
	s.fail("after-schedule")
	return nil
}

// release moves l, a scheduled run, on once it is due: to executing when
// its window is open, else (the clock read early, or the window closed
// again) scheduled for the next opening. Before it is due, nothing: not
// even an operator's resume runs it early. moved says whether it wrote.
func (s *scheduler) release(ctx context.Context, l *runtx.Loaded) (moved bool, err error) {
	now := s.runs.Now()
	at := l.State.ScheduledFor
	if at != nil && now.Before(*at) {
		return false, nil
	}
	if next, wait := s.due(l, now); wait {
		if at != nil && next.Equal(*at) {
			return false, nil
		}
		return true, s.schedule(ctx, l, record.StatusScheduled, next)
	}
	l.Run.Status, l.State.ScheduledFor = record.StatusExecuting, nil
	err = s.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
		return s.runs.Save(ctx, tx, l, record.StatusScheduled, record.EventReleased, "signoff", nil, nil)
	})
	if errors.Is(err, storage.ErrConflict) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("release scheduled run %s: %w", l.Run.ID, err)
	}
	s.log.Info("execution window open: run released", "run_id", l.Run.ID)
	s.fail("after-release")
	return true, nil
}

// scheduledFor is when a scheduled run runs: as its sealed state says, or,
// for a run listed without its state, as its row's lease_until (which Save
// sets from it). Nil for a run not scheduled.
func scheduledFor(r *record.Run, st *record.State) *time.Time {
	if r.Status != record.StatusScheduled {
		return nil
	}
	if st != nil && st.ScheduledFor != nil {
		t := *st.ScheduledFor
		return &t
	}
	if r.LeaseUntil.IsZero() {
		return nil
	}
	t := r.LeaseUntil.UTC()
	return &t
}
