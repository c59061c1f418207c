package metrics

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/storage/sqlite"
)

// errorLines is a slog handler that keeps the messages and errors of the
// records at error level.
type errorLines struct {
	mu    sync.Mutex
	lines []string
}

func (h *errorLines) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h *errorLines) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *errorLines) WithGroup(string) slog.Handler                { return h }
func (h *errorLines) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.Key + "=" + a.Value.String(); return true })
	h.mu.Lock()
	h.lines = append(h.lines, line)
	h.mu.Unlock()
	return nil
}

func (h *errorLines) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.lines...)
}

// TestRefreshLoop: the gauges are set from the store at start and again at
// each tick, with the ages taken at the clock then; a refresh that fails is
// logged at error level under "refresh metrics", and the next tick refreshes
// again.
func TestRefreshLoop(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "signoff.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	insert := func(id string, s record.Status) {
		t.Helper()
		r := &record.Run{ID: id, Status: s, CreatedAt: now, UpdatedAt: now}
		if err := st.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, r) }); err != nil {
			t.Fatal(err)
		}
	}
	insert("run-01", record.StatusDone)
	m := New("test")
	var log errorLines
	pace := clocktest.NewPace()
	store := &failing{Store: st}
	l := m.RefreshLoop(store, clocktest.New(now), pace, slog.New(&log))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	done1 := func() float64 { return testutil.ToFloat64(m.runs.WithLabelValues(string(record.StatusDone))) }
	pace.RoundEnded(t)
	if got := done1(); got != 1 {
		t.Fatalf("signoff_runs{status=done} = %v after the round at start, want 1", got)
	}
	insert("run-02", record.StatusDone)
	if got := done1(); got != 1 {
		t.Fatalf("signoff_runs{status=done} = %v before the tick, want 1: a scrape never reads the store", got)
	}
	store.fail(true)
	pace.TickAt(t, now)
	pace.RoundEnded(t)
	if lines := log.all(); len(lines) != 1 || !strings.HasPrefix(lines[0], "refresh metrics error=refresh metrics: ") || !strings.Contains(lines[0], "store is down") {
		t.Fatalf("logged %q, want the failed refresh", lines)
	}
	if got := done1(); got != 1 {
		t.Fatalf("signoff_runs{status=done} = %v after a failed refresh, want the last one's 1", got)
	}
	store.fail(false)
	pace.TickAt(t, now)
	pace.RoundEnded(t)
	if got := done1(); got != 2 {
		t.Fatalf("signoff_runs{status=done} = %v after the tick, want 2", got)
	}
}

// failing is a store whose reads fail while told to.
type failing struct {
	storage.Store
	mu   sync.Mutex
	down bool
}

func (f *failing) fail(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

func (f *failing) View(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return errStoreDown
	}
	return f.Store.View(ctx, fn)
}

var errStoreDown = errors.New("store is down")
