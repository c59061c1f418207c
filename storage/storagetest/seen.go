package storagetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// claimSeen claims r in its own transaction.
func claimSeen(t *testing.T, s storage.Store, r *record.SeenRequest) (*record.SeenRequest, bool) {
	t.Helper()
	var (
		first   *record.SeenRequest
		claimed bool
	)
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		var err error
		first, claimed, err = tx.ClaimRequest(ctx, r)
		return err
	})
	return first, claimed
}

func loadSeen(t *testing.T, s storage.Store, digest string) *record.SeenRequest {
	t.Helper()
	return load(t, s, func(ctx context.Context, tx storage.Tx) (*record.SeenRequest, error) {
		return tx.SeenRequest(ctx, digest)
	})
}

// testSeenRequests: the first claim of a digest wins and is stored as given;
// a second claim stores nothing and is given the first, before and after its
// answer; the answer is a compare-and-set that a second answer cannot overwrite.
func testSeenRequests(t *testing.T, s storage.Store) {
	ctx := context.Background()
	first := &record.SeenRequest{Digest: "d1", CreatedAt: odd, ExpiresAt: odd.Add(10 * time.Minute)}
	got, claimed := claimSeen(t, s, first)
	if !claimed || got.Version != 1 {
		t.Fatalf("first claim: claimed %v, version %d; want a claim at version 1", claimed, got.Version)
	}
	checkSame(t, "claimed request", stored(first), loadSeen(t, s, "d1"))

	replay := &record.SeenRequest{Digest: "d1", CreatedAt: odd.Add(time.Minute), ExpiresAt: odd.Add(time.Hour)}
	got, claimed = claimSeen(t, s, replay)
	if claimed {
		t.Fatal("a second claim of the same digest claimed it")
	}
	checkSame(t, "the first, as the second claimer sees it", stored(first), got)
	if got.Answered() {
		t.Error("an unanswered request reads as answered")
	}

	answered := *got
	answered.AnsweredAt, answered.Status, answered.ContentType, answered.Body = odd.Add(time.Second), 200, "application/json", []byte(`{"ok":true}`)
	update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.AnswerRequest(ctx, &answered) })
	if answered.Version != 2 {
		t.Errorf("version after the answer: %d, want 2", answered.Version)
	}
	got, claimed = claimSeen(t, s, replay)
	if claimed || !got.Answered() {
		t.Fatalf("claim after the answer: claimed %v, answered %v", claimed, got.Answered())
	}
	checkSame(t, "the answered first, as a later claimer sees it", stored(&answered), got)

	// A second handler that answers from a stale copy is refused: the first
	// answer is the only one.
	stale := *got
	stale.Version, stale.Status, stale.Body = 1, 500, []byte("other")
	err := s.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return tx.AnswerRequest(ctx, &stale) })
	wantErr(t, "a second answer", err, storage.ErrConflict)
	checkSame(t, "the answer after a refused second one", stored(&answered), loadSeen(t, s, "d1"))

	missing := &record.SeenRequest{Digest: "never-claimed", Version: 1, AnsweredAt: odd, Status: 200}
	err = s.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return tx.AnswerRequest(ctx, missing) })
	wantErr(t, "answer of an unclaimed request", err, storage.ErrNotFound)
	err = s.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		_, err := tx.SeenRequest(ctx, "never-claimed")
		return err
	})
	wantErr(t, "load of an unclaimed request", err, storage.ErrNotFound)

	// An empty body is kept apart from none: a reply with no content stays so.
	empty := &record.SeenRequest{Digest: "d2", CreatedAt: base, ExpiresAt: base.Add(time.Minute), AnsweredAt: base, Status: 200, Body: []byte{}}
	claimSeen(t, s, empty)
	checkSame(t, "request answered with an empty body", stored(empty), loadSeen(t, s, "d2"))
}

// testConcurrentRequestClaims: copies of one request arriving at once (a
// replay sent to every replica) are claimed once; the others see that claim.
func testConcurrentRequestClaims(t *testing.T, s storage.Store) {
	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claims  int
		created []time.Time
	)
	for i := range n {
		wg.Go(func() {
			r := &record.SeenRequest{Digest: "same", CreatedAt: base.Add(time.Duration(i) * time.Second), ExpiresAt: base.Add(time.Hour)}
			err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				first, claimed, err := tx.ClaimRequest(ctx, r)
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				if claimed {
					claims++
				}
				created = append(created, first.CreatedAt)
				return nil
			})
			if err != nil {
				t.Errorf("claim %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if claims != 1 {
		t.Errorf("%d of %d concurrent claims of one digest claimed it, want 1", claims, n)
	}
	winner := loadSeen(t, s, "same").CreatedAt
	for _, c := range created {
		if !c.Equal(winner) {
			t.Errorf("a claimer saw the request claimed at %v, but the stored claim is from %v", c, winner)
		}
	}
}

// testForgetRequests: the sweep deletes only requests whose window has
// passed (expires_at at or before now), soonest expired first, a bounded
// batch at a time.
func testForgetRequests(t *testing.T, s storage.Store) {
	ctx := context.Background()
	now := base.Add(time.Hour)
	expiries := map[string]time.Time{
		"long-gone":   now.Add(-time.Hour),
		"gone":        now.Add(-time.Minute),
		"just-now":    now,
		"still-valid": now.Add(time.Millisecond),
		"later":       now.Add(time.Hour),
	}
	for d, exp := range expiries {
		claimSeen(t, s, &record.SeenRequest{Digest: d, CreatedAt: base, ExpiresAt: exp})
	}
	forget := func(limit int) int {
		var n int
		update(t, s, func(ctx context.Context, tx storage.Tx) error {
			var err error
			n, err = tx.ForgetRequests(ctx, now, limit)
			return err
		})
		return n
	}
	left := func() []string {
		var out []string
		for d := range expiries {
			err := s.View(ctx, func(ctx context.Context, tx storage.Tx) error {
				_, err := tx.SeenRequest(ctx, d)
				return err
			})
			switch {
			case err == nil:
				out = append(out, d)
			case !errors.Is(err, storage.ErrNotFound):
				t.Fatalf("load %s: %v", d, err)
			}
		}
		slices.Sort(out)
		return out
	}
	if n := forget(2); n != 2 {
		t.Errorf("first batch of 2 forgot %d", n)
	}
	if got, want := left(), []string{"just-now", "later", "still-valid"}; !slices.Equal(got, want) {
		t.Errorf("after a batch of 2: %v left, want %v (the two expired longest first)", got, want)
	}
	if n := forget(0); n != 1 {
		t.Errorf("an unbounded sweep forgot %d, want 1", n)
	}
	if got, want := left(), []string{"later", "still-valid"}; !slices.Equal(got, want) {
		t.Errorf("after the sweep: %v left, want %v", got, want)
	}
	if n := forget(10); n != 0 {
		t.Errorf("a sweep with nothing expired forgot %d", n)
	}
	// A digest forgotten after its window may be claimed afresh; the edge
	// refuses such a copy anyway by its timestamp.
	if _, claimed := claimSeen(t, s, &record.SeenRequest{Digest: "gone", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}); !claimed {
		t.Error("a forgotten digest could not be claimed again")
	}
}
