package app

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/metrics"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

const (
	serveSecret = "test-signing-secret"
	serveToken  = "xoxb-test-token"
)

// served is a `signoff serve` running in process on a loopback port, with a
// fake Slack Web API, sharing its database with the CLI.
type served struct {
	dir, db, config, addr string
	adminAddr             string // metrics and the probes
	slack                 *fakeslack.Server
	app                   *app
	getenv                func(string) string
	log                   *lockedBuffer // what the server logged, at serve's level (info)
}

func startServed(t *testing.T) *served {
	t.Helper()
	return startServedAfter(t, nil)
}

// startServedAfter is startServed with before run first on the fake Slack and
// the folder of the store, the config and the shop.
func startServedAfter(t *testing.T, before func(fs *fakeslack.Server, dir string)) *served {
	t.Helper()
	return startServedOn(t, "", before)
}

// startServedOn is startServedAfter on the store db names ("": a SQLite file
// in the folder), with metrics read from the store every 20ms.
func startServedOn(t *testing.T, db string, before func(fs *fakeslack.Server, dir string)) *served {
	t.Helper()
	return startServedWith(t, db, 20*time.Millisecond, nil, before)
}

// startServedWith is startServedOn with the workers' safety poll and, when
// edit is not nil, the config it returns for the served one.
func startServedWith(t *testing.T, db string, poll time.Duration, edit func(yaml string) string, before func(fs *fakeslack.Server, dir string)) *served {
	t.Helper()
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	dir := t.TempDir()
	if before != nil {
		before(fs, dir)
	}
	cfgPath := filepath.Join(dir, "signoff.yaml")
	yaml := slackConfig(fs)
	if edit != nil {
		yaml = edit(yaml)
	}
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SLACK_SIGNING_SECRET": serveSecret, "SLACK_BOT_TOKEN": serveToken}
	getenv := func(k string) string { return env[k] }
	if db == "" {
		db = filepath.Join(dir, "signoff.db")
	}
	o := options{db: db, shop: filepath.Join(dir, "shop.db"), config: cfgPath, metrics: metrics.New("test"), server: true}
	ctx, cancel := context.WithCancel(context.Background())
	log := &lockedBuffer{}
	a, err := openApp(ctx, o, getenv, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := startServer(ctx, a, serveOptions{addr: "127.0.0.1:0", adminAddr: "127.0.0.1:0", signingSecret: serveSecret, botToken: serveToken,
		poll: poll, metricsEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := s.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		a.Close()
	})
	return &served{dir: dir, db: db, config: cfgPath, addr: s.addr, adminAddr: s.adminAddr, slack: fs, app: a, getenv: getenv, log: log}
}

// serveAPIToken is the agent API token of the served config.
const serveAPIToken = "sk_test_resolver"

// slackConfig is the built-in config with a slack section pointing at fs,
// and an agent API token for the resolver agent.
func slackConfig(fs *fakeslack.Server) string {
	sum := sha256.Sum256([]byte(serveAPIToken))
	return string(config.DefaultYAML()) + slackSection(fs) + fmt.Sprintf(`api:
  tokens:
    - {id: resolver, sha256: %s, requester: agent:resolver, scopes: [submit, read, cancel]}
`, hex.EncodeToString(sum[:]))
}

// slackSection is the slack section of a config pointing at fs, matching
// the recorded payloads in fixtures/slack.
func slackSection(fs *fakeslack.Server) string {
	return fmt.Sprintf(`
slack:
  channel: C0APPROVALS
  app_id: A0SIGNOFF1
  team_id: T0SHOP0001
  api_url: %s
`, fs.URL())
}

// cli runs a command of the program against the server's files, as an operator would.
func (s *served) cli(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{"--db", s.db, "--shop", filepath.Join(s.dir, "shop.db"), "--config", s.config}, args...)
	code := run(context.Background(), full, s.getenv, strings.NewReader(""), &out, &errOut)
	return code, out.String() + errOut.String()
}

// waitFor polls cond until it holds, failing after a bound; no fixed sleeps.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// click sends Slack's signed request for a click on a button of the run's message.
func (s *served) click(t *testing.T, fixture, user string, v *workflow.RunView) (int, string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "slack", fixture))
	if err != nil {
		t.Fatal(err)
	}
	ref := fmt.Sprintf("v1:%s:%s:%s", v.ID, v.Gate.RequestID, v.Gate.Fingerprint)
	body := strings.NewReplacer(
		"{{USER_ID}}", user, "{{RUN_ID}}", v.ID, "{{REQUEST_ID}}", v.Gate.RequestID,
		"{{FINGERPRINT}}", v.Gate.Fingerprint, "{{SHORT_FINGERPRINT}}", policy.ShortFingerprint(v.Gate.Fingerprint), "{{REF}}", ref,
	).Replace(string(raw))
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(freshTrigger(body))); err != nil {
		t.Fatal(err)
	}
	form := []byte("payload=" + url.QueryEscape(compact.String()))
	req, err := http.NewRequest(http.MethodPost, "http://"+s.addr+"/slack/interactions", bytes.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = bot.SignedHeader(serveSecret, time.Now().Unix(), form)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// undelivered counts the outbox rows not delivered yet, due or not.
func (s *served) undelivered(t *testing.T) int {
	t.Helper()
	var n int
	err := s.app.store.View(context.Background(), func(ctx context.Context, tx storage.Tx) error {
		rows, err := tx.DueOutbox(ctx, time.Now().Add(24*time.Hour), 0)
		n = len(rows)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (s *served) get(t *testing.T, id string) *workflow.RunView {
	t.Helper()
	v, err := s.app.engine.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestServeEndToEnd: submit → message posted with run id and fingerprint → a
// signed click from a team lead → 200 → the action runs once → the message is
// rewritten with the decision and the receipt.
func TestServeEndToEnd(t *testing.T) {
	s := startServed(t)
	code, out := s.cli(t, "submit", filepath.Join("..", "..", "fixtures", "proposals", "refund-double-charge.json"))
	if code != exitWaiting {
		t.Fatalf("submit exit %d:\n%s", code, out)
	}
	id := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	v := s.get(t, id)

	waitFor(t, "the approval message", func() bool { return len(s.slack.Posts()) == 1 })
	msg := s.slack.Posts()[0]
	short := policy.ShortFingerprint(v.Gate.Fingerprint)
	if msg.Channel != "C0APPROVALS" || !strings.Contains(msg.Blocks, id) || !strings.Contains(msg.Blocks, short) || !strings.Contains(msg.Blocks, "signoff_approve") {
		t.Fatalf("posted message lacks the run id, fingerprint or buttons: %+v", msg)
	}
	waitFor(t, "the message ts on the request", func() bool { return s.get(t, id).Requests[0].MessageTS == msg.TS })

	status, body := s.click(t, "block_actions_approve.json", "U0LEAD0001", v)
	if status != http.StatusOK {
		t.Fatalf("click: %d %s", status, body)
	}
	waitFor(t, "the run to finish", func() bool { return s.get(t, id).Status == record.StatusDone })
	done := s.get(t, id)
	if len(done.Operations) != 1 || done.Operations[0].Status != record.OpCommitted {
		t.Fatalf("operations %+v", done.Operations)
	}
	var receipt record.Receipt
	if err := json.Unmarshal(done.Operations[0].Receipt, &receipt); err != nil || receipt.ID == "" {
		t.Fatalf("receipt %s %v", done.Operations[0].Receipt, err)
	}
	waitFor(t, "the message rewritten with the receipt", func() bool {
		m := s.slack.Posts()[0]
		return strings.Contains(m.Blocks, receipt.ID) && strings.Contains(m.Blocks, "U0LEAD0001") && !strings.Contains(m.Blocks, "signoff_approve")
	})
	if posts := s.slack.Posts(); len(posts) != 1 {
		t.Fatalf("%d messages posted, want 1", len(posts))
	}
	// One approval that finished the run: a rewrite per rendering, not one per transition.
	waitFor(t, "the outbox to drain", func() bool { return s.undelivered(t) == 0 })
	seen := map[string]bool{msg.Blocks: true}
	updates := s.slack.Calls("chat.update")
	for _, c := range updates {
		if seen[c.Form.Get("blocks")] {
			t.Errorf("chat.update sent a rendering Slack already shows (%d updates in all)", len(updates))
		}
		seen[c.Form.Get("blocks")] = true
	}
	// The message's thread tells the details, once each and in order, the
	// receipt and the outcome after the request was decided.
	var said []string
	for _, r := range s.slack.Replies(msg.TS) {
		said = append(said, r.Blocks)
	}
	want := []string{"Evidence", "Approved", "Calling action 1", receipt.ID, "Outcome"}
	if len(said) != len(want) {
		t.Fatalf("%d replies in the thread, want %d: %q", len(said), len(want), said)
	}
	for i, w := range want {
		if !strings.Contains(said[i], w) {
			t.Errorf("reply %d does not say %q: %s", i, w, said[i])
		}
	}
	code, out = s.cli(t, "shop", "changes", "--json")
	if code != 0 || strings.Count(out, `"kind": "refund"`) != 1 || !strings.Contains(out, receipt.ID) {
		t.Fatalf("shop changes (exit %d):\n%s", code, out)
	}
}

// TestServePicksUpCLIWork: a decision made on the terminal while the server runs
// is executed by it and rewritten in Slack.
func TestServePicksUpCLIWork(t *testing.T) {
	s := startServed(t)
	code, out := s.cli(t, "submit", filepath.Join("..", "..", "fixtures", "proposals", "refund-double-charge.json"))
	if code != exitWaiting {
		t.Fatalf("submit exit %d:\n%s", code, out)
	}
	id := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	waitFor(t, "the approval message", func() bool { return len(s.slack.Posts()) == 1 })
	if code, out := s.cli(t, "reject", id, "--as", "U0LEAD0002", "--reason", "customer already got a credit note"); code != exitEnded {
		t.Fatalf("reject exit %d:\n%s", code, out)
	}
	waitFor(t, "the message rewritten as rejected", func() bool {
		m := s.slack.Posts()[0]
		return m.Updates > 0 && strings.Contains(m.Blocks, "U0LEAD0002") && !strings.Contains(m.Blocks, "signoff_approve")
	})
	if code, out := s.cli(t, "shop", "changes", "--json"); code != 0 || strings.Contains(out, "refund") {
		t.Fatalf("a rejected refund reached the shop:\n%s", out)
	}
}

// TestServeConcurrentClicks: 50 clicks from several users at once over HTTP:
// one decision, one execution.
func TestServeConcurrentClicks(t *testing.T) {
	s := startServed(t)
	_, out := s.cli(t, "submit", filepath.Join("..", "..", "fixtures", "proposals", "refund-double-charge.json"))
	id := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	v := s.get(t, id)
	users := []string{"U0LEAD0001", "U0LEAD0002", "U0MGR00001"}
	var wg sync.WaitGroup
	statuses := make([]int, 50)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = s.click(t, "block_actions_approve.json", users[i%len(users)], v)
		}()
	}
	wg.Wait()
	for i, st := range statuses {
		if st != http.StatusOK {
			t.Fatalf("click %d answered %d", i, st)
		}
	}
	waitFor(t, "the run to finish", func() bool { return s.get(t, id).Status == record.StatusDone })
	if d := s.get(t, id).Decisions; len(d) != 1 {
		t.Fatalf("%d decisions, want 1: %+v", len(d), d)
	}
	if _, out := s.cli(t, "shop", "changes", "--json"); strings.Count(out, `"kind": "refund"`) != 1 {
		t.Fatalf("want one refund:\n%s", out)
	}
}

func TestServeRefusesToStartWithoutItsSecrets(t *testing.T) {
	s := startServed(t)
	for _, tt := range []struct {
		name string
		so   serveOptions
		want string
	}{
		{"no signing secret", serveOptions{addr: "127.0.0.1:0", botToken: serveToken}, "SLACK_SIGNING_SECRET"},
		{"no bot token", serveOptions{addr: "127.0.0.1:0", signingSecret: serveSecret}, "SLACK_BOT_TOKEN"},
		{"socket mode without app token", serveOptions{addr: "127.0.0.1:0", botToken: serveToken, socketMode: true}, "SLACK_APP_TOKEN"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := startServer(context.Background(), s.app, tt.so)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// TestServePostsRunsThatWaitedWithoutSlack: runs that started waiting before
// the config had a slack section get their approval message when serve
// starts; a run whose post was queued already gets exactly one.
func TestServePostsRunsThatWaitedWithoutSlack(t *testing.T) {
	var before, queued string
	s := startServedAfter(t, func(fs *fakeslack.Server, dir string) {
		submit := func(config, body string) string {
			t.Helper()
			path := filepath.Join(dir, "proposal.json")
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{"--db", dbPath(dir), "--shop", shopPath(dir), "--config", config, "submit", path},
				noEnv, strings.NewReader(""), &out, &errOut)
			if code != exitWaiting {
				t.Fatalf("submit exit %d:\n%s%s", code, out.String(), errOut.String())
			}
			return runIDOf(t, out.String())
		}
		plain := filepath.Join(dir, "plain.yaml")
		if err := os.WriteFile(plain, config.DefaultYAML(), 0o600); err != nil {
			t.Fatal(err)
		}
		before = submit(plain, refundJSON(agentID, "60", "before-slack"))
		withSlack := filepath.Join(dir, "slack.yaml")
		if err := os.WriteFile(withSlack, []byte(slackConfig(fs)), 0o600); err != nil {
			t.Fatal(err)
		}
		queued = submit(withSlack, refundJSON(agentID, "70", "queued"))
	})
	waitFor(t, "both approval messages", func() bool {
		return s.get(t, before).Requests[0].MessageTS != "" && s.get(t, queued).Requests[0].MessageTS != "" && s.undelivered(t) == 0
	})
	msgs := s.slack.Posts()
	if len(msgs) != 2 {
		t.Fatalf("%d messages posted, want one per run: %+v", len(msgs), msgs)
	}
	for _, id := range []string{before, queued} {
		n := 0
		for _, m := range msgs {
			if strings.Contains(m.Blocks, id) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("run %s has %d messages, want 1", id, n)
		}
	}
	// /runs cancel promised that the message would say so.
	if code, out := s.cli(t, "cancel", before, "--as", lead1, "--reason", "duplicate ticket"); code != exitEnded {
		t.Fatalf("cancel exit %d:\n%s", code, out)
	}
	waitFor(t, "the message rewritten as cancelled", func() bool {
		for _, m := range s.slack.Posts() {
			if strings.Contains(m.Blocks, before) {
				return m.Updates > 0 && !strings.Contains(m.Blocks, "signoff_approve")
			}
		}
		return false
	})
}

// TestServeChecksSlackAtStart: `signoff serve` asks Slack whether its token
// works and its bot is in the channel before serving. A bad token or an
// unknown channel refuses to start (exit 2, what to do, nothing served or
// posted); a bot not invited yet starts with a warning that says /invite.
func TestServeChecksSlackAtStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(fs *fakeslack.Server)
		socket  bool
		starts  bool
		want    string
	}{
		{"bad token", func(fs *fakeslack.Server) { fs.ErrorNext("auth.test", "invalid_auth") }, false, false,
			"Slack refused the bot token (invalid_auth): set SLACK_BOT_TOKEN"},
		{"unknown channel", func(fs *fakeslack.Server) { fs.ErrorNext("conversations.info", "channel_not_found") }, false, false,
			"check slack.channel"},
		{"bad token in socket mode", func(fs *fakeslack.Server) { fs.ErrorNext("auth.test", "invalid_auth") }, true, false,
			"set SLACK_BOT_TOKEN"},
		{"unknown channel in socket mode", func(fs *fakeslack.Server) { fs.ErrorNext("conversations.info", "channel_not_found") }, true, false,
			"check slack.channel"},
		{"bot not in the channel", func(fs *fakeslack.Server) { fs.SetMember("C0APPROVALS", false) }, false, true,
			"/invite @signoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := fakeslack.New()
			t.Cleanup(fs.Close)
			dir := t.TempDir()
			cfg := filepath.Join(dir, "signoff.yaml")
			if err := os.WriteFile(cfg, []byte(slackConfig(fs)), 0o600); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"SLACK_SIGNING_SECRET": serveSecret, "SLACK_BOT_TOKEN": serveToken, "SLACK_APP_TOKEN": "xapp-test"}
			getenv := func(k string) string { return env[k] }
			global := []string{"--db", dbPath(dir), "--shop", shopPath(dir), "--config", cfg}
			// A run waiting with its post queued: a server that starts posts it.
			var out, errOut bytes.Buffer
			if code := run(context.Background(), append(global, "submit", fixture("refund-double-charge.json")), getenv, strings.NewReader(""), &out, &errOut); code != exitWaiting {
				t.Fatalf("submit exit %d:\n%s%s", code, out.String(), errOut.String())
			}
			tc.prepare(fs)
			args := append(global, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
			if tc.socket {
				args = append(args, "--socket-mode")
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stderr logBuffer
			exited := make(chan int, 1)
			go func() { exited <- run(ctx, args, getenv, strings.NewReader(""), io.Discard, &stderr) }()
			if !tc.starts {
				select {
				case code := <-exited:
					if code != exitRefused || !strings.Contains(stderr.String(), tc.want) || strings.Contains(stderr.String(), "serving on") {
						t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 saying %q and serving nothing", code, stderr.String(), tc.want)
					}
				case <-time.After(15 * time.Second):
					t.Fatalf("serve did not refuse to start:\n%s", stderr.String())
				}
				if posts := fs.Calls("chat.postMessage"); len(posts) != 0 {
					t.Fatalf("a refused server posted %d messages", len(posts))
				}
				return
			}
			waitFor(t, "serve to listen", func() bool { return strings.Contains(stderr.String(), "serving on") })
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("no warning saying %q at start:\n%s", tc.want, stderr.String())
			}
			cancel()
			if code := <-exited; code != exitDone {
				t.Fatalf("exit %d after shutdown:\n%s", code, stderr.String())
			}
		})
	}
}

// TestASlowRequestBodyIsCutOff: a client that sends a request's headers and
// part of its body, then stalls, is not answered at leisure: the server
// stops reading at its read timeout, answers 408 and closes the connection,
// so a stalled client cannot hold a handler and its buffer for good. The
// stall is the client's doing: it is logged at info, never as an error, so
// no client can raise the 5xx and error alerts by stalling. The agent API
// answers problem+json (request_timeout), the Slack routes a plain 408.
func TestASlowRequestBodyIsCutOff(t *testing.T) {
	s := startServed(t)
	srv, err := startServer(t.Context(), s.app, serveOptions{addr: "127.0.0.1:0", signingSecret: serveSecret, botToken: serveToken,
		poll: time.Second, readTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	code, out := s.cli(t, "submit", fixture("refund-double-charge.json"))
	if code != exitWaiting {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	id := runIDOf(t, out)
	for _, tt := range []struct {
		name, path, ctype, start, wantType string
		logged                             string
	}{
		{"a Slack interaction", "/slack/interactions", "application/x-www-form-urlencoded", "payload=%7B", "text/plain", `msg="slack request refused" kind=interaction status=408`},
		{"a Slack command", "/slack/commands", "application/x-www-form-urlencoded", "command=%2Fsignoff", "text/plain", `msg="slack request refused" kind=command status=408`},
		{"an agent's proposal", "/v1/runs", "application/json", `{"actions":[`, "application/problem+json", `msg="api request body timed out" method=POST path=/v1/runs code=request_timeout status=408`},
		{"an agent's cancel", "/v1/runs/" + id + "/cancel", "application/json", `{"reason":`, "application/problem+json", `msg="api request body timed out" method=POST path=/v1/runs/:id/cancel code=request_timeout status=408`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			auth := ""
			if strings.HasPrefix(tt.path, "/v1/") {
				auth = "Authorization: Bearer " + serveAPIToken + "\r\n"
			}
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: signoff\r\n%sContent-Type: %s\r\nContent-Length: 400000\r\n\r\n%s", tt.path, auth, tt.ctype, tt.start)
			// A bound on the test, far above the read timeout: without one the
			// server would wait for the rest of the body for as long as it likes.
			conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			answer, err := io.ReadAll(conn)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the server still held the stalled request 20 s later")
			}
			resp, rerr := http.ReadResponse(bufio.NewReader(bytes.NewReader(answer)), nil)
			if rerr != nil {
				t.Fatalf("the answer does not read as HTTP (%v): %q", rerr, answer)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusRequestTimeout || !strings.HasPrefix(resp.Header.Get("Content-Type"), tt.wantType) {
				t.Fatalf("answered %s (%s) %s, want 408 %s", resp.Status, resp.Header.Get("Content-Type"), body, tt.wantType)
			}
			if tt.wantType == "application/problem+json" && !strings.Contains(string(body), `"code":"request_timeout"`) {
				t.Errorf("the problem is %s, want code request_timeout", body)
			}
			waitFor(t, "the stall logged", func() bool { return strings.Contains(s.log.String(), tt.logged) })
		})
	}
	logged := s.log.String()
	for _, line := range strings.Split(logged, "\n") {
		if strings.Contains(line, "status=408") && !strings.Contains(line, "level=INFO") {
			t.Errorf("a stalled body is logged above info: %s", line)
		}
	}
	if strings.Contains(logged, "level=ERROR") {
		t.Errorf("a stalled body logged an error:\n%s", logged)
	}
}

// TestRunsPendingMeansTheSameInSlackAndOnTheCLI: `/runs pending` and
// `signoff runs --status pending` list the same runs, those waiting for a
// decision, oldest first; a run done or rejected is in neither.
func TestRunsPendingMeansTheSameInSlackAndOnTheCLI(t *testing.T) {
	s := startServed(t)
	submit := func(path string, want int) string {
		t.Helper()
		code, out := s.cli(t, "submit", path)
		if code != want {
			t.Fatalf("submit %s: exit %d, want %d\n%s", path, code, want, out)
		}
		return runIDOf(t, out)
	}
	first := submit(fixture("refund-double-charge.json"), exitWaiting)
	submit(fixture("small-refund.json"), exitDone)
	rejected := submit(fixture("reship-planter.json"), exitWaiting)
	// The same proposal asked again under another key is another run.
	again := filepath.Join(s.dir, "reship-again.json")
	raw := strings.Replace(string(mustRead(t, fixture("reship-planter.json"))), `"resolver-T-90103-1"`, `"resolver-T-90103-2"`, 1)
	if err := os.WriteFile(again, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	second := submit(again, exitWaiting)
	if code, out := s.cli(t, "reject", rejected, "--as", lead1, "--reason", "no photo"); code != exitEnded {
		t.Fatalf("reject: exit %d\n%s", code, out)
	}
	want := []string{first, second}

	code, out := s.cli(t, "runs", "--status", "pending", "--json")
	var vs []workflow.RunView
	if err := json.Unmarshal([]byte(out), &vs); code != exitDone || err != nil {
		t.Fatalf("runs --status pending: exit %d, %v\n%s", code, err, out)
	}
	var cli []string
	for _, v := range vs {
		cli = append(cli, v.ID)
	}
	if !slices.Equal(cli, want) {
		t.Errorf("runs --status pending lists %v, want the waiting runs %v", cli, want)
	}

	form := []byte(freshTrigger(strings.NewReplacer("{{USER_ID}}", lead1, "{{TEXT}}", "pending").
		Replace(strings.TrimSpace(string(readSlackFixture(t, "slash_runs.form"))))))
	got := sendSigned(t, http.DefaultClient, "serve", s.addr, signNow("/slack/commands", form))
	if got.status != http.StatusOK || !strings.Contains(got.body, "Waiting for approval") {
		t.Fatalf("/runs pending: %+v", got)
	}
	var slack []string
	for _, id := range regexp.MustCompile(`run_[0-9A-Za-z]+`).FindAllString(got.body, -1) {
		if !slices.Contains(slack, id) {
			slack = append(slack, id)
		}
	}
	if !slices.Equal(slack, cli) {
		t.Errorf("/runs pending lists %v, runs --status pending %v", slack, cli)
	}
}
