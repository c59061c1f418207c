// Package supervise runs the long-lived goroutines of a server, its loops,
// in one place: each is started under a name, counted while it runs, and
// stopped with the others. It exists so that a server starts no goroutine
// that its readiness does not see: a loop that returned early, with an error
// or without, is named by Status until the server stops, so that a probe
// can say which work is no longer being done.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Supervisor starts loops (Go), says which run (Status) and stops them all
// (Stop). Its methods are safe for concurrent use.
type Supervisor struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	started int
	exited  []Exit
}

// Exit is a loop that returned: its name and the error it returned (nil
// for none).
type Exit struct {
	Name string
	Err  error
}

func (e Exit) String() string {
	if e.Err == nil {
		return e.Name + " returned"
	}
	return e.Name + ": " + e.Err.Error()
}

// Status is what the loops of a Supervisor are doing.
type Status struct {
	Started int    // how many loops Go started
	Running int    // how many of them have not returned
	Exited  []Exit // those that returned, in the order they did
}

// New is a Supervisor whose loops run until Stop, or until ctx ends.
func New(ctx context.Context) *Supervisor {
	ctx, cancel := context.WithCancel(ctx)
	return &Supervisor{ctx: ctx, cancel: cancel}
}

// Go runs loop on a goroutine of its own under name. loop is given a context
// that ends at Stop and should return only then: until Stop, a loop that
// returned is counted as exited (Status), whatever it returned.
func (s *Supervisor) Go(name string, loop func(ctx context.Context) error) {
	s.mu.Lock()
	s.started++
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := loop(s.ctx)
		s.mu.Lock()
		s.exited = append(s.exited, Exit{Name: name, Err: err})
		s.mu.Unlock()
	}()
}

// Status says how many loops were started and which have returned.
func (s *Supervisor) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{Started: s.started, Running: s.started - len(s.exited), Exited: append([]Exit(nil), s.exited...)}
}

// Stop ends the context of every loop, waits until each has returned, and
// returns the errors they returned, each under its loop's name (nil when none
// did). Stop may be called more than once.
func (s *Supervisor) Stop() error {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, e := range s.exited {
		if e.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Name, e.Err))
		}
	}
	return errors.Join(errs...)
}
