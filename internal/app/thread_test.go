package app

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/record"
)

// TestTheThreadSurvivesKilledProcesses: the approver's process is killed after
// the intent of the action it approved; serve takes the run over and
// finishes it, and the approval message's thread tells each detail once, in
// order: the evidence, the approval, the attempt, the receipt, the outcome.
// Serve killed and started again sends none of them twice.
func TestTheThreadSurvivesKilledProcesses(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		dir := newDir(t)
		fs := fakeslack.New()
		t.Cleanup(fs.Close)
		cfg := callbackConfig(t, dir, fs, "http://127.0.0.1:1/")
		env := []string{"SLACK_SIGNING_SECRET=" + serveSecret, "SLACK_BOT_TOKEN=" + serveToken, "SIGNOFF_CALLBACK_SECRET=" + callbackSecret}
		// key is the proposal's idempotency key, payment the charge it refunds.
		submit := func(key, payment string) string {
			body, err := os.ReadFile(fixture("refund-double-charge.json"))
			if err != nil {
				t.Fatal(err)
			}
			p := proposal(t, dir, key+".json", strings.NewReplacer("resolver-T-65273-1", key, `"payment_id": "PAY-507862-2"`, `"payment_id": "`+payment+`"`).Replace(string(body)))
			cmd, out, errb := child(t, dir, env, "--config", cfg, "submit", p)
			if err := cmd.Run(); cmd.ProcessState.ExitCode() != exitWaiting {
				t.Fatalf("submit: %v\n%s%s", err, out, errb)
			}
			return runIDOf(t, out.String())
		}
		id := submit("first", "PAY-507862-2")
		// The approver's process dies after the intent of the action it
		// approved, before the call: serve takes the run over and finishes it.
		cmd, out, errb := child(t, dir, append(env, "SIGNOFF_FAILPOINT=after-intent"), "--config", cfg, "approve", id, "--as", lead1)
		err := cmd.Run()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("approve should have died after its intent: %v\n%s%s", err, out, errb)
		}

		restarted := startServeChild(t, dir, cfg, fs)
		var approval fakeslack.Message
		defer func() {
			if t.Failed() {
				t.Logf("status %s posts %+v\n%s", showJSON(t, dir, id).Status, fs.Messages(), restarted.output())
			}
		}()
		waitFor(t, "the run done and its outcome in the thread", func() bool {
			ps := fs.Posts()
			if len(ps) != 1 {
				return false
			}
			approval = ps[0]
			rs := fs.Replies(approval.TS)
			return showJSON(t, dir, id).Status == record.StatusDone && len(rs) > 0 && strings.Contains(rs[len(rs)-1].Blocks, "Outcome")
		})
		said := threadBlocks(fs, approval.TS)

		if err := restarted.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-restarted.exited
		second := submit("second", "PAY-507862-1")
		startServeChild(t, dir, cfg, fs)
		waitFor(t, "serve started again to post the next run and its first reply", func() bool {
			for _, p := range fs.Posts() {
				if strings.Contains(p.Blocks, second) {
					return len(fs.Replies(p.TS)) == 1
				}
			}
			return false
		})
		if again := threadBlocks(fs, approval.TS); len(again) != len(said) {
			t.Fatalf("after the restart %d replies in the thread, before it %d:\n%q", len(again), len(said), again)
		}
		seen := map[string]bool{}
		for _, s := range said {
			if seen[s] {
				t.Errorf("a reply was posted twice: %s", s)
			}
			seen[s] = true
		}
		next := 0
		for _, w := range []string{"Evidence", "Approved", "Calling action 1", "receipt", "Outcome"} {
			for next < len(said) && !strings.Contains(said[next], w) {
				next++
			}
			if next == len(said) {
				t.Fatalf("the thread does not say %q in order:\n%q", w, said)
			}
		}
	})
}

// threadBlocks are the blocks of the replies in the thread of ts.
func threadBlocks(fs *fakeslack.Server, ts string) []string {
	var out []string
	for _, r := range fs.Replies(ts) {
		out = append(out, r.Blocks)
	}
	return out
}

// TestServeKilledAfterEachSlackPostPostsNothingTwice: serve dies after
// each post Slack took, before it marks the row sent (the failpoint
// slack-after-post), and is started again, over and over, until the run is
// done and told: the approval message, each rewrite and each reply in its
// thread, are in Slack once; the retry found each post by its metadata.
func TestServeKilledAfterEachSlackPostPostsNothingTwice(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		dir := newDir(t)
		fs := fakeslack.New()
		t.Cleanup(fs.Close)
		cfg := callbackConfig(t, dir, fs, "http://127.0.0.1:1/")
		env := []string{"SLACK_SIGNING_SECRET=" + serveSecret, "SLACK_BOT_TOKEN=" + serveToken, "SIGNOFF_CALLBACK_SECRET=" + callbackSecret}
		p := proposal(t, dir, "refund.json", refundJSON(agentID, "119.00", ""))
		cmd, out, errb := child(t, dir, env, "--config", cfg, "submit", p)
		if err := cmd.Run(); cmd.ProcessState.ExitCode() != exitWaiting {
			t.Fatalf("submit: %v\n%s%s", err, out, errb)
		}
		id := runIDOf(t, out.String())

		kills := 0
		// untilKilled starts serve with the failpoint again each time it
		// dies, until done holds.
		untilKilled := func(what string, done func() bool) {
			for range 30 {
				s := startServeChild(t, dir, cfg, fs, "SIGNOFF_FAILPOINT="+bot.FailAfterPost)
				died := false
				waitFor(t, what, func() bool {
					select {
					case <-s.exited:
						died = true
						return true
					default:
						return done()
					}
				})
				if !died {
					_ = s.cmd.Process.Signal(syscall.SIGTERM)
					<-s.exited
					return
				}
				kills++
			}
			t.Fatalf("%s: serve died 30 times", what)
		}
		untilKilled("the approval message", func() bool { return len(fs.Posts()) == 1 && len(fs.Replies(fs.Posts()[0].TS)) == 1 })
		approval := fs.Posts()[0]

		if code, out, errs := signoff(t, dir, "--config", cfg, "approve", id, "--as", lead1); code != 0 {
			t.Fatalf("approve: exit %d\n%s%s", code, out, errs)
		}
		untilKilled("the run told done in the thread", func() bool {
			rs := fs.Replies(approval.TS)
			return len(rs) > 0 && strings.Contains(rs[len(rs)-1].Blocks, "Outcome")
		})
		if kills < 2 {
			t.Fatalf("serve died %d times; the failpoint did not fire after the posts", kills)
		}
		keys := map[string]bool{}
		for _, m := range fs.Messages() {
			key := fmt.Sprint(m.Metadata["event_payload"])
			if m.Metadata == nil || keys[key] {
				t.Errorf("message %s posted twice or without its outbox key (%v): %s", m.TS, m.Metadata, m.Text)
			}
			keys[key] = true
		}
		if ps := fs.Posts(); len(ps) != 1 {
			t.Errorf("%d approval messages, want 1", len(ps))
		}
		if m := fs.Posts()[0]; m.Updates == 0 || strings.Contains(m.Blocks, "signoff_approve") {
			t.Errorf("the approval message was not rewritten after the decision: %s", m.Blocks)
		}
		said := threadBlocks(fs, approval.TS)
		next := 0
		for _, w := range []string{"Evidence", "Approved", "Calling action 1", "receipt", "Outcome"} {
			for next < len(said) && !strings.Contains(said[next], w) {
				next++
			}
			if next == len(said) {
				t.Fatalf("the thread does not say %q in order:\n%q", w, said)
			}
		}
		if n := len(fs.Calls("chat.postMessage")); n != len(fs.Messages()) {
			t.Errorf("%d posts for %d messages", n, len(fs.Messages()))
		}
	})
}
