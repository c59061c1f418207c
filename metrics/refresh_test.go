package metrics

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
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
	if err := m.Refresh(t.Context(), engineOn(t, st), now); err != nil {
		t.Fatal(err)
	}
	for _, s := range record.Statuses {
		if got := testutil.ToFloat64(m.runs.WithLabelValues(string(s))); got != float64(seed[s]) {
			t.Errorf("signoff_runs{status=%q} = %v, want %d", s, got, seed[s])
		}
	}
}

// engineOn is an engine on st: the gauges are read through one.
func engineOn(t testing.TB, st storage.Store) *workflow.Engine {
	t.Helper()
	roles, err := policy.NewRoles([]policy.Role{{Name: "team_lead", Members: []string{"U0LEAD0001"}}})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := policy.New("rev-1", []policy.Rule{{Name: "everything", When: "true", Risk: "low"}}, roles)
	if err != nil {
		t.Fatal(err)
	}
	e, err := workflow.New(workflow.Config{Store: st, Policy: policy, Roles: roles})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
