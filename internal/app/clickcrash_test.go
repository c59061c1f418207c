package app

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/record"
)

// TestCrashDuringASlackClick kills a real `signoff serve` inside a signed
// Approve click, at each write boundary of the click's one commit (the claim
// of the request, the decision or the refusal, and the answer), starts serve
// again and sends the same signed bytes, as Slack retries a request that got
// no answer: the retry is answered 200 and the click counts once. Killed
// before the commit, nothing was claimed or decided, so the retry is handled
// as the first click; killed after it, the retry gets the first answer and
// decides (or refuses) nothing again. An approved run is executed once, its
// message posted once and never rewritten with a rendering Slack already
// shows.
func TestCrashDuringASlackClick(t *testing.T) {
	t.Parallel()
	tests := []struct {
		failpoint string
		user      string
		// crashed checks what the killed serve left behind.
		crashed func(t *testing.T, dir, id string)
		// approved says the click approves the run (or is refused).
		approved bool
	}{
		{
			failpoint: "before-decision-commit", user: lead1, approved: true,
			crashed: func(t *testing.T, dir, id string) {
				if v := showJSON(t, dir, id); v.Status != record.StatusWaitingApproval || len(v.Decisions) != 0 {
					t.Errorf("the uncommitted click left status %s, decisions %+v", v.Status, v.Decisions)
				}
			},
		},
		{
			failpoint: "after-decision-commit", user: lead1, approved: true,
			crashed: func(t *testing.T, dir, id string) {
				// The decision is kept. The worker wakes at its commit and,
				// on a busy machine, may record the run's intent while the
				// deciding goroutine waits to reach the failpoint: what
				// follows runs it once all the same.
				v := showJSON(t, dir, id)
				if v.Status == record.StatusWaitingApproval || len(v.Decisions) != 1 || len(v.Operations) > 1 {
					t.Errorf("status %s, decisions %+v, operations %+v", v.Status, v.Decisions, v.Operations)
				}
			},
		},
		{
			failpoint: "after-refusal-commit", user: "U0INTRUDER",
			crashed: func(t *testing.T, dir, id string) {
				if n := runEvents(t, dir, id, record.EventRefused); n != 1 {
					t.Errorf("%d refusals audited, want 1", n)
				}
			},
		},
	}
	onEachStore(t, func(t *testing.T, newDir func(*testing.T) string) {
		for _, tt := range tests {
			t.Run(tt.failpoint, func(t *testing.T) {
				t.Parallel()
				dir := newDir(t)
				fs := fakeslack.New()
				t.Cleanup(fs.Close)
				cfg := callbackConfig(t, dir, fs, "http://127.0.0.1:1/")
				env := []string{"SLACK_SIGNING_SECRET=" + serveSecret, "SLACK_BOT_TOKEN=" + serveToken, "SIGNOFF_CALLBACK_SECRET=" + callbackSecret}
				cmd, out, errb := child(t, dir, env, "--config", cfg, "submit", fixture("refund-double-charge.json"))
				if err := cmd.Run(); cmd.ProcessState.ExitCode() != exitWaiting {
					t.Fatalf("submit: %v\n%s%s", err, out, errb)
				}
				id := runIDOf(t, out.String())

				first := startServeChild(t, dir, cfg, fs, "SIGNOFF_FAILPOINT="+tt.failpoint)
				addr := first.addr(t)
				var msg fakeslack.Message
				waitFor(t, "the approval message, its ts on the request", func() bool {
					ps := fs.Posts()
					if len(ps) != 1 {
						return false
					}
					msg = ps[0]
					v := showJSON(t, dir, id)
					return len(v.Requests) == 1 && v.Requests[0].MessageTS == msg.TS
				})
				v := showJSON(t, dir, id)
				req := signNow("/slack/interactions", interaction(readSlackFixture(t, "block_actions_approve.json"), &v, tt.user, ""))
				if a, err := trySigned(addr, req); err == nil {
					t.Fatalf("serve answered the click it should have died in: %+v", a)
				}
				diedAtFailpoint(t, first)
				tt.crashed(t, dir, id)
				noChanges(t, dir)

				second := startServeChild(t, dir, cfg, fs)
				retry := sendSigned(t, http.DefaultClient, "serve", second.addr(t), req, bot.HeaderRetryNum, "1", "X-Slack-Retry-Reason", "http_timeout")
				if retry.status != http.StatusOK || retry.body != "" {
					t.Errorf("Slack's retry was answered %+v, want an empty 200", retry)
				}

				if !tt.approved {
					v := showJSON(t, dir, id)
					if v.Status != record.StatusWaitingApproval || len(v.Decisions) != 0 {
						t.Errorf("after the refused click: status %s, decisions %+v", v.Status, v.Decisions)
					}
					if n := runEvents(t, dir, id, record.EventRefused); n != 1 {
						t.Errorf("the refusal was audited %d times, want once", n)
					}
					noChanges(t, dir)
					must(t, dir, exitDone, "verify")
					return
				}
				waitFor(t, "the approved run to finish", func() bool { return showJSON(t, dir, id).Status == record.StatusDone })
				refund := oneRefund(t, dir, id+"/1", "119.00")
				v = showJSON(t, dir, id)
				if len(v.Decisions) != 1 || v.Decisions[0].By != lead1 || v.Decisions[0].Decision != record.VerdictApprove || v.Decisions[0].Via != "slack" {
					t.Errorf("decisions %+v, want one approval by %s via slack", v.Decisions, lead1)
				}
				if len(v.Operations) != 1 || v.Operations[0].Attempts != 1 || receiptID(t, v.Operations[0].Receipt) != refund.ID {
					t.Errorf("operations %+v; the shop's refund is %s", v.Operations, refund.ID)
				}
				if n := runEvents(t, dir, id, record.EventDecided); n != 1 {
					t.Errorf("%d decisions audited, want 1", n)
				}
				if n := runEvents(t, dir, id, record.EventRefused); n != 0 {
					t.Errorf("%d refusals audited: the retry was taken for a second click", n)
				}
				waitFor(t, "the message rewritten with the receipt", func() bool {
					m := fs.Posts()[0]
					return strings.Contains(m.Blocks, refund.ID) && !strings.Contains(m.Blocks, "signoff_approve")
				})
				if ps := fs.Posts(); len(ps) != 1 {
					t.Errorf("%d approval messages, want 1", len(ps))
				}
				seen := map[string]bool{msg.Blocks: true}
				for _, c := range fs.Calls("chat.update") {
					if seen[c.Form.Get("blocks")] {
						t.Errorf("chat.update sent a rendering Slack already shows (%d updates in all)", len(fs.Calls("chat.update")))
					}
					seen[c.Form.Get("blocks")] = true
				}
				must(t, dir, exitDone, "verify")
			})
		}
	})
}

// trySigned sends req to addr like sendSigned, but a server that dies while
// answering is an error returned, not a failed test.
func trySigned(addr string, req signedRequest) (answer, error) {
	hr, err := http.NewRequest(http.MethodPost, "http://"+addr+req.path, bytes.NewReader(req.body))
	if err != nil {
		return answer{}, err
	}
	hr.Header = req.hdr.Clone()
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}, err
}

// runEvents counts the audit events of run id with action.
func runEvents(t *testing.T, dir, id string, action record.Event) int {
	t.Helper()
	n := 0
	for _, l := range readAuditLines(t, must(t, dir, exitDone, "audit", "--json", "--run", id)) {
		if l.Action == action {
			n++
		}
	}
	return n
}
