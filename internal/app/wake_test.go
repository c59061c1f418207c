package app

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/workflow"
)

// wakeRuns is how many decisions TestServeIsWokenByAnotherProcessDecision makes.
const wakeRuns = 20

// noPoll is a safety poll that never comes within a test: whatever serve does
// in one is done because a commit woke it.
const noPoll = time.Hour

// TestServeIsWokenByAnotherProcessDecision: a decision that another process
// commits (a CLI that dies right after the commit, so that only serve can
// execute the run) wakes serve's workers through the store (SQLite's
// data_version, PostgreSQL's NOTIFY): with a safety poll of an hour, serve
// still executes every run. On PostgreSQL the two processes share nothing
// but the database. The delays are logged; how short they are is a figure
// for a quiet machine, not a test's business.
func TestServeIsWokenByAnotherProcessDecision(t *testing.T) {
	stores := []struct {
		name string
		db   func(t *testing.T) string
	}{
		{"sqlite", func(*testing.T) string { return "" }},
		{"postgres", func(t *testing.T) string {
			dsn := pgtest.Schema(t) // skips without SIGNOFF_TEST_POSTGRES
			pgMust(t, dsn, t.TempDir(), exitDone, "migrate")
			return dsn
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := st.db(t)
			// Every refund waits for a team lead, so that many small ones fit
			// in what the charge has left to refund.
			s := startServedWith(t, db, noPoll, func(y string) string {
				return strings.Replace(y, "double(action.args.amount) > 50.0", "double(action.args.amount) > 0.5", 1)
			}, nil)
			proposal := filepath.Join(s.dir, "refund.json")
			if err := os.WriteFile(proposal, []byte(refundJSON("agent:resolver", "1.00", "")), 0o600); err != nil {
				t.Fatal(err)
			}
			global := []string{"--db", s.db, "--shop", filepath.Join(s.dir, "shop.db"), "--config", s.config}
			var picked, done []time.Duration
			for range wakeRuns {
				code, out := s.cli(t, "submit", proposal)
				if code != exitWaiting {
					t.Fatalf("submit: exit %d\n%s", code, out)
				}
				id := runIDOf(t, out)
				crashOn(t, global, "after-decision-commit", "approve", id, "--as", lead1)
				ctx, cancel := context.WithTimeout(t.Context(), childTimeout)
				v, _, err := s.app.engine.WaitRun(ctx, id, record.StatusExecuting)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if v.Status != record.StatusDone || len(v.Decisions) != 1 {
					t.Fatalf("run %s is %s with %d decisions, want done by serve after one decision", id, v.Status, len(v.Decisions))
				}
				decided := v.Decisions[0].At
				picked = append(picked, intentAt(t, s.app.engine, id).Sub(decided))
				done = append(done, v.UpdatedAt.Sub(decided))
			}
			percentiles(t, st.name+": decision (another process) to serve's first write (the intent)", picked)
			percentiles(t, st.name+": decision (another process) to done (serve)", done)
		})
	}
}

// crashOn runs a command of this program in a child process on the store
// global names, with SIGNOFF_FAILPOINT=failpoint, and asserts that it died of
// SIGKILL there.
func crashOn(t *testing.T, global []string, failpoint string, args ...string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, append(append([]string{}, global...), args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.Env = append(os.Environ(), asMainEnv+"=1", "SIGNOFF_FAILPOINT="+failpoint)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return
		}
	}
	t.Fatalf("signoff %s with SIGNOFF_FAILPOINT=%s: %v, want death by SIGKILL at the failpoint\n%s", strings.Join(args, " "), failpoint, err, out)
}

// intentAt is when the engine that executed run id checkpointed its intent
// to run the first action: its first write after the decision.
func intentAt(t *testing.T, e *workflow.Engine, id string) time.Time {
	t.Helper()
	hist, err := e.History(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		if h.State != nil && len(h.State.Operations) > 0 {
			return h.At
		}
	}
	t.Fatalf("run %s has no checkpoint of an intent", id)
	return time.Time{}
}

// percentiles logs the p50, p90 and maximum of ds, under what.
func percentiles(t *testing.T, what string, ds []time.Duration) {
	t.Helper()
	ds = slices.Sorted(slices.Values(ds))
	p50 := ds[len(ds)/2]
	t.Logf("%s, %d runs: p50 %v, p90 %v, max %v", what, len(ds), p50, ds[len(ds)*9/10], ds[len(ds)-1])
}
