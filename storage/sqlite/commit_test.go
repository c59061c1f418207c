package sqlite

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlstore"
	"github.com/signoff-dev/signoff/storage/storagetest"
)

// queued is how many Updates wait for the committer.
func (s *Store) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// waitQueued waits until n Updates wait for the committer.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	for s.queued() < n {
		if t.Context().Err() != nil {
			t.Fatalf("%d updates queued, want %d", s.queued(), n)
		}
		runtime.Gosched()
	}
}

// gate starts an Update whose fn holds the write connection until release is
// called, so that the Updates made meanwhile queue and go in one batch after
// it. release lets it go on and returns where its Update's error will come.
func gate(t *testing.T, s *Store, fn func(ctx context.Context, tx storage.Tx) error) (release func() <-chan error) {
	t.Helper()
	entered, open := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			close(entered)
			<-open
			if fn != nil {
				return fn(ctx, tx)
			}
			return nil
		})
	}()
	<-entered
	return func() <-chan error {
		close(open)
		return errc
	}
}

// started writes what a started run writes: the run, its first checkpoint and
// two audit events.
func started(ctx context.Context, tx storage.Tx, id string) ([]int64, error) {
	a := &record.AuditEvent{RunID: id, Action: "submitted"}
	b := &record.AuditEvent{RunID: id, Action: "gated"}
	err := errors.Join(
		tx.InsertRun(ctx, &record.Run{ID: id, Status: record.StatusWaitingApproval, Seq: 1}),
		tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: id, Seq: 1, SchemaVersion: 1, State: []byte(`{}`)}),
		tx.AppendAudit(ctx, a, nil),
		tx.AppendAudit(ctx, b, nil),
	)
	return []int64{a.Seq, b.Seq}, err
}

// audit reads the whole audit chain and checks it.
func audit(t *testing.T, s *Store) []*record.AuditEvent {
	t.Helper()
	var evs []*record.AuditEvent
	if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) (err error) {
		evs, err = tx.AuditEvents(ctx, storage.AuditFilter{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	storagetest.CheckAuditChains(t, evs)
	return evs
}

func runExists(t *testing.T, s *Store, id string) bool {
	t.Helper()
	err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		_, err := tx.Run(ctx, id)
		return err
	})
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

var errBoom = errors.New("boom")

// TestBatchFailuresRollBackAlone: in one batch, callers whose fn fails or
// panics after writing leave nothing, and every other caller's work lands,
// its audit events in one unbroken chain in the order of the turns.
func TestBatchFailuresRollBackAlone(t *testing.T) {
	const callers = 30
	s := openStore(t, tempPath(t))
	release := gate(t, s, nil)
	before := s.Commits()

	type result struct {
		err       error
		recovered any
		seqs      []int64
	}
	results := make([]result, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			defer func() { results[i].recovered = recover() }()
			id := fmt.Sprintf("run-%02d", i)
			results[i].err = s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				seqs, err := started(ctx, tx, id)
				if err != nil {
					return err
				}
				switch i % 3 {
				case 1:
					return fmt.Errorf("caller %d: %w", i, errBoom)
				case 2:
					panic(errBoom)
				}
				results[i].seqs = seqs
				return nil
			})
		})
	}
	waitQueued(t, s, callers)
	if err := <-release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	if got := s.Commits() - before; got != 1 {
		t.Errorf("%d commits for one batch, want 1", got)
	}
	var kept [][]int64
	for i, r := range results {
		id := fmt.Sprintf("run-%02d", i)
		switch i % 3 {
		case 0:
			if r.err != nil || r.recovered != nil {
				t.Errorf("caller %d: err %v, panic %v; want neither", i, r.err, r.recovered)
			}
			if !runExists(t, s, id) {
				t.Errorf("caller %d succeeded but its run is missing", i)
			}
			kept = append(kept, r.seqs)
		case 1:
			if !errors.Is(r.err, errBoom) {
				t.Errorf("caller %d: err %v, want its own", i, r.err)
			}
		case 2:
			if r.recovered != errBoom {
				t.Errorf("caller %d: recovered %v, want its own panic %v", i, r.recovered, errBoom)
			}
		}
		if i%3 != 0 && runExists(t, s, id) {
			t.Errorf("caller %d failed but its run was kept", i)
		}
	}
	evs := audit(t, s)
	if len(evs) != 2*len(kept) {
		t.Fatalf("%d audit events, want %d (two per kept caller)", len(evs), 2*len(kept))
	}
	// Each caller's events are adjacent (turns do not interleave), and what
	// each caller was told is what the chain holds.
	slices.SortFunc(kept, func(a, b []int64) int { return int(a[0] - b[0]) })
	for k, seqs := range kept {
		if want := []int64{int64(2*k + 1), int64(2*k + 2)}; !slices.Equal(seqs, want) {
			t.Errorf("kept caller %d was given seqs %v, want %v", k, seqs, want)
		}
	}
	for _, e := range evs {
		var n int
		if _, err := fmt.Sscanf(e.RunID, "run-%d", &n); err != nil || n%3 != 0 {
			t.Errorf("audit event %d is about %s, a caller that failed", e.Seq, e.RunID)
		}
	}
}

// TestBatchCommitFailureReachesAll: when the batch's COMMIT fails, every caller
// of the batch gets the error and nothing of any of them is kept. A foreign key
// deferred to COMMIT makes the commit itself fail.
func TestBatchCommitFailureReachesAll(t *testing.T) {
	const callers = 10
	s := openStore(t, tempPath(t))
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		_, err := started(ctx, tx, "run-before")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	release := gate(t, s, func(ctx context.Context, tx storage.Tx) error {
		c := tx.(*sqlstore.Tx).Conn()
		if _, err := c.Exec(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
			return err
		}
		// Refers to no run: allowed until COMMIT checks the deferred key.
		return tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: "run-missing", Seq: 1, SchemaVersion: 1})
	})
	before := s.Commits()
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			errs[i] = s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				_, err := started(ctx, tx, fmt.Sprintf("run-%d", i))
				return err
			})
		})
	}
	waitQueued(t, s, callers)
	gateErr := <-release()
	wg.Wait()
	if gateErr == nil {
		t.Fatal("the batch committed a checkpoint of a missing run")
	}
	t.Logf("commit error: %v", gateErr)
	for i, err := range errs {
		if err == nil || err.Error() != gateErr.Error() {
			t.Errorf("caller %d: %v, want the commit's error %v", i, err, gateErr)
		}
		if runExists(t, s, fmt.Sprintf("run-%d", i)) {
			t.Errorf("caller %d's run was kept by a failed commit", i)
		}
	}
	if got := s.Commits() - before; got != 0 {
		t.Errorf("%d commits counted, want 0", got)
	}
	if evs := audit(t, s); len(evs) != 2 {
		t.Errorf("%d audit events after the failed batch, want the 2 of before", len(evs))
	}
	// The store goes on.
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		_, err := started(ctx, tx, "run-after")
		return err
	}); err != nil {
		t.Fatalf("update after a failed commit: %v", err)
	}
	if evs := audit(t, s); len(evs) != 4 {
		t.Errorf("%d audit events, want 4", len(evs))
	}
}

// TestBatchCancellation: a caller cancelled while queued leaves the batch at
// once and its fn never runs; one cancelled after its savepoint was released
// is committed with the batch and told so.
func TestBatchCancellation(t *testing.T) {
	s := openStore(t, tempPath(t))
	release := gate(t, s, nil)

	// Cancelled while queued.
	ctx, cancel := context.WithCancel(t.Context())
	queuedErr := make(chan error, 1)
	go func() {
		queuedErr <- s.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
			t.Error("the fn of a caller cancelled before its turn ran")
			return nil
		})
	}()
	waitQueued(t, s, 1)
	cancel()
	if err := <-queuedErr; !errors.Is(err, context.Canceled) {
		t.Errorf("Update cancelled while queued: %v, want context.Canceled", err)
	}

	// Cancelled between its turn and the commit: b runs, then c holds the
	// batch open while b's context is cancelled.
	bctx, bcancel := context.WithCancel(t.Context())
	defer bcancel()
	bErr, cErr := make(chan error, 1), make(chan error, 1)
	cEntered, cOpen := make(chan struct{}), make(chan struct{})
	go func() {
		bErr <- s.Update(bctx, func(ctx context.Context, tx storage.Tx) error {
			_, err := started(ctx, tx, "run-b")
			return err
		})
	}()
	waitQueued(t, s, 2) // the cancelled caller stays in the queue until skipped
	go func() {
		cErr <- s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			close(cEntered)
			<-cOpen
			_, err := started(ctx, tx, "run-c")
			return err
		})
	}()
	waitQueued(t, s, 3)
	gateErr := release()
	<-cEntered
	bcancel()
	close(cOpen)
	if err := <-bErr; err != nil {
		t.Errorf("caller cancelled after its turn: %v, want nil (committed with the batch)", err)
	}
	if err := <-cErr; err != nil {
		t.Fatal(err)
	}
	if err := <-gateErr; err != nil {
		t.Fatal(err)
	}
	if !runExists(t, s, "run-b") || !runExists(t, s, "run-c") {
		t.Error("a caller's work of the batch is missing")
	}
	audit(t, s)
}

// TestUpdateAfterClose: Close answers what is queued and refuses what comes
// after.
func TestUpdateAfterClose(t *testing.T) {
	s, err := Open(t.Context(), tempPath(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), func(context.Context, storage.Tx) error { return nil }); err == nil {
		t.Error("Update after Close succeeded")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestBatchLostTransaction: when a caller's turn ends the batch's transaction
// (SQLite rolls a whole transaction back by itself on some errors: a full
// disk, an I/O error), the callers before it are told their work was lost,
// and the callers after it go in a new transaction and land.
func TestBatchLostTransaction(t *testing.T) {
	const after = 5
	s := openStore(t, tempPath(t))
	release := gate(t, s, func(ctx context.Context, tx storage.Tx) error {
		_, err := started(ctx, tx, "run-before")
		return err
	})
	breakErr := make(chan error, 1)
	go func() {
		breakErr <- s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			if _, err := started(ctx, tx, "run-breaker"); err != nil {
				return err
			}
			// What SQLite does by itself after such an error.
			_, err := tx.(*sqlstore.Tx).Conn().Exec(ctx, "ROLLBACK")
			return err
		})
	}()
	waitQueued(t, s, 1)
	errs := make([]error, after)
	var wg sync.WaitGroup
	for i := range after {
		wg.Go(func() {
			errs[i] = s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				_, err := started(ctx, tx, fmt.Sprintf("run-after-%d", i))
				return err
			})
		})
	}
	waitQueued(t, s, 1+after)
	if err := <-release(); err == nil {
		t.Error("the caller before the lost transaction was told its work committed")
	} else {
		t.Logf("caller before: %v", err)
	}
	if err := <-breakErr; err == nil {
		t.Error("the caller that ended the transaction was told its work committed")
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller after %d: %v", i, err)
		}
		if !runExists(t, s, fmt.Sprintf("run-after-%d", i)) {
			t.Errorf("caller after %d: its run is missing", i)
		}
	}
	for _, id := range []string{"run-before", "run-breaker"} {
		if runExists(t, s, id) {
			t.Errorf("%s was kept from a lost transaction", id)
		}
	}
	if evs := audit(t, s); len(evs) != 2*after {
		t.Errorf("%d audit events, want %d", len(evs), 2*after)
	}
}

// RowsWritten counts the rows every table gained or changed, and only the
// writes that happened.
func TestRowsWritten(t *testing.T) {
	ctx := t.Context()
	s := openStore(t, tempPath(t))
	before, err := s.RowsWritten(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run := &record.Run{ID: "run-rows", Status: record.StatusRunning}
	err = s.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		if err := tx.InsertRun(ctx, run); err != nil {
			return err
		}
		if err := tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: run.ID, Seq: 1, SchemaVersion: 1, State: []byte(`{}`)}); err != nil {
			return err
		}
		run.Status = record.StatusExecuting
		return tx.UpdateRun(ctx, run)
	})
	if err != nil {
		t.Fatal(err)
	}
	// A read writes nothing.
	if err := s.View(ctx, func(ctx context.Context, tx storage.Tx) error { _, err := tx.Run(ctx, run.ID); return err }); err != nil {
		t.Fatal(err)
	}
	after, err := s.RowsWritten(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := after - before; got != 3 {
		t.Errorf("rows written = %d, want 3 (a run inserted, a checkpoint appended, the run updated)", got)
	}
}

// TestAFailureOnLostWorkIsToldTheBatchWasLost: in one batch, A inserts run-x,
// B's insert of run-x fails on A's (not committed yet), and C ends the
// transaction as SQLite does after SQLITE_FULL or an I/O error. run-x never
// commits, so B is not told that run-x exists: it is told the batch was lost,
// as A is, and C gets its own error.
func TestAFailureOnLostWorkIsToldTheBatchWasLost(t *testing.T) {
	s := openStore(t, tempPath(t))
	release := gate(t, s, nil)
	errA, errB, errC := make(chan error, 1), make(chan error, 1), make(chan error, 1)
	go func() {
		errA <- s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			_, err := started(ctx, tx, "run-x")
			return err
		})
	}()
	waitQueued(t, s, 1)
	go func() {
		errB <- s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			err := tx.InsertRun(ctx, &record.Run{ID: "run-x", Status: record.StatusWaitingApproval, Seq: 1})
			if !errors.Is(err, storage.ErrDuplicate) {
				t.Errorf("B's insert of run-x: %v, want ErrDuplicate (A's run-x)", err)
			}
			return err
		})
	}()
	waitQueued(t, s, 2)
	go func() {
		errC <- s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			_, err := tx.(*sqlstore.Tx).Conn().Exec(ctx, "ROLLBACK")
			return err
		})
	}()
	waitQueued(t, s, 3)
	<-release() // the gate's own update shares the batch, and its fate
	a, b, c := <-errA, <-errB, <-errC
	if !strings.Contains(fmt.Sprint(a), "lost with the transaction") {
		t.Errorf("A = %v, want its update lost with the batch", a)
	}
	if errors.Is(b, storage.ErrDuplicate) || !strings.Contains(fmt.Sprint(b), "lost with the transaction") {
		t.Errorf("B = %v, want the batch lost, not a duplicate of a run that never committed", b)
	}
	if c == nil || strings.Contains(c.Error(), "lost with the transaction") {
		t.Errorf("C = %v, want its own failure", c)
	}
	if runExists(t, s, "run-x") {
		t.Error("run-x was committed")
	}
}

// TestAPanicWithRowsOpenLeavesTheWriterWorking: fn panics while reading rows
// on the write connection. The rows are closed as the panic unwinds, so the
// committer can give the connection back, and the updates after it commit.
func TestAPanicWithRowsOpenLeavesTheWriterWorking(t *testing.T) {
	s, err := Open(t.Context(), tempPath(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Errorf("close: %v", err)
			}
		case <-time.After(30 * time.Second): // a bound, not an order of events
			t.Error("Close hangs: the committer cannot give its connection back")
		}
	})
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			return sqlstore.RunQueries(ctx, tx.(*sqlstore.Tx).Conn(), dialect{}, []sqlstore.Query{{
				SQL:  `SELECT 1 UNION ALL SELECT 2`,
				Rows: func(r sqlstore.Rows) error { r.Next(); panic("a scanner's bug") },
			}})
		})
	}()
	// Two: the first may still join the panicking caller's batch; the second
	// needs the connection that batch gives back.
	for i := range 2 {
		// A bound, so that a stuck committer fails the test instead of hanging it.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		err := s.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
			_, err := started(ctx, tx, fmt.Sprintf("run-after-%d", i))
			return err
		})
		cancel()
		if err != nil {
			t.Fatalf("update %d after the panic: %v", i, err)
		}
	}
}
