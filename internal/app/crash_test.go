package app

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// TestCrashWhileApproving kills a real `signoff approve` process at each write
// boundary of the decision and the refund, then continues in a fresh process:
// nothing runs twice, nothing approved is lost, and the completion is recorded
// from the shop's register. Like every test in this file, it runs on SQLite
// and on PostgreSQL (onEachStore).
func TestCrashWhileApproving(t *testing.T) {
	t.Parallel()
	tests := []struct {
		failpoint string
		// crashed checks what the killed process left behind.
		crashed func(t *testing.T, dir, id string, v workflow.RunView)
		// recover is the command a person runs next.
		recover func(id string) []string
	}{
		{
			failpoint: "before-decision-commit",
			crashed: func(t *testing.T, dir, id string, v workflow.RunView) {
				if v.Status != record.StatusWaitingApproval || len(v.Decisions) != 0 || len(v.Operations) != 0 {
					t.Errorf("the uncommitted decision left status %s, decisions %+v, operations %+v", v.Status, v.Decisions, v.Operations)
				}
				noChanges(t, dir)
			},
			// The decision was never committed: the approver clicks again.
			recover: func(id string) []string { return []string{"approve", id, "--as", lead1} },
		},
		{
			failpoint: "after-decision-commit",
			crashed: func(t *testing.T, dir, id string, v workflow.RunView) {
				if v.Status != record.StatusExecuting || len(v.Decisions) != 1 || len(v.Operations) != 0 {
					t.Errorf("status %s, decisions %+v, operations %+v", v.Status, v.Decisions, v.Operations)
				}
				// Approving again is refused (it is approved); it does not run anything.
				if code, _, errs := signoff(t, dir, "approve", id, "--as", lead2); code != exitRefused || !strings.Contains(errs, "already approved by "+lead1) {
					t.Errorf("second approval: exit %d, %q", code, errs)
				}
				noChanges(t, dir)
			},
			recover: func(id string) []string { return []string{"resume", id} },
		},
		{
			failpoint: "after-intent",
			crashed: func(t *testing.T, dir, id string, v workflow.RunView) {
				// The intent counts its first attempt before the call is made.
				if v.Status != record.StatusExecuting || len(v.Operations) != 1 || v.Operations[0].Status != record.OpPending || v.Operations[0].Attempts != 1 || len(v.Operations[0].Receipt) != 0 {
					t.Errorf("status %s, operations %+v", v.Status, v.Operations)
				}
				noChanges(t, dir)
			},
			recover: func(id string) []string { return []string{"resume", id} },
		},
		{
			failpoint: "after-effect",
			crashed: func(t *testing.T, dir, id string, v workflow.RunView) {
				if v.Status != record.StatusExecuting || len(v.Operations) != 1 || v.Operations[0].Status != record.OpPending || len(v.Operations[0].Receipt) != 0 {
					t.Errorf("status %s, operations %+v", v.Status, v.Operations)
				}
				// The shop did it; signoff does not know yet.
				oneRefund(t, dir, id+"/1", "119.00")
			},
			recover: func(id string) []string { return []string{"resume", id} },
		},
		{
			failpoint: "after-receipt",
			crashed: func(t *testing.T, dir, id string, v workflow.RunView) {
				// The last receipt ends the run in the same commit.
				if v.Status != record.StatusDone || len(v.Operations) != 1 || v.Operations[0].Status != record.OpCommitted {
					t.Errorf("status %s, operations %+v", v.Status, v.Operations)
				}
				oneRefund(t, dir, id+"/1", "119.00")
			},
			recover: func(id string) []string { return []string{"resume", id} },
		},
	}
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		for _, tt := range tests {
			t.Run(tt.failpoint, func(t *testing.T) {
				t.Parallel()
				dir := newDir(t)
				id := runIDOf(t, must(t, dir, exitWaiting, "run", "T-65273"))
				crash(t, dir, tt.failpoint, "approve", id, "--as", lead1, "--name", "Grace")
				tt.crashed(t, dir, id, showJSON(t, dir, id))

				must(t, dir, exitDone, tt.recover(id)...)
				refund := oneRefund(t, dir, id+"/1", "119.00")
				v := showJSON(t, dir, id)
				if v.Status != record.StatusDone {
					t.Errorf("status %s (%s)", v.Status, v.Reason)
				}
				if len(v.Decisions) != 1 || v.Decisions[0].By != lead1 || v.Decisions[0].Decision != record.VerdictApprove || v.Decisions[0].Via != "cli" {
					t.Errorf("decisions %+v", v.Decisions)
				}
				if len(v.Operations) != 1 || v.Operations[0].Key != id+"/1" || v.Operations[0].Status != record.OpCommitted ||
					receiptID(t, v.Operations[0].Receipt) != refund.ID {
					t.Errorf("operations %+v; the shop's refund is %s", v.Operations, refund.ID)
				}
				if a := v.Operations[0].Attempts; a != 1 {
					t.Errorf("the refund was sent %d times", a)
				}
				must(t, dir, exitDone, "verify")
				// And nothing more happens on another resume or approval.
				must(t, dir, exitDone, "resume", id)
				if code, _, _ := signoff(t, dir, "approve", id, "--as", lead2); code != exitRefused {
					t.Errorf("approve after done: exit %d", code)
				}
				oneRefund(t, dir, id+"/1", "119.00")
			})
		}
	})
}

// TestCrashAfterStep1: the recorded agent, killed after step 1 and resumed,
// makes as many model calls as a run that was never interrupted.
func TestCrashAfterStep1(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		// An uninterrupted run, for comparison.
		clean := newDir(t)
		cleanID := runIDOf(t, must(t, clean, exitWaiting, "run", "T-65273"))
		want := showJSON(t, clean, cleanID).ModelCalls
		if want != 3 || modelCalls(t, clean, cleanID) != want {
			t.Fatalf("uninterrupted run: %d model calls recorded, %d in the ledger; want 3", want, modelCalls(t, clean, cleanID))
		}

		dir := newDir(t)
		crash(t, dir, "after-step-1", "run", "T-65273")
		rs := runs(t, dir, "--status", "running")
		if len(rs) != 1 || rs[0].TaskID != "T-65273" || rs[0].Step != 1 || rs[0].ModelCalls != 1 {
			t.Fatalf("after the crash: %+v", rs)
		}
		id := rs[0].ID
		if text := must(t, dir, 0, "runs"); !strings.Contains(text, id) || !strings.Contains(text, "running") {
			t.Errorf("runs:\n%s", text)
		}
		if n := modelCalls(t, dir, id); n != 1 {
			t.Errorf("the ledger has %d model calls after step 1", n)
		}
		// A run still in progress is neither done nor failed: show says so with its own code.
		must(t, dir, exitActive, "show", id)

		must(t, dir, exitWaiting, "resume", id)
		v := showJSON(t, dir, id)
		if v.Status != record.StatusWaitingApproval || v.Step != 3 {
			t.Errorf("after resume: status %s step %d", v.Status, v.Step)
		}
		if v.ModelCalls != want {
			t.Errorf("the run recorded %d model calls, an uninterrupted run %d", v.ModelCalls, want)
		}
		if n := modelCalls(t, dir, id); n != want {
			t.Errorf("the provider's ledger has %d model calls, an uninterrupted run %d", n, want)
		}
		trace := strings.TrimSpace(must(t, dir, 0, "trace", id))
		last := trace[strings.LastIndex(trace, "\n")+1:]
		if wantLine := fmt.Sprintf("model calls: %d recorded in the run, %d in the provider's usage log", want, want); last != wantLine {
			t.Errorf("trace ends with %q, want %q", last, wantLine)
		}
		if string(v.Actions[0].Args) != string(showJSON(t, clean, cleanID).Actions[0].Args) {
			t.Errorf("the resumed run proposes %s", v.Actions[0].Args)
		}
		noChanges(t, dir)
		must(t, dir, exitDone, "verify")
	})
}

// TestUnprovableOutcome: after a crash between the shop's refund and the
// receipt, the shop's register cannot say what the key did (it names another
// kind of change under it). signoff neither refunds again nor calls the run
// cancelled or failed: a person must look.
//
// The register is edited by hand because nothing a user can do through the CLI
// makes it unable to answer: an empty or missing shop file is re-seeded (and
// would then truthfully say "not found"), and an unreadable one stops the
// command before any run is touched.
func TestUnprovableOutcome(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		dir := newDir(t)
		id := unprovableRefund(t, dir)

		code, out, errs := signoff(t, dir, "resume", id)
		if code != exitAttention {
			t.Fatalf("resume: exit %d, want 5\n%s%s", code, out, errs)
		}
		v := showJSON(t, dir, id)
		if v.Status != record.StatusNeedsAttention || !strings.Contains(v.Reason, "cannot be proven") {
			t.Errorf("status %s, reason %q", v.Status, v.Reason)
		}
		if len(v.Operations) != 1 || v.Operations[0].Status != record.OpUnknown || v.Operations[0].Attempts != 1 {
			t.Errorf("operations %+v", v.Operations)
		}
		must(t, dir, exitAttention, "resume", id)
		if code, _, _ := signoff(t, dir, "cancel", id, "--as", lead1, "--reason", "give up"); code != exitRefused {
			t.Errorf("cancel of a run whose outcome is unknown: exit %d", code)
		}
		if v := showJSON(t, dir, id); v.Status != record.StatusNeedsAttention {
			t.Errorf("status %s", v.Status)
		}
		// Still one change in the shop, and one refund row behind it.
		if ch := changes(t, dir); len(ch) != 1 || ch[0].Key != id+"/1" {
			t.Errorf("the shop has %+v", ch)
		}
		db, err := sqlite.OpenDB(shopPath(dir))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var refunds int
		if err := db.QueryRow(`SELECT COUNT(*) FROM refunds`).Scan(&refunds); err != nil || refunds != 1 {
			t.Errorf("%d refunds in the shop (%v)", refunds, err)
		}
	})
}

// TestConcurrentApprovals: two processes approve the same run at the same time.
// Exactly one decision and one refund; the other is told who won.
func TestConcurrentApprovals(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		for round := range 3 {
			t.Run(fmt.Sprint(round), func(t *testing.T) {
				t.Parallel()
				dir := newDir(t)
				id := submitWaiting(t, dir)
				approvers := []string{lead1, lead2}
				type result struct {
					code     int
					out, err string
				}
				var cmds []*exec.Cmd
				var outs, errs []fmt.Stringer
				for _, as := range approvers {
					cmd, out, errb := child(t, dir, nil, "approve", id, "--as", as)
					cmds, outs, errs = append(cmds, cmd), append(outs, out), append(errs, errb)
				}
				for _, cmd := range cmds {
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
				}
				results := make([]result, len(cmds))
				for i, cmd := range cmds {
					err := cmd.Wait()
					ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
					if err != nil && !ws.Exited() {
						t.Fatalf("approve as %s: %v", approvers[i], err)
					}
					results[i] = result{ws.ExitStatus(), outs[i].String(), errs[i].String()}
				}

				v := showJSON(t, dir, id)
				if len(v.Decisions) != 1 {
					t.Fatalf("%d decisions: %+v", len(v.Decisions), v.Decisions)
				}
				winner := v.Decisions[0].By
				for i, r := range results {
					switch approvers[i] {
					case winner:
						if r.code != exitDone {
							t.Errorf("the winner %s: exit %d\n%s%s", winner, r.code, r.out, r.err)
						}
					default:
						if r.code != exitRefused || !strings.Contains(r.err, "already approved by "+winner+" at ") {
							t.Errorf("the loser %s: exit %d, stderr %q; want 2 naming %s", approvers[i], r.code, r.err, winner)
						}
					}
				}
				if v.Status != record.StatusDone {
					t.Errorf("status %s (%s)", v.Status, v.Reason)
				}
				oneRefund(t, dir, id+"/1", "119.00")
				must(t, dir, exitDone, "verify")
			})
		}
	})
}

// receiptID is the id in an operation's receipt.
func receiptID(t *testing.T, b json.RawMessage) string {
	t.Helper()
	var rc record.Receipt
	if err := json.Unmarshal(b, &rc); err != nil {
		t.Errorf("receipt %s: %v", b, err)
	}
	return rc.ID
}

// TestConcurrentSubmitSameKey: an agent that retries in two processes at once
// still gets one run.
func TestConcurrentSubmitSameKey(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		dir := newDir(t)
		must(t, dir, 0, "runs") // create the files first, as a running server would have
		var cmds []*exec.Cmd
		var outs []fmt.Stringer
		for range 2 {
			cmd, out, _ := child(t, dir, nil, "submit", fixture("refund-double-charge.json"))
			cmds, outs = append(cmds, cmd), append(outs, out)
		}
		for _, cmd := range cmds {
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
		}
		var ids []string
		for i, cmd := range cmds {
			if err := cmd.Wait(); cmd.ProcessState.ExitCode() != exitWaiting {
				t.Fatalf("submit %d: %v\n%s", i, err, outs[i])
			}
			ids = append(ids, runIDOf(t, outs[i].String()))
		}
		if ids[0] != ids[1] {
			t.Errorf("one idempotency key, two runs: %v", ids)
		}
		if rs := runs(t, dir); len(rs) != 1 {
			t.Errorf("%d runs", len(rs))
		}
	})
}

// TestCrashWhileSubmitting: a small refund runs without approval inside
// `submit`; killed between the shop's refund and the receipt, the run is found
// by `runs` and finished by `resume` without a second refund.
func TestCrashWhileSubmitting(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		for _, failpoint := range []string{"after-intent", "after-effect"} {
			t.Run(failpoint, func(t *testing.T) {
				t.Parallel()
				dir := newDir(t)
				crash(t, dir, failpoint, "submit", fixture("small-refund.json"))
				rs := runs(t, dir, "--status", "executing")
				if len(rs) != 1 {
					t.Fatalf("executing runs: %+v", rs)
				}
				id := rs[0].ID
				must(t, dir, exitDone, "resume", id)
				ch := changes(t, dir)
				if len(ch) != 1 || ch[0].Key != id+"/1" || ch[0].PaymentID != "PAY-793996-1" || ch[0].Amount != "9.95" {
					t.Fatalf("the shop has %+v", ch)
				}
				v := showJSON(t, dir, id)
				if v.Status != record.StatusDone || len(v.Operations) != 1 || v.Operations[0].Attempts != 1 || receiptID(t, v.Operations[0].Receipt) != ch[0].ID {
					t.Errorf("run %+v", v)
				}
				must(t, dir, exitDone, "verify")
			})
		}
	})
}

// TestCrashAfterAnEditedApproval: what runs after the crash is what the
// approver signed (the edited amount), once.
func TestCrashAfterAnEditedApproval(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		dir := newDir(t)
		id := submitWaiting(t, dir)
		edit := `{"order_id": "LK-507862", "payment_id": "PAY-507862-2", "amount": 60.00, "currency": "CAD", "reason_code": "RFD-DOUBLE"}`
		crash(t, dir, "after-decision-commit", "approve", id, "--as", lead1, "--edit", edit)
		noChanges(t, dir)
		must(t, dir, exitDone, "resume", id)
		oneRefund(t, dir, id+"/1", "60.00")
		must(t, dir, exitDone, "resume", id)
		oneRefund(t, dir, id+"/1", "60.00")
		must(t, dir, exitDone, "verify")
	})
}

// unprovableRefund makes a run whose refund happened but cannot be proven:
// the process dies between the shop's refund and the receipt, and the shop's
// register then names another kind of change under the key. It returns the
// run's id.
func unprovableRefund(t *testing.T, dir string) string {
	t.Helper()
	id := runIDOf(t, must(t, dir, exitWaiting, "run", "T-65273"))
	crash(t, dir, "after-effect", "approve", id, "--as", lead1)
	oneRefund(t, dir, id+"/1", "119.00")
	setShopKind(t, dir, id+"/1", "return_label")
	return id
}

// needsAttention is unprovableRefund resumed: the run needs attention.
func needsAttention(t *testing.T, dir string) string {
	t.Helper()
	id := unprovableRefund(t, dir)
	must(t, dir, exitAttention, "resume", id)
	return id
}

// setShopKind edits the kind of change the shop's register names under key.
func setShopKind(t *testing.T, dir, key, kind string) {
	t.Helper()
	db, err := sqlite.OpenDB(shopPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec(`UPDATE operations SET kind = ? WHERE key = ?`, kind, key)
	if err == nil {
		if n, _ := res.RowsAffected(); n != 1 {
			err = fmt.Errorf("%d rows", n)
		}
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("edit the shop's register: %v", err)
	}
}

// TestARestartedServeFinishesItsRunAtOnce: serve is killed executing a run
// (after its intent), holding the run's lease for ten minutes. Started again
// on the same host, serve sees that the lease's owner is a process of this
// host that is gone, takes the run over at once and finishes it, once, long
// before the lease would have lapsed.
func TestARestartedServeFinishesItsRunAtOnce(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		dir := newDir(t)
		cfg := noSlackConfig(t, dir)
		id := submitWaiting(t, dir)
		// The approver's process dies after its decision: only serve executes the run.
		crash(t, dir, "after-decision-commit", "approve", id, "--as", lead1)
		env := append([]string{"SIGNOFF_LEASE_TTL=10m"}, noSlackEnv...)
		first := startServeChildEnv(t, dir, cfg, append(env, "SIGNOFF_FAILPOINT=after-intent"))
		diedAtFailpoint(t, first)
		if v := showJSON(t, dir, id); v.Status != record.StatusExecuting || len(v.Operations) != 1 || v.Operations[0].Status != record.OpPending {
			t.Fatalf("after serve died: status %s, operations %+v", v.Status, v.Operations)
		}
		noChanges(t, dir)

		second := startServeChildEnv(t, dir, cfg, env)
		waitFor(t, "the restarted serve to finish the run", func() bool { return showJSON(t, dir, id).Status == record.StatusDone })
		refund := oneRefund(t, dir, id+"/1", "119.00")
		v := showJSON(t, dir, id)
		if len(v.Operations) != 1 || v.Operations[0].Status != record.OpCommitted || v.Operations[0].Attempts != 1 ||
			receiptID(t, v.Operations[0].Receipt) != refund.ID {
			t.Errorf("operations %+v; the shop's refund is %s", v.Operations, refund.ID)
		}
		second.mu.Lock()
		logged := second.log.String()
		second.mu.Unlock()
		if !strings.Contains(logged, `msg="run taken over from an owner that is gone" run_id=`+id) ||
			!strings.Contains(logged, fmt.Sprintf("/%d\n", first.cmd.Process.Pid)) {
			t.Errorf("the restarted serve did not log taking the run over from pid %d:\n%s", first.cmd.Process.Pid, logged)
		}
		must(t, dir, exitDone, "verify")
	})
}

// diedAtFailpoint waits for a serve started with SIGNOFF_FAILPOINT to die of
// it (SIGKILL), as a crashed machine would leave it.
func diedAtFailpoint(t *testing.T, s *serveChild) {
	t.Helper()
	waitFor(t, "serve to die at its failpoint", func() bool {
		select {
		case <-s.exited:
			return true
		default:
			return false
		}
	})
	if ws, ok := s.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("serve ended with %v, want SIGKILL at the failpoint", s.cmd.ProcessState)
	}
}
