package storagetest

// The outbox: its round trip, what is due and what is listed.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

func testOutboxRoundTrip(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-1")
	var ids []int64
	for _, p := range payloads {
		t.Run(p.name, func(t *testing.T) {
			in := &record.OutboxMessage{ID: 777, RunID: "run-1", Kind: "slack.post", Payload: p.b, Attempts: 1,
				NextAttempt: odd, LastError: "rate limited", Version: 3, CreatedAt: odd.Add(-time.Minute)}
			update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.EnqueueOutbox(ctx, in) })
			if in.Version != 1 {
				t.Errorf("after EnqueueOutbox Version = %d, want 1", in.Version)
			}
			if in.ID <= 0 || slices.Contains(ids, in.ID) {
				t.Errorf("EnqueueOutbox set ID %d; want a new positive id (earlier: %v)", in.ID, ids)
			}
			ids = append(ids, in.ID)
			got := dueByID(t, s, odd, in.ID)
			checkSame(t, "OutboxMessage", stored(in), got)
		})
	}
	t.Run("zero times", func(t *testing.T) {
		in := &record.OutboxMessage{Kind: "callback"}
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.EnqueueOutbox(ctx, in) })
		// A zero NextAttempt is before any now: due at once.
		got := dueByID(t, s, base, in.ID)
		checkSame(t, "OutboxMessage", stored(in), got)
	})
}

// testOutboxOnce: a message with a Once key another message holds, delivered
// or not, is ErrDuplicate and changes nothing, and the transaction it was
// refused in goes on; messages without a key never collide; the key reads
// back as stored.
func testOutboxOnce(t *testing.T, s storage.Store) {
	first := &record.OutboxMessage{RunID: "digest/C1/2026-03-29", Kind: "slack.digest", Once: "digest/C1/2026-03-29"}
	update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.EnqueueOutbox(ctx, first) })
	checkSame(t, "OutboxMessage", stored(first), dueByID(t, s, base, first.ID))

	again := &record.OutboxMessage{RunID: "digest/C1/2026-03-29", Kind: "slack.digest", Once: first.Once}
	other := &record.OutboxMessage{RunID: "digest/C2/2026-03-29", Kind: "slack.digest", Once: "digest/C2/2026-03-29"}
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		if err := tx.EnqueueOutbox(ctx, again); !errors.Is(err, storage.ErrDuplicate) {
			return fmt.Errorf("a second message with key %q: %v, want ErrDuplicate", again.Once, err)
		}
		return tx.EnqueueOutbox(ctx, other) // the transaction goes on
	})
	first.DeliveredAt = base.Add(time.Minute)
	update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.UpdateOutbox(ctx, first) })
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		if err := tx.EnqueueOutbox(ctx, &record.OutboxMessage{RunID: first.RunID, Kind: "slack.digest", Once: first.Once}); !errors.Is(err, storage.ErrDuplicate) {
			return fmt.Errorf("a message with the key of a delivered one: %v, want ErrDuplicate", err)
		}
		return nil
	})
	ms := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.OutboxMessage, error) {
		return tx.OutboxForRun(ctx, first.RunID)
	})
	if len(ms) != 1 || ms[0].ID != first.ID {
		t.Errorf("messages under %s: %d, want the first alone", first.RunID, len(ms))
	}
	for range 2 {
		update(t, s, func(ctx context.Context, tx storage.Tx) error {
			return tx.EnqueueOutbox(ctx, &record.OutboxMessage{RunID: "run-x", Kind: "callback"})
		})
	}
}

// dueByID finds message id among those due at now, or fails the test.
func dueByID(t *testing.T, s storage.Store, now time.Time, id int64) *record.OutboxMessage {
	t.Helper()
	ms := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.OutboxMessage, error) {
		return tx.DueOutbox(ctx, now, 1000)
	})
	for _, m := range ms {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("outbox message %d is not due at %s", id, showTime(now))
	return nil
}

func testDueOutbox(t *testing.T, s storage.Store) {
	now := base
	specs := []struct {
		name string
		next time.Time
	}{
		{"an hour late", now.Add(-time.Hour)},
		{"in a second", now.Add(time.Second)},
		{"no next attempt", time.Time{}},
		{"exactly now", now},
		{"delivered", now.Add(-2 * time.Hour)},
		{"ten minutes late", now.Add(-10 * time.Minute)},
	}
	ids := map[string]int64{}
	msgs := map[string]*record.OutboxMessage{}
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		for _, sp := range specs {
			m := &record.OutboxMessage{RunID: "run-1", Kind: record.OutboxKind(sp.name), NextAttempt: sp.next, CreatedAt: now}
			if err := tx.EnqueueOutbox(ctx, m); err != nil {
				return err
			}
			ids[sp.name], msgs[sp.name] = m.ID, m
		}
		d := msgs["delivered"]
		d.DeliveredAt = now.Add(-time.Hour)
		return tx.UpdateOutbox(ctx, d)
	})
	due := func(now time.Time, limit int) []string {
		t.Helper()
		ms := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.OutboxMessage, error) {
			return tx.DueOutbox(ctx, now, limit)
		})
		kinds := make([]string, len(ms))
		for i, m := range ms {
			kinds[i] = string(m.Kind)
		}
		return kinds
	}
	cases := []struct {
		name  string
		now   time.Time
		limit int
		want  []string
	}{
		{"due and undelivered, oldest first", now, 10,
			[]string{"an hour late", "no next attempt", "exactly now", "ten minutes late"}},
		{"at most limit", now, 2, []string{"an hour late", "no next attempt"}},
		{"a second later", now.Add(time.Second), 10,
			[]string{"an hour late", "in a second", "no next attempt", "exactly now", "ten minutes late"}},
		{"a millisecond earlier", now.Add(-time.Millisecond), 10,
			[]string{"an hour late", "no next attempt", "ten minutes late"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := due(tc.now, tc.limit); !slices.Equal(got, tc.want) {
				t.Errorf("DueOutbox(%s, %d) = %q, want %q", showTime(tc.now), tc.limit, got, tc.want)
			}
		})
	}
	t.Run("delivered leaves the queue", func(t *testing.T) {
		m := msgs["an hour late"]
		m.DeliveredAt = now
		m.Attempts++
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.UpdateOutbox(ctx, m) })
		want := []string{"no next attempt", "exactly now", "ten minutes late"}
		if got := due(now, 10); !slices.Equal(got, want) {
			t.Errorf("DueOutbox = %q, want %q", got, want)
		}
	})
	t.Run("ids in enqueue order", func(t *testing.T) {
		for i := 1; i < len(specs); i++ {
			if a, b := ids[specs[i-1].name], ids[specs[i].name]; a >= b {
				t.Errorf("message %q got id %d, not after %q's %d", specs[i].name, b, specs[i-1].name, a)
			}
		}
	})
}

func testListOutbox(t *testing.T, s storage.Store) {
	now := base
	specs := []struct {
		name, kind, lastErr string
		next                time.Time
		delivered           bool
	}{
		{"slack due", "slack.post", "", now.Add(-time.Minute), false},
		{"callback failing, later", "callback", "503 Service Unavailable", now.Add(time.Hour), false},
		{"callback due", "callback", "", now, false},
		{"callback delivered", "callback", "", now.Add(-time.Hour), true},
		{"slack failing, due", "slack.update", "timeout", now.Add(-time.Second), false},
		{"callback failing, due", "callback", "connection refused", now.Add(-time.Second), false},
	}
	ids := map[string]int64{}
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		for _, sp := range specs {
			run := "run-1"
			if sp.name == "callback due" {
				run = "run-2"
			}
			m := &record.OutboxMessage{RunID: run, Kind: record.OutboxKind(sp.kind), Payload: []byte(sp.name), NextAttempt: sp.next,
				LastError: sp.lastErr, CreatedAt: now}
			if err := tx.EnqueueOutbox(ctx, m); err != nil {
				return err
			}
			ids[sp.name] = m.ID
			if sp.delivered {
				m.DeliveredAt = now
				if err := tx.UpdateOutbox(ctx, m); err != nil {
					return err
				}
			}
		}
		return nil
	})
	cases := []struct {
		name   string
		filter func() storage.OutboxFilter
		want   []string
	}{
		{"every undelivered row", func() storage.OutboxFilter { return storage.OutboxFilter{} },
			[]string{"slack due", "callback failing, later", "callback due", "slack failing, due", "callback failing, due"}},
		{"one kind", func() storage.OutboxFilter { return storage.OutboxFilter{Kinds: []record.OutboxKind{"callback"}} },
			[]string{"callback failing, later", "callback due", "callback failing, due"}},
		{"two kinds", func() storage.OutboxFilter {
			return storage.OutboxFilter{Kinds: []record.OutboxKind{"slack.post", "slack.update"}}
		}, []string{"slack due", "slack failing, due"}},
		{"due by now", func() storage.OutboxFilter {
			return storage.OutboxFilter{Kinds: []record.OutboxKind{"callback"}, DueBy: now}
		},
			[]string{"callback due", "callback failing, due"}},
		{"failing", func() storage.OutboxFilter { return storage.OutboxFilter{Failing: true} },
			[]string{"callback failing, later", "slack failing, due", "callback failing, due"}},
		{"after a cursor, at most limit", func() storage.OutboxFilter {
			return storage.OutboxFilter{AfterID: ids["callback failing, later"], Limit: 2}
		}, []string{"callback due", "slack failing, due"}},
		{"the oldest of each run", func() storage.OutboxFilter { return storage.OutboxFilter{Heads: true} },
			[]string{"slack due", "callback due"}},
		{"the oldest callback of each run, if due", func() storage.OutboxFilter {
			return storage.OutboxFilter{Kinds: []record.OutboxKind{"callback"}, Heads: true, DueBy: now}
		}, []string{"callback due"}},
		{"the oldest Slack message of each run, if failing", func() storage.OutboxFilter {
			return storage.OutboxFilter{Kinds: []record.OutboxKind{"slack.post", "slack.update"}, Heads: true, Failing: true}
		}, []string{}},
		{"one run", func() storage.OutboxFilter {
			return storage.OutboxFilter{Kinds: []record.OutboxKind{"callback"}, RunID: "run-1", Limit: 1}
		},
			[]string{"callback failing, later"}},
		{"no such kind", func() storage.OutboxFilter { return storage.OutboxFilter{Kinds: []record.OutboxKind{"email"}} }, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.OutboxMessage, error) {
				return tx.ListOutbox(ctx, tc.filter())
			})
			got := make([]string, len(ms))
			for i, m := range ms {
				got[i] = string(m.Payload)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ListOutbox = %q, want %q", got, tc.want)
			}
		})
	}
}

// --- audit
