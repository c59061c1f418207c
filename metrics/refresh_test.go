package metrics

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signoff-dev/signoff/storage/sqlite"
)

// TestRefreshCountsEveryStatus: signoff_runs gives the runs in every status,
// ended ones included, and 0 for a status without runs.
func TestRefreshCountsEveryStatus(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "signoff.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	seed := map[record.Status]int{
		record.StatusDone: 4, record.StatusRejected: 2, record.StatusCancelled: 1,
		record.StatusWaitingApproval: 3, record.StatusNeedsAttention: 1,
	}
	i := 0
	for status, n := range seed {
		for range n {
			i++
			r := &record.Run{ID: fmt.Sprintf("run-%02d", i), Status: status, CreatedAt: now, UpdatedAt: now}
			if err := st.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, r) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	m := New("test")
	if err := m.Refresh(t.Context(), st, now); err != nil {
		t.Fatal(err)
	}
	for _, s := range record.Statuses {
		if got := testutil.ToFloat64(m.runs.WithLabelValues(string(s))); got != float64(seed[s]) {
			t.Errorf("signoff_runs{status=%q} = %v, want %d", s, got, seed[s])
		}
	}
}
