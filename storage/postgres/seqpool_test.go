package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// The pool hands out its oldest seqs two at a time, smaller first, and
// drops what waited seqLife. A reserving read tops it up while it is low,
// and by two more for each take that found none since.
func TestSeqPool(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := &seqPool{now: func() time.Time { return now }}
	if n := p.topUp(); n != seqPoolTopUp {
		t.Fatalf("an empty pool tops up by %d, want %d", n, seqPoolTopUp)
	}
	for range 3 {
		if _, _, ok := p.take(); ok {
			t.Fatal("an empty pool handed out seqs")
		}
	}
	if n := p.topUp(); n != seqPoolTopUp+6 {
		t.Fatalf("after 3 takes that found none the pool tops up by %d, want %d", n, seqPoolTopUp+6)
	}
	p.put(11, 10)
	now = now.Add(seqLife / 2)
	seqs := make([]int64, seqPoolLow)
	for i := range seqs {
		seqs[i] = int64(20 + i)
	}
	p.put(seqs...)
	if n := p.topUp(); n != 0 {
		t.Fatalf("a pool of %d fresh seqs tops up by %d", seqPoolLow+2, n)
	}
	if a, b, ok := p.take(); !ok || a != 10 || b != 11 {
		t.Fatalf("take = %d, %d, %v; want 10, 11", a, b, ok)
	}
	if a, b, ok := p.take(); !ok || a != 20 || b != 21 {
		t.Fatalf("take = %d, %d, %v; want 20, 21", a, b, ok)
	}
	if n := p.topUp(); n != seqPoolTopUp {
		t.Fatalf("a pool of %d tops up by %d, want %d", seqPoolLow-2, n, seqPoolTopUp)
	}
	now = now.Add(seqLife) // 22… are older than seqLife: stale
	if a, b, ok := p.take(); ok {
		t.Fatalf("take = %d, %d from stale seqs", a, b)
	}
	for range 100 {
		p.take()
	}
	if n := p.topUp(); n != seqPoolMaxTopUp {
		t.Fatalf("after 101 takes that found none the pool tops up by %d, want at most %d", n, seqPoolMaxTopUp)
	}
}

// TestANewRunsWriteTakesPooledSeqs: after a read that reserved seqs and
// topped the store's pool up, a new run's write, its events with it, goes
// with COMMIT in one round trip: its events take the pooled seqs and chain
// from an empty head. With the pool's seqs stale, the write reads its head
// as before, in a round trip of its own, and stores the same.
func TestANewRunsWriteTakesPooledSeqs(t *testing.T) {
	t.Parallel()
	s := openStore(t, migrated(t))
	now := time.Now()
	s.seqs.now = func() time.Time { return now }
	old := &record.Run{ID: "run-old", Status: record.StatusWaitingApproval, Seq: 1}
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.SaveRun(ctx, &storage.RunWrite{Run: old, Checkpoint: &record.Checkpoint{RunID: old.ID, Seq: 1, SchemaVersion: 2, Hash: "h-old"}})
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		stale bool
		trips int64
	}{{"pooled", false, 1}, {"stale", true, 2}} {
		t.Run(c.name, func(t *testing.T) {
			if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				_, err := tx.LoadRun(ctx, old.ID, storage.RunParts{Reserve: true})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			s.seqs.mu.Lock()
			pooled := len(s.seqs.seqs)
			first := s.seqs.seqs[0].seq
			s.seqs.mu.Unlock()
			if pooled < 2 {
				t.Fatalf("the reserving read pooled %d seqs", pooled)
			}
			if c.stale {
				now = now.Add(seqLife)
			}
			run := &record.Run{ID: "run-new-" + c.name, Status: record.StatusWaitingApproval, Seq: 1}
			evs := []*record.AuditEvent{{RunID: run.ID, Action: "proposed"}, {RunID: run.ID, Action: "gated"}}
			before := s.RoundTrips()
			if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				return tx.SaveRun(ctx, &storage.RunWrite{Run: run, Events: evs,
					Checkpoint: &record.Checkpoint{RunID: run.ID, Seq: 1, SchemaVersion: 2, Hash: "h-" + c.name}})
			}); err != nil {
				t.Fatal(err)
			}
			if trips := s.RoundTrips() - before; trips != c.trips {
				t.Errorf("the new run's write took %d round trips, want %d", trips, c.trips)
			}
			var got []*record.AuditEvent
			var head *record.AuditRunHead
			if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				b, err := tx.LoadRun(ctx, run.ID, storage.RunParts{Audit: true})
				got, head = b.Audit, b.AuditHead
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0].PrevHash != "" || got[1].PrevHash != got[0].Hash || got[0].Seq >= got[1].Seq ||
				got[0].Hash != record.AuditHash(got[0]) || got[1].Hash != record.AuditHash(got[1]) {
				t.Fatalf("events %+v, want two chained from an empty head", got)
			}
			if head == nil || head.Hash != got[1].Hash || head.Seq != got[1].Seq {
				t.Errorf("head %+v, want the second event", head)
			}
			if fromPool := got[0].Seq == first; fromPool == c.stale {
				t.Errorf("first event at seq %d, pool's oldest %d: pooled %v, want %v", got[0].Seq, first, fromPool, !c.stale)
			}
		})
	}
}

// TestSubmissionsAloneFillThePool: a store that only takes submissions (no
// reserving read) tops its pool up in the write of a new run that found it
// empty, so that the next new run's write takes one round trip.
func TestSubmissionsAloneFillThePool(t *testing.T) {
	t.Parallel()
	s := openStore(t, migrated(t))
	var trips []int64
	for i := range 3 {
		run := &record.Run{ID: fmt.Sprintf("run-sub-%d", i), Status: record.StatusWaitingApproval, Seq: 1}
		before := s.RoundTrips()
		if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			return tx.SaveRun(ctx, &storage.RunWrite{Run: run, Events: []*record.AuditEvent{{RunID: run.ID, Action: "proposed"}},
				Checkpoint: &record.Checkpoint{RunID: run.ID, Seq: 1, SchemaVersion: 2, Hash: fmt.Sprintf("h-%d", i)}})
		}); err != nil {
			t.Fatal(err)
		}
		trips = append(trips, s.RoundTrips()-before)
	}
	if !slices.Equal(trips, []int64{2, 1, 1}) {
		t.Errorf("round trips of three submissions %v, want [2 1 1]", trips)
	}
}
