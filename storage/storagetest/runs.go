package storagetest

// The runs: their round trip, idempotency keys, lists, heads and loads.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

func testRunRoundTrip(t *testing.T, s storage.Store) {
	cases := []struct {
		name string
		run  *record.Run
	}{
		{"every field set", &record.Run{
			ID: "run-full", Workflow: "refund-agent", TaskID: "T-65273", Status: record.StatusWaitingApproval,
			Step: 3, Seq: 4, Version: 42, RequesterID: "agent:resolver", IdempotencyKey: "idem-1",
			Fingerprint: "9f86d081884c7d65", Reason: "waiting for a team lead",
			Deadline: odd.Add(72 * time.Hour), ParentID: "run-parent", ParentSeq: 2,
			LeaseOwner: "replica-1", LeaseUntil: odd.Add(30 * time.Second), Fence: 7,
			CreatedAt: odd, UpdatedAt: odd.Add(time.Second), PrunedAt: odd.Add(time.Hour), CallbackURL: "https://agents.example/signoff/é?run=1",
		}},
		{"zero times and empty strings", &record.Run{ID: "run-min", Status: record.StatusRunning}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.run
			update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, in) })
			if in.Version != 1 {
				t.Errorf("after InsertRun Version = %d, want 1", in.Version)
			}
			got := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Run, error) { return tx.Run(ctx, in.ID) })
			checkSame(t, "Run", stored(in), got)
			if in.IdempotencyKey != "" {
				got := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Run, error) {
					return tx.RunByIdempotencyKey(ctx, in.RequesterID, in.IdempotencyKey)
				})
				checkSame(t, "RunByIdempotencyKey", stored(in), got)
				view(t, s, func(ctx context.Context, tx storage.Tx) error {
					_, err := tx.RunByIdempotencyKey(ctx, "someone-else", in.IdempotencyKey)
					wantErr(t, "RunByIdempotencyKey of another requester", err, storage.ErrNotFound)
					return nil
				})
			}
		})
	}
}

// testRequesterKeys: a key is unique per requester only. The same key from
// two requesters is two runs, each found by its own requester, and a third
// finds none.
func testRequesterKeys(t *testing.T, s storage.Store) {
	for _, r := range []struct{ id, requester string }{{"run-a", "agent:a"}, {"run-b", "agent:b"}} {
		update(t, s, func(ctx context.Context, tx storage.Tx) error {
			return tx.InsertRun(ctx, &record.Run{ID: r.id, Status: record.StatusRunning, RequesterID: r.requester, IdempotencyKey: "ticket-1"})
		})
	}
	view(t, s, func(ctx context.Context, tx storage.Tx) error {
		for requester, want := range map[string]string{"agent:a": "run-a", "agent:b": "run-b"} {
			r, err := tx.RunByIdempotencyKey(ctx, requester, "ticket-1")
			if err != nil || r.ID != want {
				t.Errorf("%s's key ticket-1 names %+v (%v), want %s", requester, r, err, want)
			}
		}
		_, err := tx.RunByIdempotencyKey(ctx, "agent:c", "ticket-1")
		wantErr(t, "RunByIdempotencyKey of a requester without the key", err, storage.ErrNotFound)
		return nil
	})
}

func testEmptyIdempotencyKeys(t *testing.T, s storage.Store) {
	for _, id := range []string{"run-a", "run-b", "run-c"} {
		seedRun(t, s, id)
	}
	n := len(load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Run, error) {
		return tx.ListRuns(ctx, storage.RunFilter{})
	}))
	if n != 3 {
		t.Errorf("runs without an idempotency key: got %d stored, want 3", n)
	}
	view(t, s, func(ctx context.Context, tx storage.Tx) error {
		_, err := tx.RunByIdempotencyKey(ctx, "", "")
		wantErr(t, `RunByIdempotencyKey("", "")`, err, storage.ErrNotFound)
		return nil
	})
}

// testUpdateRunKeepsTheIdentity: UpdateRun writes what a run's life changes
// and nothing of what identifies the run (workflow, task, requester,
// idempotency key, parent, creation time, callback URL): those are written
// once, by InsertRun, so no transition can rewrite who asked for a run.
func testUpdateRunKeepsTheIdentity(t *testing.T, s storage.Store) {
	in := &record.Run{ID: "run-identity", Workflow: "proposal", TaskID: "T-1", Status: record.StatusRunning,
		RequesterID: "U1", IdempotencyKey: "identity-key", ParentID: "run-parent", ParentSeq: 1,
		CallbackURL: "https://hooks.example.com/a", CreatedAt: base, UpdatedAt: base}
	update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, in) })
	want := *in
	changed := *in
	changed.Workflow, changed.TaskID, changed.RequesterID = "other", "T-2", "U2"
	changed.IdempotencyKey, changed.ParentID, changed.ParentSeq = "other-key", "", 0
	changed.CallbackURL, changed.CreatedAt = "https://hooks.example.com/b", odd
	changed.Status, changed.UpdatedAt = record.StatusExecuting, odd
	update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.UpdateRun(ctx, &changed) })
	want.Status, want.UpdatedAt, want.Version = record.StatusExecuting, odd, changed.Version
	got := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Run, error) { return tx.Run(ctx, in.ID) })
	checkSame(t, "after an update that changed the identity", stored(&want), got)
}

func testListOrder(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-1")
	seedRun(t, s, "run-2")
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		var errs []error
		// Inserted out of order, to show the lists sort rather than echo insertion.
		for _, seq := range []int64{3, 1, 2} {
			errs = append(errs, tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: "run-1", Seq: seq, SchemaVersion: 1}))
		}
		for _, r := range []struct {
			id string
			at time.Duration
		}{{"req-c", 2 * time.Minute}, {"req-b", time.Minute}, {"req-a", time.Minute}} {
			errs = append(errs, tx.InsertRequest(ctx, &record.ApprovalRequest{ID: r.id, RunID: "run-1",
				Status: record.RequestPending, CreatedAt: base.Add(r.at)}))
		}
		errs = append(errs, tx.InsertRequest(ctx, &record.ApprovalRequest{ID: "req-other-run", RunID: "run-2",
			Status: record.RequestPending, CreatedAt: base}))
		for _, i := range []int{2, 0, 1} {
			errs = append(errs, tx.InsertOperation(ctx, &record.Operation{Key: fmt.Sprintf("run-1/%d", i), RunID: "run-1",
				Index: i, Status: record.OpPending}))
		}
		errs = append(errs, tx.InsertOperation(ctx, &record.Operation{Key: "run-2/0", RunID: "run-2", Status: record.OpPending}))
		for i, who := range []string{"U3", "U1", "U2"} {
			errs = append(errs, tx.InsertDecision(ctx, &record.Decision{RequestID: "req-a", RunID: "run-1", ApproverID: who,
				Verdict: record.VerdictApprove, At: base.Add(time.Duration(i) * time.Second)}))
		}
		errs = append(errs, tx.InsertDecision(ctx, &record.Decision{RequestID: "req-other-run", RunID: "run-2",
			ApproverID: "U1", Verdict: record.VerdictApprove}))
		return errors.Join(errs...)
	})
	view(t, s, func(ctx context.Context, tx storage.Tx) error {
		cs, err := tx.Checkpoints(ctx, "run-1")
		if err != nil {
			return err
		}
		checkOrder(t, "Checkpoints by seq", cs, func(c *record.Checkpoint) string { return fmt.Sprint(c.Seq) }, "1", "2", "3")
		rs, err := tx.RequestsForRun(ctx, "run-1")
		if err != nil {
			return err
		}
		checkOrder(t, "RequestsForRun oldest first", rs, func(r *record.ApprovalRequest) string { return r.ID },
			"req-a", "req-b", "req-c")
		ops, err := tx.Operations(ctx, "run-1")
		if err != nil {
			return err
		}
		checkOrder(t, "Operations by index", ops, func(o *record.Operation) string { return o.Key },
			"run-1/0", "run-1/1", "run-1/2")
		ds, err := tx.Decisions(ctx, "run-1")
		if err != nil {
			return err
		}
		checkOrder(t, "Decisions in the order they were made", ds, func(d *record.Decision) string { return d.ApproverID },
			"U3", "U1", "U2")
		return nil
	})
}

func checkOrder[T any](t *testing.T, what string, got []T, key func(T) string, want ...string) {
	t.Helper()
	keys := make([]string, len(got))
	for i, v := range got {
		keys[i] = key(v)
	}
	if !slices.Equal(keys, want) {
		t.Errorf("%s: got %v, want %v", what, keys, want)
	}
}

// listFixture is a set of runs with tied creation times, deadlines on some, and
// statuses of every kind, inserted in an order unlike the one listed.
func listFixture(t *testing.T, s storage.Store) []*record.Run {
	t.Helper()
	const noDeadline = -1
	specs := []struct {
		id       string
		status   record.Status
		created  time.Duration
		deadline time.Duration
	}{
		{"r10", record.StatusExpired, 7 * time.Minute, time.Hour},
		{"r09", record.StatusWaitingApproval, 6 * time.Minute, 24 * time.Hour},
		{"r08", record.StatusNeedsAttention, 5 * time.Minute, 2 * time.Hour},
		{"r07", record.StatusWaitingApproval, 5 * time.Minute, time.Hour},
		{"r06", record.StatusDone, 4 * time.Minute, noDeadline},
		{"r05", record.StatusWaitingApproval, 3 * time.Minute, noDeadline},
		{"r04", record.StatusExecuting, 2 * time.Minute, noDeadline},
		{"r03", record.StatusWaitingApproval, time.Minute, 5 * time.Hour},
		{"r02", record.StatusWaitingApproval, time.Minute, 10 * time.Hour},
		{"r01", record.StatusRunning, 0, noDeadline},
		{"r00", record.StatusWaitingApproval, -time.Minute, 3 * time.Hour},
	}
	var runs []*record.Run
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		for _, sp := range specs {
			r := &record.Run{ID: sp.id, Status: sp.status, CreatedAt: odd.Add(sp.created), UpdatedAt: odd}
			// Tasks and requesters cut across statuses and times, so that a
			// filter on one is told apart from a filter on another.
			switch sp.id {
			case "r02", "r05", "r09":
				r.TaskID = "T-1"
			case "r03":
				r.TaskID = "T-2"
			}
			r.RequesterID = "agent:b"
			if slices.Contains([]string{"r00", "r02", "r06", "r10"}, sp.id) {
				r.RequesterID = "agent:a"
			}
			if sp.deadline != noDeadline {
				r.Deadline = odd.Add(sp.deadline)
			}
			if err := tx.InsertRun(ctx, r); err != nil {
				return err
			}
			runs = append(runs, stored(r))
		}
		return nil
	})
	return runs
}

// referenceList is ListRuns written out plainly, to hold drivers against.
func referenceList(all []*record.Run, f storage.RunFilter) []*record.Run {
	var out []*record.Run
	after := stored(&record.Run{CreatedAt: f.AfterCreated}).CreatedAt
	before := stored(&record.Run{CreatedAt: f.DeadlineBefore}).CreatedAt
	for _, r := range all {
		if len(f.Statuses) > 0 && !slices.Contains(f.Statuses, r.Status) {
			continue
		}
		if f.TaskID != "" && r.TaskID != f.TaskID || f.RequesterID != "" && r.RequesterID != f.RequesterID {
			continue
		}
		if !before.IsZero() && (r.Deadline.IsZero() || !r.Deadline.Before(before)) {
			continue
		}
		if !after.IsZero() || f.AfterID != "" {
			if c := r.CreatedAt.Compare(after); c < 0 || (c == 0 && r.ID <= f.AfterID) {
				continue
			}
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *record.Run) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out
}

func runIDs(rs []*record.Run) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

func testListRuns(t *testing.T, s storage.Store) {
	all := listFixture(t, s)
	waiting := []record.Status{record.StatusWaitingApproval}
	cases := []struct {
		name string
		f    storage.RunFilter
		want []string // spelled out, and checked against referenceList too
	}{
		{"everything oldest first, ties by id", storage.RunFilter{},
			[]string{"r00", "r01", "r02", "r03", "r04", "r05", "r06", "r07", "r08", "r09", "r10"}},
		{"one status", storage.RunFilter{Statuses: waiting},
			[]string{"r00", "r02", "r03", "r05", "r07", "r09"}},
		{"several statuses", storage.RunFilter{Statuses: []record.Status{record.StatusNeedsAttention, record.StatusDone}},
			[]string{"r06", "r08"}},
		{"a status nobody has", storage.RunFilter{Statuses: []record.Status{record.StatusCancelled}}, nil},
		{"deadline strictly before, zero deadlines never", storage.RunFilter{DeadlineBefore: odd.Add(5 * time.Hour)},
			[]string{"r00", "r07", "r08", "r10"}},
		{"status and deadline", storage.RunFilter{Statuses: waiting, DeadlineBefore: odd.Add(5*time.Hour + time.Millisecond)},
			[]string{"r00", "r03", "r07"}},
		{"limit", storage.RunFilter{Limit: 3}, []string{"r00", "r01", "r02"}},
		{"cursor inside a tie", storage.RunFilter{AfterCreated: odd.Add(time.Minute), AfterID: "r02"},
			[]string{"r03", "r04", "r05", "r06", "r07", "r08", "r09", "r10"}},
		{"cursor, status and limit", storage.RunFilter{Statuses: waiting, AfterCreated: odd.Add(time.Minute), AfterID: "r03", Limit: 2},
			[]string{"r05", "r07"}},
		{"cursor past the end", storage.RunFilter{AfterCreated: odd.Add(7 * time.Minute), AfterID: "r10"}, nil},
		{"one task", storage.RunFilter{TaskID: "T-1"}, []string{"r02", "r05", "r09"}},
		{"a task nobody has", storage.RunFilter{TaskID: "T-9"}, nil},
		{"one requester", storage.RunFilter{RequesterID: "agent:a"}, []string{"r00", "r02", "r06", "r10"}},
		{"task and requester", storage.RunFilter{TaskID: "T-1", RequesterID: "agent:a"}, []string{"r02"}},
		{"requester, status, cursor and limit", storage.RunFilter{RequesterID: "agent:b", Statuses: waiting,
			AfterCreated: odd.Add(time.Minute), AfterID: "r03", Limit: 2}, []string{"r05", "r07"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if ref := runIDs(referenceList(all, tc.f)); !slices.Equal(ref, tc.want) {
				t.Fatalf("the test disagrees with itself: reference %v, spelled out %v", ref, tc.want)
			}
			got := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Run, error) {
				return tx.ListRuns(ctx, tc.f)
			})
			if ids := runIDs(got); !slices.Equal(ids, tc.want) {
				t.Errorf("ListRuns(%+v) = %v, want %v", tc.f, ids, tc.want)
			}
			for _, r := range got {
				i := slices.IndexFunc(all, func(w *record.Run) bool { return w.ID == r.ID })
				if i >= 0 {
					checkSame(t, "listed run "+r.ID, all[i], r)
				}
			}
		})
	}
}

// testListRunHeads holds ListRunHeads to ListRuns, each run with its
// checkpoint at the run's seq: not an earlier one, and none when it is
// missing; and with the base that checkpoint names: none when it names
// none or the base is missing.
func testListRunHeads(t *testing.T, s storage.Store) {
	all := listFixture(t, s)
	heads := map[string]*record.Checkpoint{}
	bases := map[string]*record.Checkpoint{}
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		for _, c := range []struct {
			id              string
			seqs, row, base int64 // base: of the checkpoint at row
		}{{"r02", 2, 2, 1}, {"r03", 1, 1, 7}, {"r05", 1, 2, 0}, {"r09", 3, 3, 2}} {
			written := map[int64]*record.Checkpoint{}
			for seq := int64(1); seq <= c.seqs; seq++ {
				cp := &record.Checkpoint{RunID: c.id, Seq: seq, SchemaVersion: record.SchemaVersion,
					State: []byte(fmt.Sprintf(`{"run":%q,"seq":%d,"evidence":%s}`, c.id, seq, BigJSON(int(seq)*1000))), PrevHash: fmt.Sprintf("prev-%d", seq),
					CreatedAt: odd.Add(time.Duration(seq) * time.Second)}
				if seq == 1 {
					cp.Seal = record.Seal{KeyID: "k1", MAC: "mac-" + c.id}
				}
				if seq == c.row {
					cp.BaseSeq = c.base
				}
				cp.Hash = record.CheckpointHash(cp)
				if err := tx.AppendCheckpoint(ctx, cp); err != nil {
					return err
				}
				written[seq] = stored(cp)
				if seq == c.row {
					heads[c.id] = stored(cp)
				}
			}
			if b := written[c.base]; b != nil && heads[c.id] != nil {
				bases[c.id] = b
			}
			i := slices.IndexFunc(all, func(r *record.Run) bool { return r.ID == c.id })
			r := all[i]
			r.Seq = c.row
			if err := tx.UpdateRun(ctx, r); err != nil {
				return err
			}
			all[i] = stored(r)
		}
		return nil
	})
	waiting := []record.Status{record.StatusWaitingApproval}
	for _, tc := range []struct {
		name string
		f    storage.RunFilter
	}{
		{"everything", storage.RunFilter{}},
		{"one status", storage.RunFilter{Statuses: waiting}},
		{"status and limit", storage.RunFilter{Statuses: waiting, Limit: 3}},
		{"cursor, status and limit", storage.RunFilter{Statuses: waiting, AfterCreated: odd.Add(time.Minute), AfterID: "r02", Limit: 2}},
		{"deadline", storage.RunFilter{DeadlineBefore: odd.Add(5*time.Hour + time.Millisecond)}},
	} {
		f := tc.f
		t.Run(tc.name, func(t *testing.T) {
			want := referenceList(all, f)
			got := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*storage.RunHead, error) {
				return tx.ListRunHeads(ctx, f)
			})
			if len(got) != len(want) {
				t.Fatalf("ListRunHeads(%+v): %d runs, want %v", f, len(got), runIDs(want))
			}
			for i, h := range got {
				checkSame(t, "listed run "+want[i].ID, want[i], h.Run)
				switch w := heads[h.Run.ID]; {
				case w == nil && h.Head != nil:
					t.Errorf("run %s: head %d, want none", h.Run.ID, h.Head.Seq)
				case w != nil && h.Head == nil:
					t.Errorf("run %s: no head, want checkpoint %d", h.Run.ID, w.Seq)
				case w != nil:
					checkSame(t, "head of "+h.Run.ID, w, h.Head)
				}
				switch w := bases[h.Run.ID]; {
				case w == nil && h.Base != nil:
					t.Errorf("run %s: base %d, want none", h.Run.ID, h.Base.Seq)
				case w != nil && h.Base == nil:
					t.Errorf("run %s: no base, want checkpoint %d", h.Run.ID, w.Seq)
				case w != nil:
					checkSame(t, "base of "+h.Run.ID, w, h.Base)
				}
			}
		})
	}
}

func testListRunsPagination(t *testing.T, s storage.Store) {
	all := listFixture(t, s)
	for _, f := range []storage.RunFilter{
		{Limit: 1},
		{Limit: 3},
		{Statuses: []record.Status{record.StatusWaitingApproval}, Limit: 2},
		{DeadlineBefore: odd.Add(6 * time.Hour), Limit: 2},
	} {
		t.Run(fmt.Sprintf("%v limit %d", f.Statuses, f.Limit), func(t *testing.T) {
			want := runIDs(referenceList(all, storage.RunFilter{Statuses: f.Statuses, DeadlineBefore: f.DeadlineBefore}))
			var got []string
			for page := 0; ; page++ {
				if page > len(all) {
					t.Fatalf("pagination does not end; so far %v", got)
				}
				rs := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Run, error) {
					return tx.ListRuns(ctx, f)
				})
				if len(rs) > f.Limit {
					t.Fatalf("page %d has %d runs, limit %d", page, len(rs), f.Limit)
				}
				if len(rs) == 0 {
					break
				}
				got = append(got, runIDs(rs)...)
				last := rs[len(rs)-1]
				f.AfterCreated, f.AfterID = last.CreatedAt, last.ID
			}
			if !slices.Equal(got, want) {
				t.Errorf("pages joined = %v, want %v", got, want)
			}
		})
	}
}

// testConcurrentCompareAndSet: writers read the run, then compare-and-set it in a
// second transaction. Every attempt either wins or is told ErrConflict, and the
// version counts exactly the wins.
func testConcurrentCompareAndSet(t *testing.T, s storage.Store) {
	const writers, attempts = 8, 50
	seedRun(t, s, "run-hot")
	var wins, conflicts atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			<-start
			for range attempts {
				var r *record.Run
				err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
					var err error
					r, err = tx.Run(ctx, "run-hot")
					return err
				})
				if err != nil {
					t.Errorf("writer %d: read: %v", w, err)
					return
				}
				err = s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
					r.Step++
					r.LeaseOwner = fmt.Sprintf("writer-%d", w)
					return tx.UpdateRun(ctx, r)
				})
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, storage.ErrConflict):
					conflicts.Add(1)
				default:
					t.Errorf("writer %d: update: %v", w, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	won, lost := wins.Load(), conflicts.Load()
	if won+lost != writers*attempts {
		t.Errorf("wins %d + conflicts %d = %d, want %d attempts", won, lost, won+lost, writers*attempts)
	}
	if won == 0 {
		t.Errorf("no update won")
	}
	got := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Run, error) { return tx.Run(ctx, "run-hot") })
	if got.Version != 1+won {
		t.Errorf("final version %d, want 1 + %d wins", got.Version, won)
	}
	if int64(got.Step) != won {
		t.Errorf("final step %d, want %d: a lost update was applied or a won one lost", got.Step, won)
	}
	t.Logf("%d wins, %d conflicts", won, lost)
}

// testLoadRun: LoadRun gives what Run and each list method give, the parts
// asked for and no others, in a View and in an Update; ErrNotFound for a run
// that does not exist.
func testLoadRun(t *testing.T, s storage.Store) {
	for _, id := range []string{"run-1", "run-2"} {
		update(t, s, func(ctx context.Context, tx storage.Tx) error {
			if err := writeEverything(ctx, tx, id); err != nil {
				return err
			}
			return tx.InsertMessageLocation(ctx, &record.MessageLocation{RequestID: "req-" + id, RunID: id, Channel: "C1", TS: "1.0" + id[len(id)-1:], PostedAt: base})
		})
	}
	all := storage.RunParts{Checkpoints: true, Requests: true, Decisions: true, Operations: true, Messages: true, Audit: true, Outbox: true}
	for _, parts := range []storage.RunParts{{}, all, {Operations: true, Audit: true}, {Messages: true}, {Checkpoints: true, Outbox: true}} {
		for _, write := range []bool{false, true} {
			var got, want *storage.RunBundle
			fn := func(ctx context.Context, tx storage.Tx) error {
				var err error
				if got, err = tx.LoadRun(ctx, "run-1", parts); err != nil {
					return err
				}
				want = &storage.RunBundle{}
				if want.Run, err = tx.Run(ctx, "run-1"); err != nil {
					return err
				}
				if parts.Checkpoints {
					want.Checkpoints, err = tx.Checkpoints(ctx, "run-1")
				}
				if err == nil && parts.Requests {
					want.Requests, err = tx.RequestsForRun(ctx, "run-1")
				}
				if err == nil && parts.Decisions {
					want.Decisions, err = tx.Decisions(ctx, "run-1")
				}
				if err == nil && parts.Operations {
					want.Operations, err = tx.Operations(ctx, "run-1")
				}
				if err == nil && parts.Messages {
					want.Messages, err = tx.MessageLocations(ctx, "run-1")
				}
				if err == nil && parts.Outbox {
					want.Outbox, err = tx.OutboxForRun(ctx, "run-1")
				}
				if err == nil && parts.Audit {
					want.Audit, err = tx.AuditEvents(ctx, storage.AuditFilter{RunID: "run-1"})
					if err == nil {
						want.AuditHead, err = tx.AuditRunHead(ctx, "run-1")
					}
				}
				return err
			}
			if write {
				update(t, s, fn)
			} else if err := s.View(t.Context(), fn); err != nil {
				t.Fatal(err)
			}
			checkSame(t, fmt.Sprintf("LoadRun(%+v), write %v", parts, write), want, got)
		}
	}
	err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		_, err := tx.LoadRun(ctx, "nope", all)
		return err
	})
	wantErr(t, "LoadRun of a missing run", err, storage.ErrNotFound)
}
