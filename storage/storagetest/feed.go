package storagetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"
)

// feedTimeout bounds how long a test waits for a wake that must come.
const feedTimeout = 10 * time.Second

// RunChangeFeed holds a driver's storage.ChangeFeed to its promise: open
// returns two stores on one database, as two processes would have them, the
// first of which feeds a Changes; a run the second inserts, then updates,
// wakes the first's waiter on that run after each commit, and not before; a
// run it inserts wakes a waiter of any change, which watches no run; and the
// feed returns nil once its context ends. The stores are closed by
// open's cleanups.
func RunChangeFeed(t *testing.T, open func(t *testing.T) (feeding, other storage.Store)) {
	t.Helper()
	a, b := open(t)
	feed, ok := a.(storage.ChangeFeed)
	if !ok {
		t.Fatalf("%T is not a storage.ChangeFeed", a)
	}
	c := storage.NewChanges()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The feed wakes every waiter once it listens: that says it is ready.
	ready, stopReady := c.Watch("probe")
	defer stopReady()
	fed := make(chan error, 1)
	go func() { fed <- feed.FeedChanges(ctx, c) }()
	awaitWake(t, ready, "the first wake of a feed that listens")

	// A database may be shared with other tests: an id of its own.
	var rb [6]byte
	rand.Read(rb[:])
	id := "feed-" + hex.EncodeToString(rb[:])
	run := &record.Run{ID: id, Workflow: "proposal", Status: record.StatusWaitingApproval, CreatedAt: base, UpdatedAt: base}
	steps := []struct {
		what  string
		write txFunc
	}{
		{"insert", func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, run) }},
		{"update", func(ctx context.Context, tx storage.Tx) error {
			run.Status = record.StatusRejected
			return tx.UpdateRun(ctx, run)
		}},
	}
	for _, st := range steps {
		woken, stop := c.Watch(id)
		select {
		case <-woken:
			t.Fatalf("%s: woken before the other store committed", st.what)
		default:
		}
		update(t, b, st.write)
		start := time.Now()
		awaitWake(t, woken, st.what+" committed by the other store")
		t.Logf("%s: woken %v after the other store's commit", st.what, time.Since(start).Round(time.Microsecond))
		stop()
	}

	// A worker waits for a change of any run, watching none: the feed
	// looks for it all the same.
	woken, stop := c.Any()
	select {
	case <-woken:
		t.Fatal("any change: woken before the other store committed")
	default:
	}
	other := &record.Run{ID: id + "-2", Workflow: "proposal", Status: record.StatusWaitingApproval, CreatedAt: base, UpdatedAt: base}
	update(t, b, func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, other) })
	start := time.Now()
	awaitWake(t, woken, "any change: a run inserted by the other store")
	t.Logf("any change: woken %v after the other store's commit", time.Since(start).Round(time.Microsecond))
	stop()

	cancel()
	select {
	case err := <-fed:
		if err != nil {
			t.Errorf("FeedChanges after its context ended = %v, want nil", err)
		}
	case <-time.After(feedTimeout):
		t.Fatal("FeedChanges did not return once its context ended")
	}
}

func awaitWake(t *testing.T, woken <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-woken:
	case <-time.After(feedTimeout):
		t.Fatalf("no wake within %v: %s", feedTimeout, what)
	}
}
