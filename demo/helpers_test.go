package demo

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/storage/sqlite"
)

// clock is a fake workflow.Clock that moves a second each time it is read,
// so the order of changes is visible in their stamps.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 10, 12, 9, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// Sleep moves the clock by d at once.
func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

// openDB opens a fresh shop file in the test's temporary folder.
func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newShop(t *testing.T) (*Shop, *clock) {
	t.Helper()
	c := newClock()
	s, err := OpenShop(context.Background(), openDB(t, filepath.Join(t.TempDir(), "shop.db")), c)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// refusedRule returns the rule of a shop refusal in err's chain, or "" when
// err is not a refusal. It also checks that a refusal is seen as permanent
// through the interface the engine uses.
func refusedRule(t *testing.T, err error) string {
	t.Helper()
	var r *RefusedError
	if !errors.As(err, &r) {
		return ""
	}
	var p interface{ Permanent() bool }
	if !errors.As(err, &p) || !p.Permanent() {
		t.Errorf("refusal %v is not permanent", err)
	}
	return r.Rule
}

func mustChanges(t *testing.T, s *Shop) []Change {
	t.Helper()
	ch, err := s.Changes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func paymentOf(t *testing.T, s *Shop, orderID, paymentID string) Payment {
	t.Helper()
	ps, err := s.Payments(context.Background(), orderID)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.ID == paymentID {
			return p
		}
	}
	t.Fatalf("no payment %s on %s", paymentID, orderID)
	return Payment{}
}
