// Package clocktest is the fake clock tests inject wherever a workflow.Clock
// goes: it moves only when the test moves it, and a Sleep moves it by the wait
// at once, so that no test waits for real time and every time is known.
package clocktest

import (
	"context"
	"sync"
	"time"
)

// Clock is a fake workflow.Clock, safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock that reads at.
func New(at time.Time) *Clock { return &Clock{now: at} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep moves the clock by d at once and returns ctx's error, if any.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.Advance(d)
	return ctx.Err()
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Chan is a clock whose every reading is the next time the test sends on it,
// so that the test says when each reading happens and what it reads. Its
// Sleep does not wait.
type Chan <-chan time.Time

// Now waits for the test to send the time.
func (c Chan) Now() time.Time { return <-c }

// Sleep returns ctx's error, if any.
func (Chan) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }
