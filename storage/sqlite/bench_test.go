package sqlite

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkRawCommit is the floor under every store operation: one durable
// single-row commit (a ~2 KB row, as a checkpoint is) on a file opened with the
// store's pragmas. Store throughput figures are read against it.
func BenchmarkRawCommit(b *testing.B) {
	db, err := OpenDB(filepath.Join(b.TempDir(), "raw.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := b.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE raw (id INTEGER PRIMARY KEY, body BLOB NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 2048)
	rand.Read(body)
	for b.Loop() {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO raw (body) VALUES (?)`, body); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// BenchmarkConcurrentUpdate is Store.Update from 1, 8 and 64 goroutines at once,
// each Update a transition's worth of writes (a run, a 2 KB checkpoint, an
// audit event). commits/update is how many durable commits (fsyncs) each Update
// cost: 1 when every Update commits alone, less when the writer commits
// concurrent Updates together.
//
//	go test ./storage/sqlite -run '^$' -bench ConcurrentUpdate -benchtime 2s
func BenchmarkConcurrentUpdate(b *testing.B) {
	for _, callers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "signoff.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			state := make([]byte, 2048)
			rand.Read(state)
			var next atomic.Int64
			var wg sync.WaitGroup
			before := s.commits.Load()
			b.ResetTimer()
			for range callers {
				wg.Go(func() {
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						id := fmt.Sprintf("run-%d", i)
						err := s.Update(b.Context(), func(ctx context.Context, tx storage.Tx) error {
							return errors.Join(
								tx.InsertRun(ctx, &record.Run{ID: id, Status: record.StatusRunning, Seq: 1}),
								tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: id, Seq: 1, SchemaVersion: 1, State: state}),
								tx.AppendAudit(ctx, &record.AuditEvent{RunID: id, Action: "started"}, nil),
							)
						})
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
			b.ReportMetric(float64(s.commits.Load()-before)/float64(b.N), "commits/update")
		})
	}
}
