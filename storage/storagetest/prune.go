package storagetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// What a prune reads and writes: the ended runs not pruned yet, the states of
// their checkpoints, their delivered outbox rows, and the count by status
// that the metrics read.

func testEndedRuns(t *testing.T, s storage.Store) {
	cutoff := base.Add(24 * time.Hour)
	type seed struct {
		id      string
		status  record.Status
		updated time.Time
		pruned  bool
	}
	seeds := []seed{
		{"r01-done", record.StatusDone, base, false},
		{"r02-failed", record.StatusFailed, base.Add(time.Hour), false},
		{"r03-rejected", record.StatusRejected, base, false},
		{"r04-expired", record.StatusExpired, base, false},
		{"r05-cancelled", record.StatusCancelled, base, false},
		{"r06-waiting", record.StatusWaitingApproval, base, false},
		{"r07-executing", record.StatusExecuting, base, false},
		{"r08-attention", record.StatusNeedsAttention, base, false},
		{"r09-running", record.StatusRunning, base, false},
		{"r10-done-late", record.StatusDone, cutoff, false}, // ended at the cutoff, not before
		{"r11-done-pruned", record.StatusDone, base, true},
	}
	for _, sd := range seeds {
		r := &record.Run{ID: sd.id, Status: sd.status, CreatedAt: base, UpdatedAt: sd.updated}
		if sd.pruned {
			r.PrunedAt = base.Add(time.Minute)
		}
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, r) })
	}
	ids := func(runs []*record.Run) []string {
		var out []string
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}
	all := []string{"r01-done", "r02-failed", "r03-rejected", "r04-expired", "r05-cancelled"}
	cases := []struct {
		name string
		f    storage.EndedFilter
		want []string
	}{
		{"every ended run before the cutoff", storage.EndedFilter{Before: cutoff}, all},
		{"limit", storage.EndedFilter{Before: cutoff, Limit: 2}, all[:2]},
		{"after a cursor", storage.EndedFilter{Before: cutoff, AfterCreated: base, AfterID: "r02-failed", Limit: 2}, all[2:4]},
		{"cutoff before every end", storage.EndedFilter{Before: base}, nil},
		{"cutoff between two ends", storage.EndedFilter{Before: base.Add(time.Minute)}, []string{"r01-done", "r03-rejected", "r04-expired", "r05-cancelled"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Run, error) { return tx.EndedRuns(ctx, tc.f) })
			if !slices.Equal(ids(got), tc.want) {
				t.Errorf("EndedRuns(%+v) = %v, want %v", tc.f, ids(got), tc.want)
			}
		})
	}
	t.Run("a run marked pruned leaves the list", func(t *testing.T) {
		update(t, s, func(ctx context.Context, tx storage.Tx) error {
			r, err := tx.Run(ctx, "r01-done")
			if err != nil {
				return err
			}
			r.PrunedAt = base.Add(time.Hour)
			return tx.UpdateRun(ctx, r)
		})
		got := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Run, error) {
			return tx.EndedRuns(ctx, storage.EndedFilter{Before: cutoff})
		})
		if !slices.Equal(ids(got), all[1:]) {
			t.Errorf("EndedRuns after pruning r01 = %v, want %v", ids(got), all[1:])
		}
		r := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Run, error) { return tx.Run(ctx, "r01-done") })
		if !r.PrunedAt.Equal(base.Add(time.Hour)) {
			t.Errorf("PrunedAt = %v, want %v", r.PrunedAt, base.Add(time.Hour))
		}
	})
}

func testPruneCheckpoints(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-1")
	seedRun(t, s, "run-2")
	var cps []*record.Checkpoint
	for _, run := range []string{"run-1", "run-2"} {
		prev := ""
		for seq := int64(1); seq <= 4; seq++ {
			// Each written against the first: a pruned one keeps its base_seq too.
			c := &record.Checkpoint{RunID: run, Seq: seq, SchemaVersion: 1, State: []byte(fmt.Sprintf(`{"seq":%d}`, seq)),
				BaseSeq: min(seq-1, 1), PrevHash: prev, CreatedAt: base, Seal: record.Seal{KeyID: "k1", MAC: fmt.Sprintf("mac-%d", seq)}}
			c.Hash = record.CheckpointHash(c)
			prev = c.Hash
			update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.AppendCheckpoint(ctx, c) })
			if run == "run-1" {
				cps = append(cps, c)
			}
		}
	}
	at := odd.Add(time.Hour)
	prune := func(seq int64) int {
		var n int
		update(t, s, func(ctx context.Context, tx storage.Tx) error {
			var err error
			n, err = tx.PruneCheckpoints(ctx, "run-1", seq, at)
			return err
		})
		return n
	}
	if n := prune(3); n != 3 {
		t.Errorf("PruneCheckpoints(run-1, 3) = %d, want 3", n)
	}
	if n := prune(3); n != 0 {
		t.Errorf("PruneCheckpoints(run-1, 3) again = %d, want 0: it is idempotent", n)
	}
	got := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Checkpoint, error) {
		return tx.Checkpoints(ctx, "run-1")
	})
	if len(got) != 4 {
		t.Fatalf("Checkpoints after the prune: %d rows, want 4: a pruned checkpoint keeps its row", len(got))
	}
	for i, c := range got {
		want := *cps[i]
		if i < 3 {
			want.State, want.PrunedAt = nil, at
		}
		checkSame(t, fmt.Sprintf("checkpoint %d", c.Seq), stored(&want), c)
	}
	other := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Checkpoint, error) {
		return tx.Checkpoints(ctx, "run-2")
	})
	for _, c := range other {
		if c.State == nil || !c.PrunedAt.IsZero() {
			t.Errorf("run-2 checkpoint %d was pruned with run-1's", c.Seq)
		}
	}
	// The head join sees the same columns.
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		r, err := tx.Run(ctx, "run-1")
		if err != nil {
			return err
		}
		r.Seq = 2
		return tx.UpdateRun(ctx, r)
	})
	heads := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*storage.RunHead, error) {
		return tx.ListRunHeads(ctx, storage.RunFilter{})
	})
	if len(heads) != 2 || heads[0].Head == nil || !heads[0].Head.PrunedAt.Equal(at.Truncate(time.Millisecond)) || heads[0].Head.State != nil {
		t.Errorf("ListRunHeads does not show run-1's checkpoint 2 as pruned: %+v", heads[0].Head)
	}
}

func testOutboxForRun(t *testing.T, s storage.Store) {
	var msgs []*record.OutboxMessage
	for i, run := range []string{"run-1", "run-2", "run-1", "run-1"} {
		m := &record.OutboxMessage{RunID: run, Kind: "update", Payload: []byte(`{}`), CreatedAt: base}
		if i < 2 {
			m.DeliveredAt = base.Add(time.Minute)
		}
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.EnqueueOutbox(ctx, m) })
		msgs = append(msgs, m)
	}
	list := func(run string) []int64 {
		ms := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.OutboxMessage, error) {
			return tx.OutboxForRun(ctx, run)
		})
		var ids []int64
		for _, m := range ms {
			ids = append(ids, m.ID)
		}
		return ids
	}
	if got, want := list("run-1"), []int64{msgs[0].ID, msgs[2].ID, msgs[3].ID}; !slices.Equal(got, want) {
		t.Errorf("OutboxForRun(run-1) = %v, want %v", got, want)
	}
	var n int
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		var err error
		n, err = tx.DeleteDeliveredOutbox(ctx, "run-1")
		return err
	})
	if n != 1 {
		t.Errorf("DeleteDeliveredOutbox(run-1) = %d, want 1", n)
	}
	if got, want := list("run-1"), []int64{msgs[2].ID, msgs[3].ID}; !slices.Equal(got, want) {
		t.Errorf("after the delete, OutboxForRun(run-1) = %v, want %v: undelivered messages stay", got, want)
	}
	if got, want := list("run-2"), []int64{msgs[1].ID}; !slices.Equal(got, want) {
		t.Errorf("OutboxForRun(run-2) = %v, want %v: another run's messages stay", got, want)
	}
}

func testCountRuns(t *testing.T, s storage.Store) {
	got := load(t, s, func(ctx context.Context, tx storage.Tx) (map[record.Status]int, error) { return tx.CountRuns(ctx) })
	if len(got) != 0 {
		t.Errorf("CountRuns of an empty store = %v, want none", got)
	}
	want := map[record.Status]int{record.StatusDone: 3, record.StatusWaitingApproval: 2, record.StatusNeedsAttention: 1}
	i := 0
	for st, n := range want {
		for range n {
			i++
			r := &record.Run{ID: fmt.Sprintf("run-%d", i), Status: st, CreatedAt: base}
			update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, r) })
		}
	}
	got = load(t, s, func(ctx context.Context, tx storage.Tx) (map[record.Status]int, error) { return tx.CountRuns(ctx) })
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("CountRuns = %v, want %v", got, want)
	}
}
