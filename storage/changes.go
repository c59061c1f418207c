package storage

import (
	"context"
	"sync"
)

// Changes wakes whoever waits on a run when the run may have changed. The
// engine tells it after each of its own commits; a source that sees other
// processes' commits (PostgreSQL's LISTEN/NOTIFY, SQLite's data_version)
// tells it too. A wake is a hint to read the run again, never the state
// itself: a spurious wake costs one read, and waiters never poll.
type Changes struct {
	mu   sync.Mutex
	runs map[string]*watch
	any  *watch // the next change of any run, while someone waits on it
}

// ChangeFeed is a store that can tell a Changes of the commits other
// processes make (another CLI, another replica): the engine's own commits
// reach it without one. FeedChanges runs until ctx ends, calling Notify for a
// run it knows changed and NotifyAll when it knows only that something did;
// once it is listening it calls NotifyAll, since a commit made before was not
// heard. It returns nil when ctx ends, and an error only when it cannot go on.
// Both drivers implement it (PostgreSQL with LISTEN/NOTIFY, SQLite with
// PRAGMA data_version); whoever waits on runs starts it.
type ChangeFeed interface {
	FeedChanges(ctx context.Context, c *Changes) error
}

// watch is the channel of one run's next change and how many wait on it.
type watch struct {
	ch chan struct{}
	n  int
}

// NewChanges returns an empty hub.
func NewChanges() *Changes { return &Changes{runs: map[string]*watch{}} }

// Watch returns a channel closed at the next change of the run, and stop,
// which the caller must call when it no longer waits. Watch before reading
// the run, so that a change between the read and the wait is not missed.
func (c *Changes) Watch(runID string) (changed <-chan struct{}, stop func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.runs[runID]
	if w == nil {
		w = &watch{ch: make(chan struct{})}
		c.runs[runID] = w
	}
	w.n++
	ch := w.ch
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			// The run's watch may have been replaced by a wake since.
			if cur := c.runs[runID]; cur != nil && cur.ch == ch {
				if cur.n--; cur.n == 0 {
					delete(c.runs, runID)
				}
			}
		})
	}
}

// Any returns a channel closed at the next change of any run (a Notify of
// at least one run, or a NotifyAll), and stop, which the caller must call
// when it no longer waits. It is for workers that look for work among all
// runs: call Any before looking, so that a change made while they look
// brings them back once, however many changes there were.
func (c *Changes) Any() (changed <-chan struct{}, stop func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.any == nil {
		c.any = &watch{ch: make(chan struct{})}
	}
	c.any.n++
	ch := c.any.ch
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			// Replaced by a wake since, or still the one to wait on.
			if c.any != nil && c.any.ch == ch {
				if c.any.n--; c.any.n == 0 {
					c.any = nil
				}
			}
		})
	}
}

// Notify wakes the waiters of these runs, and those of any change.
func (c *Changes) Notify(runIDs ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range runIDs {
		if w := c.runs[id]; w != nil {
			close(w.ch)
			delete(c.runs, id)
		}
	}
	if len(runIDs) > 0 {
		c.wakeAny()
	}
}

// NotifyAll wakes every waiter: for a source that knows something changed
// but not which run.
func (c *Changes) NotifyAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, w := range c.runs {
		close(w.ch)
		delete(c.runs, id)
	}
	c.wakeAny()
}

// wakeAny wakes the waiters of any change; c.mu is held.
func (c *Changes) wakeAny() {
	if c.any != nil {
		close(c.any.ch)
		c.any = nil
	}
}

// Waiting says how many runs have waiters (tests and metrics ask); waiters
// of any change are not counted (see Wanted).
func (c *Changes) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.runs)
}

// Wanted says whether anyone waits, on a run or on any change: a feed that
// has to look for changes looks only while someone does.
func (c *Changes) Wanted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.runs) > 0 || c.any != nil
}
