package postgres

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
		if _, _, ok := p.take(0); ok {
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
	// A write that follows a head at 15 takes none at or below it, and
	// leaves those for a new run's.
	if a, b, ok := p.take(15); !ok || a != 20 || b != 21 {
		t.Fatalf("take after 15 = %d, %d, %v; want 20, 21", a, b, ok)
	}
	if a, b, ok := p.take(0); !ok || a != 10 || b != 11 {
		t.Fatalf("take = %d, %d, %v; want 10, 11", a, b, ok)
	}
	if n := p.topUp(); n != seqPoolTopUp {
		t.Fatalf("a pool of %d tops up by %d, want %d", seqPoolLow-2, n, seqPoolTopUp)
	}
	now = now.Add(seqLife) // 22… are older than seqLife: stale
	if a, b, ok := p.take(0); ok {
		t.Fatalf("take = %d, %d from stale seqs", a, b)
	}
	for range 100 {
		p.take(0)
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
	old := waitingRun(t, s, "run-old")
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

// TestANewRunsFirstEventsMakeItsHead: the statement that inserts a new
// run's first events with pooled seqs (TestANewRunsWriteTakesPooledSeqs
// counts its round trip) makes the run's head at the last of them, over
// none or over an empty one (a head read that wrote nothing);
// where events about the run's id were written before it, the server
// refuses the write (ErrHeadMoved) and nothing of it is stored.
func TestANewRunsFirstEventsMakeItsHead(t *testing.T) {
	t.Parallel()
	s := openStore(t, migrated(t))
	old := waitingRun(t, s, "run-old")
	for _, c := range []struct {
		name    string
		before  func(t *testing.T, runID string)
		refused bool
	}{
		{name: "none"},
		{name: "empty", before: func(t *testing.T, runID string) {
			if _, err := s.pool.Exec(t.Context(), `INSERT INTO audit_heads (run_id, seq, hash) VALUES ($1, 0, '')`, runID); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "events", refused: true, before: func(t *testing.T, runID string) {
			if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				return tx.AppendAudit(ctx, &record.AuditEvent{RunID: runID, Action: "refused"}, nil)
			}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := &record.Run{ID: "run-make-" + c.name, Status: record.StatusWaitingApproval, Seq: 1}
			if c.before != nil {
				c.before(t, run.ID)
			}
			// A reserving read tops the pool up.
			if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				_, err := tx.LoadRun(ctx, old.ID, storage.RunParts{Reserve: true})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			evs := []*record.AuditEvent{{RunID: run.ID, Action: "proposed"}, {RunID: run.ID, Action: "gated"}}
			err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				return tx.SaveRun(ctx, &storage.RunWrite{Run: run, Events: evs,
					Checkpoint: &record.Checkpoint{RunID: run.ID, Seq: 1, SchemaVersion: 2, Hash: "h-" + c.name}})
			})
			var events int
			if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM audit WHERE run_id = $1`, run.ID).Scan(&events); err != nil {
				t.Fatal(err)
			}
			if c.refused {
				var runs int
				if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM runs WHERE id = $1`, run.ID).Scan(&runs); err != nil {
					t.Fatal(err)
				}
				if !errors.Is(err, storage.ErrHeadMoved) || runs != 0 || events != 1 {
					t.Errorf("a new run whose id has events: %v, %d run rows, %d events; want ErrHeadMoved, none stored beside the one event", err, runs, events)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var head record.AuditRunHead
			if err := s.pool.QueryRow(t.Context(), `SELECT seq, hash FROM audit_heads WHERE run_id = $1`, run.ID).Scan(&head.Seq, &head.Hash); err != nil {
				t.Fatal(err)
			}
			if events != 2 || evs[0].PrevHash != "" || evs[1].PrevHash != evs[0].Hash || head.Seq != evs[1].Seq || head.Hash != evs[1].Hash {
				t.Errorf("%d events %+v, head %+v; want two chained from none and the head at the second", events, evs, head)
			}
		})
	}
}

// waitingRun stores a run waiting for approval, with no events, whose
// reserving read tops the store's pool up.
func waitingRun(t *testing.T, s *Store, id string) *record.Run {
	t.Helper()
	r := &record.Run{ID: id, Status: record.StatusWaitingApproval, Seq: 1}
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.SaveRun(ctx, &storage.RunWrite{Run: r, Checkpoint: &record.Checkpoint{RunID: r.ID, Seq: 1, SchemaVersion: 2, Hash: "h-" + id}})
	}); err != nil {
		t.Fatal(err)
	}
	return r
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

// TestAWriteFollowingItsHeadTakesPooledSeqs: a transition that names the
// head its run's last write left (RunWrite.Follows) reads nothing: with
// seqs pooled it goes with COMMIT in one round trip, its events taking
// them and chaining after that head. An event appended since makes the
// server refuse it (ErrHeadMoved), storing nothing of it; the aborted
// transaction's ROLLBACK is a second round trip. With the pool
// empty it reads the head as before, two round trips, and tops the pool up.
func TestAWriteFollowingItsHeadTakesPooledSeqs(t *testing.T) {
	t.Parallel()
	s := openStore(t, migrated(t))
	for _, c := range []struct {
		name         string
		empty, moved bool
		older        bool
		trips        int64
		wantConflict bool
		wantFromPool bool
	}{
		{name: "pooled", trips: 1, wantFromPool: true},
		// The refusal, then the ROLLBACK of the aborted transaction.
		{name: "moved", moved: true, trips: 2, wantConflict: true},
		{name: "empty", empty: true, trips: 2},
		// Seqs pooled before the head's are not taken: the run's events
		// keep their chain's order.
		{name: "older", older: true, trips: 1, wantFromPool: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var older []pooledSeq // seqs taken before the run's first event
			for range 2 {
				var seq int64
				if err := s.pool.QueryRow(t.Context(), `SELECT nextval('audit_seq')`).Scan(&seq); err != nil {
					t.Fatal(err)
				}
				older = append(older, pooledSeq{seq: seq, at: time.Now()})
			}
			if c.older {
				// The run's first event then takes a seq after them.
				s.seqs.mu.Lock()
				s.seqs.seqs = nil
				s.seqs.mu.Unlock()
			}
			run := &record.Run{ID: "run-follow-" + c.name, Status: record.StatusWaitingApproval, Seq: 1}
			first := &record.AuditEvent{RunID: run.ID, Action: "proposed"}
			if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				return tx.SaveRun(ctx, &storage.RunWrite{Run: run, Events: []*record.AuditEvent{first},
					Checkpoint: &record.Checkpoint{RunID: run.ID, Seq: 1, SchemaVersion: 2, Hash: "h1-" + c.name}})
			}); err != nil {
				t.Fatal(err)
			}
			if c.moved {
				if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
					return tx.AppendAudit(ctx, &record.AuditEvent{RunID: run.ID, Action: "refused"}, nil)
				}); err != nil {
					t.Fatal(err)
				}
			}
			// A reserving read tops the pool up; an empty pool is emptied.
			if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				_, err := tx.LoadRun(ctx, run.ID, storage.RunParts{Reserve: true})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			s.seqs.mu.Lock()
			if c.empty {
				s.seqs.seqs = nil
			}
			var oldest int64
			if len(s.seqs.seqs) > 0 {
				oldest = s.seqs.seqs[0].seq
			}
			if c.older {
				s.seqs.seqs = append(older, s.seqs.seqs...)
			}
			s.seqs.mu.Unlock()
			next := *run
			next.Status, next.Seq = record.StatusExecuting, 2
			evs := []*record.AuditEvent{{RunID: run.ID, Action: "decided"}, {RunID: run.ID, Action: "finished"}}
			before := s.RoundTrips()
			err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				return tx.SaveRun(ctx, &storage.RunWrite{Run: &next, Events: evs,
					Follows:    &record.AuditRunHead{RunID: run.ID, Seq: first.Seq, Hash: first.Hash},
					Checkpoint: &record.Checkpoint{RunID: run.ID, Seq: 2, SchemaVersion: 2, Hash: "h2-" + c.name}})
			})
			if trips := s.RoundTrips() - before; trips != c.trips {
				t.Errorf("the write took %d round trips, want %d", trips, c.trips)
			}
			var b *storage.RunBundle
			if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				var err error
				b, err = tx.LoadRun(ctx, run.ID, storage.RunParts{Checkpoints: true, Audit: true})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if c.wantConflict {
				if !errors.Is(err, storage.ErrHeadMoved) || !errors.Is(err, storage.ErrConflict) {
					t.Fatalf("the write after a moved head: %v, want ErrHeadMoved, an ErrConflict", err)
				}
				if b.Run.Version != 1 || len(b.Checkpoints) != 1 || len(b.Audit) != 2 {
					t.Errorf("after the refused write: version %d, %d checkpoints, %d events; want 1, 1, 2", b.Run.Version, len(b.Checkpoints), len(b.Audit))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := b.Audit
			if len(got) != 3 || got[1].PrevHash != first.Hash || got[2].PrevHash != got[1].Hash || got[0].Seq >= got[1].Seq || got[1].Seq >= got[2].Seq ||
				got[1].Hash != record.AuditHash(got[1]) || got[2].Hash != record.AuditHash(got[2]) {
				t.Fatalf("events %+v, want two more chained after the first", got)
			}
			if b.AuditHead == nil || b.AuditHead.Hash != got[2].Hash {
				t.Errorf("head %+v, want the last event", b.AuditHead)
			}
			if fromPool := got[1].Seq == oldest; fromPool != c.wantFromPool {
				t.Errorf("event at seq %d, pool's oldest %d: pooled %v, want %v", got[1].Seq, oldest, fromPool, c.wantFromPool)
			}
			s.seqs.mu.Lock()
			pooled := len(s.seqs.seqs)
			s.seqs.mu.Unlock()
			if c.empty && pooled == 0 {
				t.Error("a write that found the pool empty left it empty")
			}
		})
	}
}
