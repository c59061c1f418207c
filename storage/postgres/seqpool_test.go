package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// The pool hands out its oldest seqs two at a time, smaller first, drops
// what waited seqLife, and says it is low below seqPoolLow fresh seqs.
func TestSeqPool(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := &seqPool{now: func() time.Time { return now }}
	if _, _, ok := p.take(); ok || !p.low() {
		t.Fatal("an empty pool handed out seqs, or is not low")
	}
	p.put(11, 10)
	now = now.Add(seqLife / 2)
	p.put(20, 21, 22, 23, 24, 25)
	if p.low() {
		t.Fatal("a pool of 8 fresh seqs is low")
	}
	if a, b, ok := p.take(); !ok || a != 10 || b != 11 {
		t.Fatalf("take = %d, %d, %v; want 10, 11", a, b, ok)
	}
	if !p.low() {
		t.Fatal("a pool of 6 is not low")
	}
	p.put(30, 31)
	now = now.Add(seqLife / 2) // 20…25 and 30, 31 are half as old as seqLife
	if a, b, ok := p.take(); !ok || a != 20 || b != 21 {
		t.Fatalf("take = %d, %d, %v; want 20, 21", a, b, ok)
	}
	now = now.Add(seqLife / 2) // 22…25 and 30, 31 are seqLife old: stale
	if a, b, ok := p.take(); ok {
		t.Fatalf("take = %d, %d from stale seqs", a, b)
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
