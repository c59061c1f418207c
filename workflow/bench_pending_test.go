package workflow_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/internal/benchkit"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/workflow"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
)

// BenchmarkPending is the first page of `/runs pending` (11 runs: a page of
// 10 and one to tell whether there is more) with 100,000 runs waiting and as
// many finished, each with a 2 KB proposal:
//
//	go test -run '^$' -bench Pending -benchtime 200x ./workflow
//
// store: ListRunHeads, the one query (what the 0.5 ms target is for);
// views: Engine.ListViews, the query plus checking and decoding each latest
// checkpoint (what the command now does); get_each: List and a Get per run
// shown (what it did before). p50-µs and p99-µs are per page.
func BenchmarkPending(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		t, err := benchkit.OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "signoff.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { t.Close() })
		benchmarkPending(b, t.Store)
	})
	b.Run("postgres", func(b *testing.B) {
		t, err := benchkit.OpenPostgres(b.Context(), pgtest.DSN(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { t.Close() })
		benchmarkPending(b, t.Store)
	})
}

const pendingRuns = 100_000

func benchmarkPending(b *testing.B, st storage.Store) {
	eng, err := benchkit.NewEngine(st)
	if err != nil {
		b.Fatal(err)
	}
	seedPending(b, eng, st, pendingRuns)
	page := storage.RunFilter{Statuses: []record.Status{record.StatusWaitingApproval}, Limit: 11}
	ctx := context.Background()
	figures := []struct {
		name string
		page func() (int, error)
	}{
		{"store", func() (int, error) {
			var n int
			err := st.View(ctx, func(ctx context.Context, tx storage.Tx) error {
				hs, err := tx.ListRunHeads(ctx, page)
				n = len(hs)
				return err
			})
			return n, err
		}},
		{"views", func() (int, error) {
			vs, err := eng.ListViews(ctx, page)
			return len(vs), err
		}},
		{"get_each", func() (int, error) {
			runs, err := eng.List(ctx, page)
			if err != nil {
				return 0, err
			}
			for _, r := range runs[:min(len(runs), 10)] {
				if _, err := eng.Get(ctx, r.ID); err != nil {
					return 0, err
				}
			}
			return len(runs), err
		}},
	}
	for _, f := range figures {
		b.Run(f.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				n, err := f.page()
				took = append(took, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				if n != 11 {
					b.Fatalf("page of %d runs, want 11", n)
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// seedPending stores n waiting runs and n finished ones, each a copy of one
// real suspended run (its row and its latest checkpoint, re-hashed under its
// own id), in transactions of a thousand runs.
func seedPending(b *testing.B, eng *workflow.Engine, st storage.Store, n int) {
	b.Helper()
	ctx := context.Background()
	id, err := benchkit.Suspend(ctx, eng)
	if err != nil {
		b.Fatal(err)
	}
	var (
		proto *record.Run
		state *record.State
	)
	err = st.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		if proto, err = tx.Run(ctx, id); err != nil {
			return err
		}
		cps, err := tx.Checkpoints(ctx, id)
		if err != nil {
			return err
		}
		state, err = chain.Decode(cps[len(cps)-1].State)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	const batch = 1000
	for i := 0; i < 2*n; i += batch {
		err := st.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
			for j := i; j < i+batch && j < 2*n; j++ {
				r := *proto
				r.ID, r.IdempotencyKey, r.Seq = fmt.Sprintf("run_seed_%07d", j), "", 1
				r.CreatedAt = proto.CreatedAt.Add(time.Duration(j) * time.Millisecond)
				if j%2 == 1 {
					r.Status, r.Deadline = record.StatusDone, time.Time{}
				}
				s := *state
				s.RunID, s.Status = r.ID, r.Status
				body, err := chain.Encode(&s)
				if err != nil {
					return err
				}
				cp := &record.Checkpoint{RunID: r.ID, Seq: 1, SchemaVersion: record.SchemaVersion, State: body, CreatedAt: r.CreatedAt}
				cp.Hash = record.CheckpointHash(cp)
				if err := tx.InsertRun(ctx, &r); err != nil {
					return err
				}
				if err := tx.AppendCheckpoint(ctx, cp); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
