package storagetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// testClaimRuns: a claim leases only free runs of the asked statuses, least
// recently updated first, fences the run (fence and version bump) and honours
// the limit; a lease that has run out can be claimed again by someone else.
func testClaimRuns(t *testing.T, s storage.Store) {
	ctx := context.Background()
	mk := func(id string, st record.Status, updated time.Time, leaseUntil time.Time) {
		r := &record.Run{ID: id, Workflow: "proposal", Status: st, CreatedAt: base, UpdatedAt: updated, LeaseOwner: "", LeaseUntil: leaseUntil}
		if !leaseUntil.IsZero() {
			r.LeaseOwner = "someone"
		}
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, r) })
	}
	mk("exec-old", record.StatusExecuting, base, time.Time{})
	mk("exec-new", record.StatusExecuting, base.Add(time.Minute), time.Time{})
	mk("running", record.StatusRunning, base.Add(2*time.Minute), time.Time{})
	mk("waiting", record.StatusWaitingApproval, base, time.Time{})
	mk("leased", record.StatusExecuting, base, base.Add(time.Hour))
	mk("lapsed", record.StatusExecuting, base.Add(3*time.Minute), base.Add(-time.Second))

	now, until := base, base.Add(30*time.Second)
	claim := func(owner string, now, until time.Time, limit int, statuses ...record.Status) []*record.Run {
		var out []*record.Run
		update(t, s, func(ctx context.Context, tx storage.Tx) error {
			var err error
			out, err = tx.ClaimRuns(ctx, owner, statuses, now, until, limit)
			return err
		})
		return out
	}
	got := claim("a", now, until, 2, record.StatusExecuting, record.StatusRunning)
	checkOrder(t, "first claim", got, func(r *record.Run) string { return r.ID }, "exec-old", "exec-new")
	for _, r := range got {
		if r.LeaseOwner != "a" || !r.LeaseUntil.Equal(until) || r.Fence != 1 || r.Version != 2 {
			t.Errorf("claimed %s: owner %q until %v fence %d version %d", r.ID, r.LeaseOwner, r.LeaseUntil, r.Fence, r.Version)
		}
		stored := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Run, error) { return tx.Run(ctx, r.ID) })
		checkSame(t, "claimed run "+r.ID, r, stored)
	}
	got = claim("b", now, until, 0, record.StatusExecuting, record.StatusRunning)
	checkOrder(t, "second claim", got, func(r *record.Run) string { return r.ID }, "running", "lapsed")
	if got = claim("c", now, until, 0, record.StatusExecuting, record.StatusRunning); len(got) != 0 {
		t.Errorf("leased runs were claimed again: %v", runIDs(got))
	}
	if got = claim("c", now, until, 0); len(got) != 0 {
		t.Errorf("no statuses claimed %v", runIDs(got))
	}
	// Once a lease runs out, another owner takes it and fences the first out.
	held := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Run, error) { return tx.Run(ctx, "exec-old") })
	got = claim("d", until, until.Add(30*time.Second), 1, record.StatusExecuting)
	if len(got) != 1 || got[0].ID != "exec-old" || got[0].Fence != 2 || got[0].LeaseOwner != "d" {
		t.Fatalf("claim after the lease ran out: %+v", got)
	}
	held.Reason = "late write of the first owner"
	err := s.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return tx.UpdateRun(ctx, held) })
	wantErr(t, "late write after the lease was taken over", err, storage.ErrConflict)
}

// testConcurrentClaims: claimers racing over the same runs never share one.
func testConcurrentClaims(t *testing.T, s storage.Store) {
	const runs, claimers = 40, 6
	for i := range runs {
		r := &record.Run{ID: fmt.Sprintf("run-%02d", i), Workflow: "proposal", Status: record.StatusExecuting, CreatedAt: base, UpdatedAt: base}
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, r) })
	}
	var mu sync.Mutex
	owner := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, claimers)
	for c := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("claimer-%d", c)
			for {
				var got []*record.Run
				err := s.Update(context.Background(), func(ctx context.Context, tx storage.Tx) error {
					var err error
					got, err = tx.ClaimRuns(ctx, name, []record.Status{record.StatusExecuting}, base, base.Add(time.Hour), 3)
					return err
				})
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					if prev, dup := owner[r.ID]; dup {
						errs <- fmt.Errorf("%s claimed by %s and %s", r.ID, prev, name)
					}
					owner[r.ID] = name
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(owner) != runs {
		t.Errorf("%d of %d runs claimed", len(owner), runs)
	}
}
