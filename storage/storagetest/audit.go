package storagetest

// The audit log: its round trip and the chains.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func testAuditRoundTrip(t *testing.T, s storage.Store) {
	for i, p := range payloads {
		t.Run(p.name, func(t *testing.T) {
			in := &record.AuditEvent{RunID: "run-1", Actor: "U0LEAD0001", Action: "approve", Detail: p.b,
				At: odd.Add(time.Duration(i) * time.Second), Seq: 99, PrevHash: "bogus", Hash: "bogus"}
			update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.AppendAudit(ctx, in, nil) })
			es := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.AuditEvent, error) {
				return tx.AuditEvents(ctx, storage.AuditFilter{AfterSeq: in.Seq - 1})
			})
			if len(es) != 1 {
				t.Fatalf("AuditEvents after seq %d: got %d events, want 1", in.Seq-1, len(es))
			}
			checkSame(t, "AuditEvent", stored(in), es[0])
			if h := record.AuditHash(es[0]); h != es[0].Hash {
				t.Errorf("hash of the loaded event = %s, stored %s: the stored fields changed", h, es[0].Hash)
			}
		})
	}
}

// --- unique keys

func testAuditChain(t *testing.T, s storage.Store) {
	const perTx, txs = 5, 12
	runs := []string{"run-a", "run-b", "run-c", ""} // "" is an event about no run
	var appended []record.AuditEvent
	n := 0
	for range txs {
		update(t, s, func(ctx context.Context, tx storage.Tx) error {
			for range perTx {
				e := &record.AuditEvent{RunID: runs[n%len(runs)], Actor: fmt.Sprintf("actor-%d", n%3),
					Action: "step", Detail: []byte(fmt.Sprintf(`{"n":%d}`, n)), At: odd.Add(time.Duration(n) * time.Second)}
				if err := tx.AppendAudit(ctx, e, nil); err != nil {
					return err
				}
				appended = append(appended, *e)
				n++
			}
			return nil
		})
	}
	// A rolled-back append must leave no fork in its run's chain (it may
	// leave a gap in the seqs).
	err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		if err := tx.AppendAudit(ctx, &record.AuditEvent{RunID: "run-a", Action: "rolled back"}, nil); err != nil {
			return err
		}
		return errBoom
	})
	wantErr(t, "rolled-back append", err, errBoom)
	last := &record.AuditEvent{RunID: "run-a", Action: "last", At: odd}
	update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.AppendAudit(ctx, last, nil) })
	appended = append(appended, *last)

	t.Run("the appender is told seq, prev and hash", func(t *testing.T) {
		checkChain(t, pointers(appended))
	})
	all := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.AuditEvent, error) {
		return tx.AuditEvents(ctx, storage.AuditFilter{})
	})
	t.Run("stored chain", func(t *testing.T) {
		if len(all) != len(appended) {
			t.Fatalf("AuditEvents = %d events, want %d", len(all), len(appended))
		}
		checkChain(t, all)
		for i := range all {
			checkSame(t, fmt.Sprintf("event %d", all[i].Seq), stored(&appended[i]), all[i])
		}
	})
	t.Run("the newest first", func(t *testing.T) {
		got := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.AuditEvent, error) {
			return tx.AuditEvents(ctx, storage.AuditFilter{Newest: true, Limit: 2})
		})
		if n := len(all); len(got) != 2 || got[0].Seq != all[n-1].Seq || got[1].Seq != all[n-2].Seq {
			t.Errorf("AuditEvents(newest, 2) = %v, want the last two of %v", seqsOf(got), seqsOf(all))
		}
	})
	for _, run := range runs[:3] {
		t.Run("events of "+run, func(t *testing.T) {
			var want []int64
			for _, e := range all {
				if e.RunID == run {
					want = append(want, e.Seq)
				}
			}
			got := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.AuditEvent, error) {
				return tx.AuditEvents(ctx, storage.AuditFilter{RunID: run})
			})
			if seqs := seqsOf(got); !slices.Equal(seqs, want) {
				t.Errorf("AuditEvents(run %s) = %v, want %v", run, seqs, want)
			}
			// Paged with AfterSeq and Limit, the same events.
			var paged []int64
			after := int64(0)
			for page := 0; page <= len(all); page++ {
				es := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.AuditEvent, error) {
					return tx.AuditEvents(ctx, storage.AuditFilter{RunID: run, AfterSeq: after, Limit: 4})
				})
				if len(es) > 4 {
					t.Fatalf("page of %d events, limit 4", len(es))
				}
				if len(es) == 0 {
					break
				}
				paged = append(paged, seqsOf(es)...)
				after = es[len(es)-1].Seq
			}
			if !slices.Equal(paged, want) {
				t.Errorf("paged AuditEvents(run %s) = %v, want %v", run, paged, want)
			}
		})
	}
	t.Run("each run's head is its last event", func(t *testing.T) {
		want := map[string]*record.AuditEvent{}
		for _, e := range all {
			want[e.RunID] = e
		}
		heads := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.AuditRunHead, error) {
			return tx.AuditRunHeads(ctx)
		})
		if len(heads) != len(want) {
			t.Fatalf("AuditRunHeads = %d heads, want %d", len(heads), len(want))
		}
		for _, h := range heads {
			if e := want[h.RunID]; e == nil || h.Seq != e.Seq || h.Hash != e.Hash {
				t.Errorf("head of run %q = %d %s, want its last event %v", h.RunID, h.Seq, h.Hash, e)
			}
			one := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.AuditRunHead, error) {
				return tx.AuditRunHead(ctx, h.RunID)
			})
			checkSame(t, "AuditRunHead", h, one)
		}
		err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			_, err := tx.AuditRunHead(ctx, "nope")
			return err
		})
		wantErr(t, "AuditRunHead of a run without events", err, storage.ErrNotFound)
	})
	t.Run("anchors", func(t *testing.T) {
		var first []record.AnchoredHead
		update(t, s, func(ctx context.Context, tx storage.Tx) error {
			if _, err := tx.LatestAnchor(ctx); !errors.Is(err, storage.ErrNotFound) {
				return fmt.Errorf("LatestAnchor before any: %v, want ErrNotFound", err)
			}
			var err error
			if first, err = tx.AnchorHeads(ctx); err != nil {
				return err
			}
			return tx.InsertAnchor(ctx, &record.AuditAnchor{ID: 1, At: odd, Heads: first, Hash: "h1"})
		})
		if len(first) != 4 || first[0].RunID != "" || first[1].RunID != "run-a" {
			t.Fatalf("AnchorHeads = %v, want the four runs' heads by run id", first)
		}
		var second []record.AnchoredHead
		update(t, s, func(ctx context.Context, tx storage.Tx) error {
			if err := tx.AppendAudit(ctx, &record.AuditEvent{RunID: "run-b", Action: "later"}, nil); err != nil {
				return err
			}
			var err error
			second, err = tx.AnchorHeads(ctx)
			return err
		})
		if len(second) != 1 || second[0].RunID != "run-b" {
			t.Errorf("AnchorHeads after one append = %v, want run-b's head alone", second)
		}
		err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			return tx.InsertAnchor(ctx, &record.AuditAnchor{ID: 1, At: odd, Hash: "again"})
		})
		wantErr(t, "a second anchor 1", err, storage.ErrDuplicate)
		got := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.AuditAnchor, error) {
			return tx.AuditAnchors(ctx)
		})
		if len(got) != 1 {
			t.Fatalf("AuditAnchors = %d anchors, want 1", len(got))
		}
		checkSame(t, "AuditAnchor", &record.AuditAnchor{ID: 1, At: odd.Truncate(time.Millisecond).UTC(), Heads: first, Hash: "h1"}, got[0])
	})
}

func seqsOf(es []*record.AuditEvent) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

// checkChain checks that es is the whole chain from its start: seqs 1, 2, 3…,
// each PrevHash the previous Hash, each Hash what AuditHash says.
func checkChain(t *testing.T, es []*record.AuditEvent) {
	t.Helper()
	CheckAuditChains(t, es)
}

// CheckAuditChains checks events appended through the contract, in seq
// order: seqs increase, each event is chained per run (PrevHash the hash of
// the run's event before it, "" for its first) and matches its hash.
func CheckAuditChains(t testing.TB, es []*record.AuditEvent) {
	t.Helper()
	prev := map[string]string{}
	var last int64
	for _, e := range es {
		if e.Seq <= last {
			t.Errorf("event %d follows event %d: seqs must increase", e.Seq, last)
		}
		last = e.Seq
		if e.Format != record.AuditPerRun {
			t.Errorf("event %d has format %d, want %d (per run)", e.Seq, e.Format, record.AuditPerRun)
		}
		if e.PrevHash != prev[e.RunID] {
			t.Errorf("event %d of run %q: PrevHash %q, want the run's previous hash %q", e.Seq, e.RunID, e.PrevHash, prev[e.RunID])
		}
		if h := record.AuditHash(e); e.Hash != h {
			t.Errorf("event %d: Hash %q, want AuditHash %q", e.Seq, e.Hash, h)
		}
		prev[e.RunID] = e.Hash
	}
}

// --- transactions
