package workflow

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/signoff-dev/signoff/record"
)

// sweep is what the reminder and the escalator share: a pass over the
// waiting runs that acts on each one that may be due, and a memory, per run
// looked at, of the earliest time it could be due again. That time only
// moves later, so a pass need not load the run again sooner; the memory is
// bounded by the runs the last pass listed.
type sweep struct {
	mu        sync.Mutex
	notBefore map[string]time.Time
}

// over calls act on each of runs that may be due at now, one after another:
// one that fails does not hold up the others. It returns how many acted.
func (s *sweep) over(ctx context.Context, runs []*record.Run, now time.Time, act func(ctx context.Context, id string) (bool, error)) (int, error) {
	s.forgetAllBut(runs)
	n := 0
	var errs []error
	for _, r := range runs {
		if !s.mayBeDue(r.ID, now) {
			continue
		}
		done, err := act(ctx, r.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if done {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// forgetAllBut drops what is remembered of runs no longer listed.
func (s *sweep) forgetAllBut(runs []*record.Run) {
	keep := make(map[string]bool, len(runs))
	for _, r := range runs {
		keep[r.ID] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.notBefore {
		if !keep[id] {
			delete(s.notBefore, id)
		}
	}
}

func (s *sweep) mayBeDue(id string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.notBefore[id]
	return !ok || !now.Before(t)
}

func (s *sweep) remember(id string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notBefore == nil {
		s.notBefore = map[string]time.Time{}
	}
	s.notBefore[id] = t
}
