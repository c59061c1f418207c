package app

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// TestASlowDeployIsReconciledAcrossAServeKill: a deploy takes longer than
// signoff's call may last. The call times out, and the target's lookup says
// "still in progress" (503 with Retry-After): serve parks the run, and is
// killed right then. The deploy finishes meanwhile. The restarted serve asks
// the target again when the wait is over, finds the deploy done and records
// its receipt: one deploy, one call, and no person needed.
func TestASlowDeployIsReconciledAcrossAServeKill(t *testing.T) {
	o := newOwn(t)
	release := o.target.HoldWork()
	defer release()
	id := runIDOf(t, o.must(t, exitWaiting, deployProposal("k-slow"), "submit", "-"))
	// The approver's process dies after its decision: only serve executes the run.
	cmd, out, errb := child(t, o.dir, append(o.env, "SIGNOFF_FAILPOINT=after-decision-commit"), "--config", o.config, "approve", id, "--as", lead1)
	if err := cmd.Run(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("approve: %v, want killed\n%s\n%s", err, out, errb)
	}

	first := startServeChildEnv(t, o.dir, o.config, append(append([]string{}, o.env...), "SIGNOFF_FAILPOINT=after-park"))
	diedAtFailpoint(t, first) // right after it parked the run
	v := o.view(t, id)
	if v.Status != record.StatusExecuting || v.RetryAt == nil || !strings.Contains(v.Reason, "asking the target again at") {
		t.Fatalf("after serve died: status %s (%q), retry at %v; want executing, asking again later", v.Status, v.Reason, v.RetryAt)
	}
	if shown := o.must(t, exitActive, "", "show", id); !strings.Contains(shown, "asking the target again at") {
		t.Errorf("show does not say when the target is asked again:\n%s", shown)
	}
	if n := len(o.target.Ledger()); n != 0 {
		t.Fatalf("%d deploys before the deploy finished", n)
	}

	release() // the deploy finishes while no serve runs
	waitFor(t, "the deploy to finish", func() bool { return len(o.target.Ledger()) == 1 })
	second := startServeChildEnv(t, o.dir, o.config, o.env)
	waitFor(t, "the restarted serve to reconcile the run", func() bool { return o.view(t, id).Status == record.StatusDone })
	second.mu.Lock()
	logged := second.log.String()
	second.mu.Unlock()
	v = o.show(t, id)
	if len(v.Operations) != 1 || v.Operations[0].Attempts != 1 || v.Reason != "" || v.RetryAt != nil {
		t.Errorf("operations %+v, reason %q, retry at %v; want one attempt, reconciled", v.Operations, v.Reason, v.RetryAt)
	}
	if n, calls := len(o.target.Ledger()), len(o.executeCalls()); n != 1 || calls != 1 {
		t.Errorf("%d deploys and %d execute calls, want one of each\n%s", n, calls, logged)
	}
	o.must(t, exitDone, "", "verify")
}

// view is show --json whatever the run's status (show's exit code says it).
func (o *own) view(t *testing.T, id string) workflow.RunView {
	t.Helper()
	_, out, errs := o.run(t, nil, "", "show", id, "--json")
	var v workflow.RunView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("show %s --json: %v\n%s%s", id, err, out, errs)
	}
	return v
}
