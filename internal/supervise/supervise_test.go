package supervise

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// untilCtx is a loop that runs until it is stopped.
func untilCtx(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// waitStatus waits until ok(Status) holds; it fails the test after a while.
func waitStatus(t *testing.T, s *Supervisor, ok func(Status) bool) Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.Status()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v never came", st)
		}
		runtime.Gosched()
	}
}

// TestLoopsAreCountedUntilStop: every loop Go starts is counted as started
// and running until Stop, which ends them all and waits for them.
func TestLoopsAreCountedUntilStop(t *testing.T) {
	s := New(t.Context())
	if st := s.Status(); st.Started != 0 || st.Running != 0 || len(st.Exited) != 0 {
		t.Fatalf("a new supervisor: %+v, want nothing started", st)
	}
	for _, name := range []string{"a", "b", "c"} {
		s.Go(name, untilCtx)
	}
	if st := s.Status(); st.Started != 3 || st.Running != 3 || len(st.Exited) != 0 {
		t.Fatalf("three loops: %+v, want 3 started and running", st)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v, want nil: no loop failed", err)
	}
	if st := s.Status(); st.Started != 3 || st.Running != 0 || len(st.Exited) != 3 {
		t.Fatalf("after Stop: %+v, want all three returned", st)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop again: %v", err)
	}
}

// TestALoopThatReturnsEarlyIsNamed: a loop that returns before Stop is no
// longer running, and Status names it with what it returned; Stop reports
// its error under its name.
func TestALoopThatReturnsEarlyIsNamed(t *testing.T) {
	s := New(t.Context())
	boom := errors.New("boom")
	s.Go("steady", untilCtx)
	s.Go("failing", func(context.Context) error { return boom })
	s.Go("quitter", func(context.Context) error { return nil })
	st := waitStatus(t, s, func(st Status) bool { return st.Running == 1 })
	if st.Started != 3 || len(st.Exited) != 2 {
		t.Fatalf("status %+v, want 3 started, 2 exited", st)
	}
	names := map[string]string{}
	for _, e := range st.Exited {
		names[e.Name] = e.String()
	}
	if names["failing"] != "failing: boom" || names["quitter"] != "quitter returned" {
		t.Fatalf("exits %v, want failing: boom and quitter returned", names)
	}
	err := s.Stop()
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "failing: boom") || strings.Contains(err.Error(), "quitter") {
		t.Fatalf("Stop: %v, want the failing loop's error under its name, and nothing of the one that returned nil", err)
	}
}

// TestTheParentContextStopsTheLoops: a loop's context ends with the
// supervisor's parent, as it does at Stop.
func TestTheParentContextStopsTheLoops(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s := New(ctx)
	s.Go("a", untilCtx)
	cancel()
	waitStatus(t, s, func(st Status) bool { return st.Running == 0 })
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
}
