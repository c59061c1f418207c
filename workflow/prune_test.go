package workflow_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/workflow"
)

// retention is the cutoff the prune tests use: 90 days, as in docs/operations.md.
const retention = 90 * 24 * time.Hour

// seedNote is the bulk of the evidence of seeded runs: 2,000 hexadecimal
// digits that do not repeat, which a store that compresses states keeps in
// about half as many bytes (a repeated letter would take almost none, and a
// prune would have nothing to give back).
var seedNote = func() string {
	var b strings.Builder
	for h := sha256.Sum256([]byte("seed")); b.Len() < 2000; h = sha256.Sum256(h[:]) {
		b.WriteString(hex.EncodeToString(h[:]))
	}
	return b.String()[:2000]
}()

// seeded is what seedRuns made.
type seeded struct {
	done, rejected, failed, waiting []string
}

func (s seeded) ended() []string {
	return append(append(append([]string{}, s.done...), s.rejected...), s.failed...)
}

// seedRuns makes done small refunds, a few rejected and failed runs (with
// decisions and failed operations), and waiting large refunds, from several
// goroutines so that the SQLite store commits them together. Each carries
// about 2 KB of evidence, what a prune is for.
func seedRuns(t testing.TB, h *harness, done, waiting int) seeded {
	refund := func(payment string, amount float64) *workflow.Proposal {
		p := refund(payment, amount)
		p.Evidence[0].Data = json.RawMessage(`{"payments":[{"id":"PAY-1","status":"captured"}],"note":"` + seedNote + `"}`)
		return p
	}
	t.Helper()
	var (
		mu  sync.Mutex
		out seeded
		wg  sync.WaitGroup
	)
	h.target.mu.Lock()
	h.target.captured["PAY-SEED"] = 1e9 // enough for every refund seeded
	h.target.mu.Unlock()
	jobs := make(chan func() error)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := j(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	add := func(list *[]string, id string) {
		mu.Lock()
		*list = append(*list, id)
		mu.Unlock()
	}
	for i := range done {
		jobs <- func() error {
			run, err := h.engine.Submit(ctx, refund("PAY-SEED", 0.01))
			if err != nil || run.Status != record.StatusDone {
				return fmt.Errorf("small refund %d: %v %v", i, run, err)
			}
			add(&out.done, run.ID)
			return nil
		}
	}
	for i := range 3 {
		jobs <- func() error {
			run, err := h.engine.Submit(ctx, refund("PAY-SEED", 100+float64(i)))
			if err != nil {
				return err
			}
			run, err = h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"},
				Verdict: record.VerdictReject, Reason: "not this one", Via: "cli"})
			if err != nil || run.Status != record.StatusRejected {
				return fmt.Errorf("reject: %v %v", run, err)
			}
			add(&out.rejected, run.ID)
			return nil
		}
		jobs <- func() error {
			run, err := h.engine.Submit(ctx, refund("PAY-UNKNOWN", 1))
			if err != nil || run.Status != record.StatusFailed {
				return fmt.Errorf("failed refund: %v %v", run, err)
			}
			add(&out.failed, run.ID)
			return nil
		}
	}
	for range waiting {
		jobs <- func() error {
			run, err := h.engine.Submit(ctx, refund("PAY-SEED", 60))
			if err != nil || run.Status != record.StatusWaitingApproval {
				return fmt.Errorf("large refund: %v %v", run, err)
			}
			add(&out.waiting, run.ID)
			return nil
		}
	}
	close(jobs)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// dump is every run's row and checkpoints (seq, state size, pruned or not),
// the outbox, the audit head and count: what a dry run must not change.
func dump(t testing.TB, h *harness) string {
	t.Helper()
	var b strings.Builder
	err := h.engine.Store().View(ctx, func(ctx context.Context, tx storage.Tx) error {
		runs, err := tx.ListRuns(ctx, storage.RunFilter{})
		if err != nil {
			return err
		}
		for _, r := range runs {
			fmt.Fprintf(&b, "%+v\n", *r)
			cps, err := tx.Checkpoints(ctx, r.ID)
			if err != nil {
				return err
			}
			for _, c := range cps {
				fmt.Fprintf(&b, "  %d %d %s %v\n", c.Seq, len(c.State), c.Hash, c.PrunedAt)
			}
			ms, err := tx.OutboxForRun(ctx, r.ID)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "  outbox %d\n", len(ms))
		}
		evs, err := tx.AuditEvents(ctx, storage.AuditFilter{Newest: true, Limit: 1})
		if err != nil {
			return err
		}
		for _, ev := range evs {
			fmt.Fprintf(&b, "audit head %d %s\n", ev.Seq, ev.Hash)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestPrune: a keyed store with ended runs and waiting ones, 91 days later.
// A dry run counts and changes nothing; the prune removes the ended runs'
// states and keeps a sealed summary; the waiting runs are untouched and
// still approvable; verify passes; a pruned run still shows, saying it was
// pruned; a second prune finds nothing. On SQLite the file shrinks once the
// space is given back (the test logs the sizes).
func TestPrune(t *testing.T) {
	ended := 10000
	if testing.Short() {
		ended = 500
	}
	for _, driver := range []struct {
		name  string
		env   func(t *testing.T, opts ...harnessOption) *tamperEnv
		ended int
	}{{"sqlite", sqliteTamperEnv, ended}, {"postgres", postgresTamperEnv, 300}} {
		t.Run(driver.name, func(t *testing.T) {
			if driver.name == "postgres" {
				pgtest.DSN(t)
			}
			env := driver.env(t)
			h := env.h
			// Runs that ended 91 days ago, a few left waiting since (nobody
			// expired them), then 100 waiting and a few ended since the cutoff.
			seed := seedRuns(t, h, driver.ended, 5)
			h.clock.Advance(retention + 24*time.Hour)
			fresh := seedRuns(t, h, 2, 100)
			recent := fresh.ended()
			before := h.clock.Now().Add(-retention)
			waiting := map[string]string{}
			for _, id := range append(seed.waiting, fresh.waiting...) {
				waiting[id] = runText(t, h, id)
			}
			var size0 int64
			if h.store != nil && env.h.path != "" {
				size0 = fileSize(t, h)
			}

			start := dump(t, h)
			dry, err := h.engine.Prune(ctx, workflow.PruneOptions{Before: before, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := dump(t, h); got != start {
				a, b := strings.Split(start, "\n"), strings.Split(got, "\n")
				for i := range min(len(a), len(b)) {
					if a[i] != b[i] {
						t.Fatalf("the dry run changed the store, first at line %d:\n%s\n%s", i, a[i], b[i])
					}
				}
				t.Fatal("the dry run changed the store")
			}
			want := len(seed.ended())
			if dry.Runs != want || dry.Checkpoints < want || dry.StateBytes <= dry.SummaryBytes || len(dry.Skipped) != 0 {
				t.Fatalf("dry run: %+v, want %d runs", dry, want)
			}

			rep, err := h.engine.Prune(ctx, workflow.PruneOptions{Before: before})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Runs != dry.Runs || rep.Checkpoints != dry.Checkpoints || rep.StateBytes != dry.StateBytes {
				t.Fatalf("prune %+v differs from its dry run %+v", rep, dry)
			}
			t.Logf("pruned %d runs: %d checkpoint states, %d bytes of state, %d of summaries written",
				rep.Runs, rep.Checkpoints, rep.StateBytes, rep.SummaryBytes)

			for id, snap := range waiting {
				if got := runText(t, h, id); got != snap {
					t.Fatalf("waiting run %s changed:\n%s\n%s", id, snap, got)
				}
			}
			for _, id := range recent {
				if v := h.get(id); v.Pruned != nil {
					t.Fatalf("a run that ended after the cutoff was pruned: %+v", v.Pruned)
				}
			}
			vr, err := h.engine.Verify(ctx)
			if err != nil || !vr.OK() || !vr.Keyed || vr.Pruned != want {
				t.Fatalf("verify after the prune: %+v %v", vr, err)
			}

			for _, id := range []string{seed.done[0], seed.rejected[0], seed.failed[0]} {
				v := h.get(id)
				if v.Problem != "" || v.Pruned == nil || v.Pruned.At.IsZero() || v.Pruned.ThroughSeq < 1 || v.Pruned.Evidence != 1 {
					t.Fatalf("show %s after the prune: problem %q, pruned %+v", id, v.Problem, v.Pruned)
				}
				if len(v.Evidence) != 0 || len(v.Actions) != 1 || !v.Status.Terminal() {
					t.Fatalf("show %s keeps the wrong things: %+v", id, v)
				}
				for _, c := range checkpointsOf(t, h, id) {
					if bytes.Contains(c.State, []byte(seedNote)) {
						t.Fatalf("checkpoint %d of pruned run %s still holds its evidence", c.Seq, id)
					}
				}
				hist, err := h.engine.History(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				for i, e := range hist {
					last := i == len(hist)-1
					if e.Problem != "" || (e.Pruned == nil) != last || (e.State == nil) != !last {
						t.Fatalf("history of %s, checkpoint %d: %+v", id, e.Seq, e)
					}
				}
			}
			if v := h.get(seed.done[0]); len(v.Operations) != 1 || v.Operations[0].Status != record.OpCommitted {
				t.Fatalf("the operation of a done run was not kept: %+v", v.Operations)
			}
			if v := h.get(seed.rejected[0]); len(v.Decisions) != 1 || v.Decisions[0].Decision != record.VerdictReject {
				t.Fatalf("the decision of a rejected run was not kept: %+v", v.Decisions)
			}
			if _, err := h.engine.Fork(ctx, seed.rejected[0], 1, record.Person{ID: "agent:resolver"}); err == nil {
				t.Fatal("a fork at a pruned checkpoint was allowed")
			}

			if run, err := h.approve(fresh.waiting[0], "U0LEAD0001"); err != nil || run.Status != record.StatusDone {
				t.Fatalf("approve a waiting run after the prune: %v %v", run, err)
			}
			again, err := h.engine.Prune(ctx, workflow.PruneOptions{Before: before})
			if err != nil || again.Runs != 0 {
				t.Fatalf("a second prune: %+v %v, want nothing to do", again, err)
			}
			if vr, err := h.engine.Verify(ctx); err != nil || !vr.OK() {
				t.Fatalf("verify at the end: %+v %v", vr, err)
			}

			if size0 > 0 {
				rc, err := h.store.Reclaim(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if rc.Vacuumed || rc.Pages == 0 {
					t.Fatalf("reclaim of a store made with incremental vacuum: %+v", rc)
				}
				size1 := fileSize(t, h)
				t.Logf("SQLite file: %d bytes before the prune, %d after (%d runs pruned, %d waiting)", size0, size1, want, len(waiting))
				if size1 >= size0 {
					t.Fatalf("the file did not shrink: %d bytes before, %d after", size0, size1)
				}
			}
		})
	}
}

// runText is a run as shown, with its history, for comparing.
func runText(t testing.TB, h *harness, id string) string {
	t.Helper()
	hist, err := h.engine.History(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	return h.snapshot(id) + string(b)
}

// fileSize is the SQLite store's size with its WAL folded in.
func fileSize(t testing.TB, h *harness) int64 {
	t.Helper()
	if err := h.store.CheckpointWAL(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(h.path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestPruneSkipsDamagedRuns: an ended run that fails its check is left for
// verify to report, and the rest are pruned.
func TestPruneSkipsDamagedRuns(t *testing.T) {
	env := sqliteTamperEnv(t)
	h := env.h
	seed := seedRuns(t, h, 3, 0)
	h.clock.Advance(retention + time.Hour)
	env.exec(`UPDATE checkpoints SET state = ? WHERE run_id = ? AND seq = 1`, []byte(`{}`), seed.done[0])
	rep, err := h.engine.Prune(ctx, workflow.PruneOptions{Before: h.clock.Now().Add(-retention), Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Runs != len(seed.ended())-1 || len(rep.Skipped) != 1 || rep.Skipped[0].RunID != seed.done[0] {
		t.Fatalf("prune with one damaged run: %+v", rep)
	}
	vr, err := h.engine.Verify(ctx)
	if err != nil || vr.OK() || len(vr.Damaged) != 1 || vr.Damaged[0].RunID != seed.done[0] {
		t.Fatalf("verify does not report the damaged run alone: %+v %v", vr, err)
	}
}

// TestARetriedSubmitAfterItsRunWasPruned: the same key sent again after
// retention pruned its run cannot be compared with the proposal it was first
// sent with. It is refused as a key in use, naming the run to its requester,
// not reported as a damaged run.
func TestARetriedSubmitAfterItsRunWasPruned(t *testing.T) {
	h := newHarness(t)
	submit := func() (*record.Run, error) {
		p := refund("PAY-2", 5) // low risk: done at once
		p.IdempotencyKey = "ticket-T-7"
		return h.engine.Submit(ctx, p)
	}
	run, err := submit()
	if err != nil || run.Status != record.StatusDone {
		t.Fatalf("submit: %+v, %v", run, err)
	}
	h.clock.Advance(retention + 24*time.Hour)
	rep, err := h.engine.Prune(ctx, workflow.PruneOptions{Before: h.clock.Now().Add(-retention)})
	if err != nil || rep.Runs != 1 {
		t.Fatalf("prune: %+v, %v", rep, err)
	}
	_, err = submit()
	r := wantRefused(t, err, record.CodeIdempotencyKeyReused)
	if r.RunID != run.ID || !strings.Contains(err.Error(), "pruned") {
		t.Errorf("retry after the prune: %v (run %q), want the key refused as held by %s", err, r.RunID, run.ID)
	}
}
