package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/fixtures"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// windowConfig is the built-in config whose large refunds may run only
// every day from..to (UTC, HH:MM).
func windowConfig(t *testing.T, dir string, from, to time.Time) string {
	t.Helper()
	const approval = "approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}"
	return writeConfig(t, dir, "signoff.yaml", approval, fmt.Sprintf("%s\n      window: {days: sun-sat, from: %q, to: %q, tz: UTC}",
		approval, from.UTC().Format("15:04"), to.UTC().Format("15:04")))
}

// TestScheduledRunSurvivesACrashAndRunsOnlyInItsWindow: an approval
// outside the window schedules the run in the decision's own commit, so a
// process killed right after it leaves the run scheduled (nothing ran, the
// approval kept, never executing); resume runs nothing before the window;
// show, runs and history say when it runs; it can be cancelled.
func TestScheduledRunSurvivesACrashAndRunsOnlyInItsWindow(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(t *testing.T) string) {
		dir := newDir(t)
		now := time.Now().UTC()
		cfg := windowConfig(t, dir, now.Add(2*time.Hour), now.Add(3*time.Hour))
		opens := now.Add(2 * time.Hour).Truncate(time.Minute)
		id := submitWaiting(t, dir, "--config", cfg)
		crash(t, dir, "after-decision-commit", "--config", cfg, "approve", id, "--as", lead1)
		for range 2 {
			must(t, dir, exitActive, "--config", cfg, "resume", id)
			v := showJSON(t, dir, id)
			if v.Status != record.StatusScheduled || v.ScheduledFor == nil || !v.ScheduledFor.Equal(opens) {
				t.Fatalf("after the crash: %s scheduled for %v, want scheduled for %s", v.Status, v.ScheduledFor, opens)
			}
			if ch := changes(t, dir); len(ch) != 0 {
				t.Fatalf("the shop changed before the window opened: %+v", ch)
			}
		}
		at := opens.Format(time.RFC3339)
		show := must(t, dir, exitActive, "--config", cfg, "show", id)
		for _, want := range []string{"scheduled, runs at " + at, "SCHEDULED", "runs only within its execution window sun,mon,tue,wed,thu,fri,sat "} {
			if !strings.Contains(show, want) {
				t.Errorf("show does not say %q:\n%s", want, show)
			}
		}
		if list := must(t, dir, exitDone, "runs"); !strings.Contains(list, "scheduled, runs at "+at) {
			t.Errorf("runs does not say when it runs:\n%s", list)
		}
		history := must(t, dir, exitDone, "history", id)
		if strings.Count(history, "runs at "+at) != 1 || strings.Contains(history, string(record.StatusExecuting)) {
			t.Errorf("history should say once that it runs at %s, and never that it was executing:\n%s", at, history)
		}
		must(t, dir, exitEnded, "--config", cfg, "cancel", id, "--as", lead1, "--reason", "not tonight")
		must(t, dir, exitEnded, "--config", cfg, "resume", id)
		if ch := changes(t, dir); len(ch) != 0 {
			t.Fatalf("a cancelled scheduled run changed the shop: %+v", ch)
		}
		auditEvents(t, dir)
	})
}

// TestReleasedRunSurvivesACrashAndRunsOnce: a run scheduled earlier whose
// window is open now is released by resume; killed right after the
// release committed, the next resume runs it, once.
func TestReleasedRunSurvivesACrashAndRunsOnce(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(t *testing.T) string) {
		dir := newDir(t)
		now := time.Now().UTC()
		cfg := windowConfig(t, dir, now.Add(-time.Hour), now.Add(time.Hour))
		id := scheduleEarlier(t, dir, cfg, 2*time.Hour)
		crash(t, dir, "after-release", "--config", cfg, "resume", id)
		if v := showJSON(t, dir, id); v.Status != record.StatusExecuting || len(changes(t, dir)) != 0 {
			t.Fatalf("after the release: %s, shop changes %+v", v.Status, changes(t, dir))
		}
		must(t, dir, exitDone, "--config", cfg, "resume", id)
		must(t, dir, exitDone, "--config", cfg, "resume", id)
		if ch := changes(t, dir); len(ch) != 1 {
			t.Fatalf("shop changes %+v, want exactly one", ch)
		}
		if history := must(t, dir, exitDone, "history", id); strings.Count(history, "window open: released") != 1 {
			t.Errorf("history should say once that it was released:\n%s", history)
		}
		auditEvents(t, dir)
	})
}

// TestHeldRunSurvivesACrashAndRunsOnlyInItsWindow: a run approved while
// its window was open but executed only once it closed is scheduled right
// before its first intent; killed right after that commit, the run stays
// scheduled and nothing ran, on each resume after.
func TestHeldRunSurvivesACrashAndRunsOnlyInItsWindow(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(t *testing.T) string) {
		dir := newDir(t)
		now := time.Now().UTC()
		cfg := windowConfig(t, dir, now.Add(2*time.Hour), now.Add(3*time.Hour))
		opens := now.Add(2 * time.Hour).Truncate(time.Minute)
		// Approved as though at an hour when the window was open: executing.
		id, status := approveAt(t, dir, cfg, now.Add(-22*time.Hour+30*time.Minute))
		if status != record.StatusExecuting {
			t.Fatalf("approved inside the window: %s, want executing", status)
		}
		crash(t, dir, "after-schedule", "--config", cfg, "resume", id)
		for range 2 {
			v := showJSON(t, dir, id)
			if v.Status != record.StatusScheduled || v.ScheduledFor == nil || !v.ScheduledFor.Equal(opens) || len(v.Operations) != 0 {
				t.Fatalf("after the crash: %s scheduled for %v (operations %+v), want scheduled for %s", v.Status, v.ScheduledFor, v.Operations, opens)
			}
			noChanges(t, dir)
			must(t, dir, exitActive, "--config", cfg, "resume", id)
		}
		if history := must(t, dir, exitDone, "history", id); strings.Count(history, "runs at "+opens.Format(time.RFC3339)) != 1 {
			t.Errorf("history should say once that it runs at %s:\n%s", opens.Format(time.RFC3339), history)
		}
		auditEvents(t, dir)
	})
}

// scheduleEarlier submits the double-charge refund and approves it as
// though ago ago, when cfg's window was closed: it is scheduled.
func scheduleEarlier(t *testing.T, dir, cfg string, ago time.Duration) string {
	t.Helper()
	id, status := approveAt(t, dir, cfg, time.Now().Add(-ago))
	if status != record.StatusScheduled {
		t.Fatalf("approved outside the window: %s, want scheduled", status)
	}
	return id
}

// approveAt submits the double-charge refund and approves it as though at
// at, without running it, and returns its id and the status the decision
// left it in.
func approveAt(t *testing.T, dir, cfg string, at time.Time) (string, record.Status) {
	t.Helper()
	o := options{db: dbPath(dir), shop: shopPath(dir), config: cfg}
	if _, ok := pgStores.Load(dir); ok {
		o.keys = filepath.Join(dir, "signoff.keys")
	}
	ctx := context.Background()
	a, err := openApp(ctx, o, noEnv, io.Discard, clocktest.New(at))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	body, err := fixtures.Proposal("refund-double-charge")
	if err != nil {
		t.Fatal(err)
	}
	p, err := workflow.ParseProposal(body)
	if err != nil {
		t.Fatal(err)
	}
	run, err := a.engine.Submit(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if run, err = a.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: lead1}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	return run.ID, run.Status
}

// TestExecutionWindowsDocExample: the config of docs/configuration.md,
// "Execution windows", loads; a large refund approved on a Saturday is
// scheduled for Monday 09:00 in New York (14:00 UTC) and runs then, once.
func TestExecutionWindowsDocExample(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sec := docSection(t, "docs/configuration.md", "Execution windows")
	_, block, ok := strings.Cut(sec, "```yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal(`"Execution windows" has no yaml block`)
	}
	cfg := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(cfg, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 12, 5, 15, 0, 0, 0, time.UTC)) // a Saturday
	a, err := openApp(ctx, options{db: dbPath(dir), shop: shopPath(dir), config: cfg}, noEnv, io.Discard, clock)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	body, err := fixtures.Proposal("refund-double-charge")
	if err != nil {
		t.Fatal(err)
	}
	p, err := workflow.ParseProposal(body)
	if err != nil {
		t.Fatal(err)
	}
	run, err := a.engine.Submit(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: lead1}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.engine.Work(ctx, 10); err != nil {
		t.Fatal(err)
	}
	monday := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	v, err := a.engine.Get(ctx, run.ID)
	if err != nil || v.Status != record.StatusScheduled || v.ScheduledFor == nil || !v.ScheduledFor.Equal(monday) {
		t.Fatalf("%v: %s scheduled for %v, want %s", err, v.Status, v.ScheduledFor, monday)
	}
	clock.Set(monday)
	for range 2 {
		if _, err := a.engine.Work(ctx, 10); err != nil {
			t.Fatal(err)
		}
	}
	if v, err = a.engine.Get(ctx, run.ID); err != nil || v.Status != record.StatusDone || len(v.Operations) != 1 {
		t.Fatalf("%v: %s, operations %+v", err, v.Status, v.Operations)
	}
}

// TestARestartedServeReleasesAScheduledRunOnce: a run scheduled while no
// serve ran is due; serve releases it and is killed right after the
// release committed; serve started again finishes it, once, and nothing
// ran before the release.
func TestARestartedServeReleasesAScheduledRunOnce(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		dir := newDir(t)
		now := time.Now().UTC()
		cfg := noSlackConfig(t, dir)
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		const approval = "approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}"
		y := strings.Replace(string(b), approval, fmt.Sprintf("%s\n      window: {days: sun-sat, from: %q, to: %q, tz: UTC}",
			approval, now.Add(-time.Hour).Format("15:04"), now.Add(time.Hour).Format("15:04")), 1)
		if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		id := scheduleEarlier(t, dir, cfg, 2*time.Hour)
		env := append([]string{"SIGNOFF_LEASE_TTL=10m"}, noSlackEnv...)
		first := startServeChildEnv(t, dir, cfg, append(env, "SIGNOFF_FAILPOINT=after-release"))
		diedAtFailpoint(t, first)
		if v := showJSON(t, dir, id); v.Status != record.StatusExecuting || len(v.Operations) != 0 {
			t.Fatalf("after serve died: status %s, operations %+v", v.Status, v.Operations)
		}
		noChanges(t, dir)
		startServeChildEnv(t, dir, cfg, env)
		waitFor(t, "the restarted serve to finish the run", func() bool { return showJSON(t, dir, id).Status == record.StatusDone })
		oneRefund(t, dir, id+"/1", "119.00")
		if history := must(t, dir, exitDone, "history", id); strings.Count(history, "window open: released") != 1 {
			t.Errorf("history should say once that it was released:\n%s", history)
		}
		must(t, dir, exitDone, "verify")
	})
}
