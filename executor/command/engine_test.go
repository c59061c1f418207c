package command_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/executor/command"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// referenceProgram is examples/command/ledger-action, the program a team copies.
func referenceProgram(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	p, err := filepath.Abs("../../examples/command/ledger-action")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func ledgerLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		out = append(out, sc.Text())
	}
	return out
}

// TestFailureModesOfTheReferenceProgram: whenever the program committed there
// is exactly one line in its ledger, and none when it refused.
func TestFailureModesOfTheReferenceProgram(t *testing.T) {
	prog := referenceProgram(t)
	tests := []struct {
		name     string
		faults   string
		noLookup bool
		want     record.Status
		effects  int
		reason   string
	}{
		{name: "done", want: record.StatusDone, effects: 1},
		{name: "refused", faults: "refuse\n", want: record.StatusNeedsAttention, reason: "refused (exit 65): refused: the key is in use by a running job"},
		{name: "tempfail then done", faults: "tempfail\n", want: record.StatusDone, effects: 1},
		{name: "fails after commit", faults: "fail-after-commit\n", want: record.StatusDone, effects: 1},
		{name: "fails after commit, no lookup", faults: "fail-after-commit\n", noLookup: true, want: record.StatusDone, effects: 1},
		{name: "hangs after commit past the timeout", faults: "hang-after-commit\n", want: record.StatusDone, effects: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ledger, faults := filepath.Join(dir, "ledger.jsonl"), filepath.Join(dir, "faults")
			if err := os.WriteFile(faults, []byte(tt.faults), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := command.Config{
				Command: []string{prog}, Lookup: []string{prog, "--lookup"}, Dir: dir, Write: []string{dir}, Timeout: 2 * time.Second,
				Env: []string{"LEDGER_FILE=" + ledger, "FAULT_FILE=" + faults},
			}
			if tt.noLookup {
				cfg.Lookup = nil
			}
			x, err := command.New("rotate_key", cfg)
			if err != nil {
				t.Fatal(err)
			}
			e := newEngine(t, x)
			run, err := e.Submit(context.Background(), &workflow.Proposal{
				Requester: record.Person{ID: "agent:ops"}, Actions: []record.Action{rotate},
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 10 && run.Status == record.StatusExecuting; i++ {
				if run, err = e.Resume(context.Background(), run.ID); err != nil {
					t.Fatal(err)
				}
			}
			if run.Status != tt.want || !strings.Contains(run.Reason, tt.reason) {
				t.Fatalf("status %s (%q), want %s (%q)", run.Status, run.Reason, tt.want, tt.reason)
			}
			lines := ledgerLines(t, ledger)
			if len(lines) != tt.effects {
				t.Fatalf("ledger %q, want %d line(s)", lines, tt.effects)
			}
			if tt.effects == 1 && !strings.Contains(lines[0], `"key": "`+run.ID+`/1"`) {
				t.Fatalf("ledger %q, want the key %s/1", lines, run.ID)
			}
		})
	}
}

// TestAProgramIsJudgedByItsOwnExitStatus: a program that succeeds while a
// child it left in the background still holds its stdout is done, called
// once, and the child is gone.
func TestAProgramIsJudgedByItsOwnExitStatus(t *testing.T) {
	dir := t.TempDir()
	prog := script(t, dir, "p", `echo call >> calls; sleep 300 & echo $! > child.pid; echo '{"id":"R-1"}'`)
	x, err := command.New("rotate_key", command.Config{Command: []string{prog}, Dir: dir, Write: []string{dir}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, x)
	run, err := e.Submit(context.Background(), &workflow.Proposal{
		Requester: record.Person{ID: "agent:ops"}, Actions: []record.Action{rotate},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10 && run.Status == record.StatusExecuting; i++ {
		if run, err = e.Resume(context.Background(), run.ID); err != nil {
			t.Fatal(err)
		}
	}
	if calls := ledgerLines(t, filepath.Join(dir, "calls")); run.Status != record.StatusDone || len(calls) != 1 {
		t.Fatalf("status %s (%q) after %d call(s), want done after one", run.Status, run.Reason, len(calls))
	}
	waitGone(t, readPid(t, filepath.Join(dir, "child.pid")))
}

func newEngine(t *testing.T, x workflow.Executor) *workflow.Engine {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "signoff.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	roles, err := policy.NewRoles([]policy.Role{{Name: "agent", Members: []string{"agent:ops"}}})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New("r1", []policy.Rule{{Name: "all", When: "true", Risk: "low"}}, roles)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := workflow.NewActionSpec("rotate_key", nil, x, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := workflow.New(workflow.Config{
		Store: st, Policy: pol, Roles: roles, Clock: clocktest.New(time.Now()),
		Actions: map[string]*workflow.ActionSpec{"rotate_key": spec},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
