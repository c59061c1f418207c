package api_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

const agentPy = "../examples/agent-python/agent.py"

func python(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	return py
}

// TestPythonAgentChecks runs the example agent's own checks (the callback
// signature: the specification's example, tampering, the window, rotation).
func TestPythonAgentChecks(t *testing.T) {
	out, err := exec.Command(python(t), agentPy, "--self-test").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("agent.py --self-test: %v\n%s", err, out)
	}
}

// TestPythonAgent runs the example agent against the API: it submits, waits
// through an approval made meanwhile, and exits as the run ended; a refused
// proposal exits 2 with the problem's fields.
func TestPythonAgent(t *testing.T) {
	py := python(t)
	h := newHarness(t, harnessOpts{})
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	agent := func(file string) (*exec.Cmd, *strings.Builder) {
		cmd := exec.Command(py, agentPy, file)
		cmd.Env = append(os.Environ(), "SIGNOFF_URL="+h.srv.URL, "SIGNOFF_TOKEN="+tokAll)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		return cmd, &out
	}
	exitCode := func(err error) int {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}

	t.Run("approved while it waits", func(t *testing.T) {
		cmd, out := agent(write("deploy.json", `{"task_id":"T-7","idempotency_key":"py-1","actions":[{"name":"deploy","args":{"service":"api","version":"1.2.3"}}]}`))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Approve once the agent is asleep on its run.
		for h.engine.Changes().Waiting() == 0 {
			runtime.Gosched()
		}
		runs, err := h.engine.List(context.Background(), storage.RunFilter{TaskID: "T-7"})
		if err != nil || len(runs) != 1 {
			t.Fatalf("runs %v %v", runs, err)
		}
		if _, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: runs[0].ID, Approver: record.Person{ID: "U0LEAD"},
			Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
			t.Fatal(err)
		}
		// What a worker of signoff serve does with an approved run.
		if _, err := h.engine.Resume(context.Background(), runs[0].ID); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if code := exitCode(err); code != 0 || !strings.Contains(out.String(), "outcome: done") ||
				!strings.Contains(out.String(), "waiting for 1 approval(s) from team_lead") {
				t.Fatalf("exit %d:\n%s", code, out)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("the agent did not finish:\n%s", out)
		}
	})

	t.Run("refused", func(t *testing.T) {
		cmd, out := agent(write("bad.json", `{"actions":[{"name":"deploy","args":{"service":"api","version":"one"}}]}`))
		if code := exitCode(cmd.Run()); code != 2 || !strings.Contains(out.String(), "actions[0].args.version") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
}
