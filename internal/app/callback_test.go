package app

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/callback"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/internal/stdwebhook"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlite"
)

const callbackSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// hookReceiver is an agent's callback endpoint: it verifies each request as
// docs/agent-api.md tells a receiver to, and records the events it took.
type hookReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []callback.Event
	raw  []hookRequest // the requests of got, as they arrived
	bad  []string
	down bool // answer 503 without taking the event
}

// hookRequest is a request the receiver took, for a second verifier.
type hookRequest struct {
	header http.Header
	body   []byte
	path   string // as it arrived, escaped
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	keys, err := stdwebhook.ParseSecrets(callbackSecret)
	if err != nil {
		t.Fatal(err)
	}
	r := &hookReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		id := req.Header.Get("webhook-id")
		if err := stdwebhook.Verify(keys, id, req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature"), body, time.Now(), 5*time.Minute); err != nil {
			r.bad = append(r.bad, err.Error())
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev callback.Event
		if err := json.Unmarshal(body, &ev); err != nil || ev.ID != id || ev.Run == nil {
			r.bad = append(r.bad, fmt.Sprintf("event %q (webhook-id %s): %v", body, id, err))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.got = append(r.got, ev)
		r.raw = append(r.raw, hookRequest{req.Header.Clone(), body, req.URL.EscapedPath()})
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	t.Cleanup(func() {
		if len(r.bad) > 0 {
			t.Errorf("the receiver refused requests: %q", r.bad)
		}
	})
	return r
}

func (r *hookReceiver) events() []callback.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *hookReceiver) requests() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.raw)
}

func (r *hookReceiver) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

// callbackConfig writes the built-in config with a slack section on fs and
// callbacks allowed under prefix, and returns its path.
func callbackConfig(t *testing.T, dir string, fs *fakeslack.Server, prefix string) string {
	t.Helper()
	// The slack section alone: slackConfig's has an api section of its own.
	y := string(config.DefaultYAML())
	if fs != nil {
		y += slackSection(fs)
	}
	y += fmt.Sprintf("\napi:\n  callbacks:\n    allow: [%s]\n    secret_env: SIGNOFF_CALLBACK_SECRET\n", prefix)
	p := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// withCallback is a refund proposal that asks for callbacks to url.
func withCallback(url string) string {
	return strings.Replace(refundJSON(agentID, "119.00", ""), `{"task_id"`, fmt.Sprintf(`{"callback_url": %q, "task_id"`, url), 1)
}

// cliWith runs one command in process with the config and environment env.
func cliWith(t *testing.T, dir, cfg string, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	full := append([]string{"--db", dbPath(dir), "--shop", shopPath(dir), "--config", cfg}, args...)
	var out, errb strings.Builder
	code := run(t.Context(), full, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// serveChild is `signoff serve` as a separate process.
type serveChild struct {
	cmd    *exec.Cmd
	exited chan struct{}
	log    *strings.Builder
	mu     *sync.Mutex
}

func startServeChild(t *testing.T, dir, cfg string, fs *fakeslack.Server, extra ...string) *serveChild {
	t.Helper()
	env := append([]string{"SLACK_SIGNING_SECRET=" + serveSecret, "SLACK_BOT_TOKEN=" + serveToken,
		"SIGNOFF_CALLBACK_SECRET=" + callbackSecret, "SIGNOFF_LEASE_TTL=1s"}, extra...)
	return startServeChildEnv(t, dir, cfg, env)
}

// startServeChildEnv is startServeChild with the environment env alone
// added to the test's.
func startServeChildEnv(t *testing.T, dir, cfg string, env []string) *serveChild {
	t.Helper()
	return startBackground(t, dir, env, "--config", cfg, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
}

// startBackground starts a command of the program that runs until stopped
// (serve, slack dev) as a separate process against dir, in dir, with extra
// environment variables; its stdout and stderr go to its log, and it is
// stopped with SIGTERM when the test ends.
func startBackground(t *testing.T, dir string, env []string, args ...string) *serveChild {
	t.Helper()
	cmd, _, _ := child(t, dir, env, args...)
	cmd.Dir = dir // ./signoff.yaml and relative paths are dir's
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	s := &serveChild{cmd: cmd, exited: make(chan struct{}), log: &strings.Builder{}, mu: &sync.Mutex{}}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		pw.Close()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-s.exited
		}
		if t.Failed() {
			s.mu.Lock()
			t.Logf("%s (pid %d) said:\n%s", strings.Join(args, " "), cmd.Process.Pid, s.log.String())
			s.mu.Unlock()
		}
	})
	return s
}

// addr waits, bounded, until serve listens, and returns its address.
func (s *serveChild) addr(t *testing.T) string {
	t.Helper()
	return s.await(t, "serve to listen", servingOn)[1]
}

// adminAddr waits, bounded, until serve serves metrics and health, and
// returns where.
func (s *serveChild) adminAddr(t *testing.T) string {
	t.Helper()
	return s.await(t, "serve to serve metrics and health", adminOn)[1]
}

// adminOn is serve's line saying where metrics and health are.
var adminOn = regexp.MustCompile(`signoff: metrics and health on (\S+)\n`)

// output is what the process has said so far.
func (s *serveChild) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// await waits, bounded, until the process's output matches re, and returns
// the match and its groups; a process that exits first fails the test.
func (s *serveChild) await(t *testing.T, what string, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	waitFor(t, what, func() bool {
		if m = re.FindStringSubmatch(s.output()); m != nil {
			return true
		}
		select {
		case <-s.exited:
			t.Fatalf("%s: the process exited first: %v\n%s", what, s.cmd.ProcessState, s.output())
		default:
		}
		return false
	})
	return m
}

func (s *serveChild) killedBySIGKILL(t *testing.T) {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not reach the failpoint")
	}
	if ws, ok := s.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("serve ended with %v, not SIGKILL at the failpoint", s.cmd.ProcessState)
	}
}

// callbackRows are the undelivered callback rows of dir's store.
func callbackRows(t *testing.T, dir string) []*record.OutboxMessage {
	t.Helper()
	st, err := sqlite.OpenReadOnly(t.Context(), dbPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ms []*record.OutboxMessage
	if err := st.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		var err error
		ms, err = tx.ListOutbox(ctx, storage.OutboxFilter{Kinds: []record.OutboxKind{callback.Kind}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestCallbacksSurviveAKilledServer is the delivery promise end to end, with
// the real program: a run with a callback URL tells its agent that it waits;
// serve is killed with SIGKILL after the waiting transition committed, before
// the POST or after the receiver took the event but before the delivery was
// recorded; the restarted serve delivers it (again, with the same event id);
// a receiver that is down for a while gets the done event of the approval
// once it is back; every request is signed.
func TestCallbacksSurviveAKilledServer(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		failpoint string
		taken     int // deliveries of the waiting event before the kill
	}{
		{callback.FailBeforePost, 0},
		{callback.FailAfterPost, 1},
	} {
		t.Run(tt.failpoint, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fs := fakeslack.New()
			t.Cleanup(fs.Close)
			recv := newHookReceiver(t)
			cfg := callbackConfig(t, dir, fs, recv.srv.URL+"/hooks/")
			env := map[string]string{}

			code, out, errs := cliWith(t, dir, cfg, env, "submit", proposal(t, dir, "p.json", withCallback(recv.srv.URL+"/hooks/agent-1")))
			if code != exitWaiting {
				t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
			}
			id := runIDOf(t, out)

			startServeChild(t, dir, cfg, fs, "SIGNOFF_FAILPOINT="+tt.failpoint).killedBySIGKILL(t)
			got := recv.events()
			if len(got) != tt.taken {
				t.Fatalf("before the kill the receiver took %d events, want %d: %+v", len(got), tt.taken, got)
			}
			if rows := callbackRows(t, dir); len(rows) != 1 || rows[0].Attempts != 1 {
				t.Fatalf("after the kill the outbox holds %+v, want the waiting event undelivered", rows)
			}

			recv.setDown(true)
			startServeChild(t, dir, cfg, fs)
			// A done event queued while the receiver is down: the approval
			// runs now, the event waits for the receiver.
			if code, out, errs := cliWith(t, dir, cfg, env, "approve", id, "--as", lead1); code != exitDone {
				t.Fatalf("approve: exit %d\n%s%s", code, out, errs)
			}
			waitFor(t, "a failed attempt recorded", func() bool {
				for _, m := range callbackRows(t, dir) {
					if strings.Contains(m.LastError, "503") {
						return true
					}
				}
				return false
			})
			recv.setDown(false)
			waitFor(t, "every callback delivered", func() bool { return len(callbackRows(t, dir)) == 0 })

			got = recv.events()
			if len(got) != tt.taken+2 {
				t.Fatalf("the receiver took %d events, want %d: %+v", len(got), tt.taken+2, got)
			}
			waiting, done := got[tt.taken], got[tt.taken+1]
			if waiting.Type != "run.waiting" || waiting.Run.ID != id || waiting.Run.Status != record.StatusWaitingApproval ||
				tt.taken == 1 && waiting.ID != got[0].ID {
				t.Errorf("after the restart the receiver took %s %s (status %s), want the waiting event %s", waiting.Type, waiting.ID, waiting.Run.Status, got[0].ID)
			}
			if done.Type != "run.done" || done.ID == waiting.ID || done.Run.Status != record.StatusDone || len(done.Run.Operations) != 1 {
				t.Errorf("the last event is %s %s of a run %s with %d operations", done.Type, done.ID, done.Run.Status, len(done.Run.Operations))
			}
		})
	}
}

// storeDump is every row of every table of dir's store, in a stable order.
func storeDump(t *testing.T, dir string) string {
	t.Helper()
	db, err := sqlite.OpenDB(dbPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	var b strings.Builder
	for _, table := range tables {
		rs, err := db.Query(`SELECT * FROM "` + table + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rs.Columns()
		var lines []string
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, fmt.Sprintf("%v", vals))
		}
		rs.Close()
		slices.Sort(lines)
		fmt.Fprintf(&b, "%s: %s\n", table, strings.Join(lines, "\n  "))
	}
	return b.String()
}

// TestCallbackOutsideTheAllowListChangesNothing: submit refuses a callback URL
// the config does not allow, naming what it allows, and writes nothing.
func TestCallbackOutsideTheAllowListChangesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := callbackConfig(t, dir, nil, "https://agents.example/signoff/")
	if code, out, errs := cliWith(t, dir, cfg, nil, "submit", proposal(t, dir, "ok.json", refundJSON(agentID, "119.00", ""))); code != exitWaiting {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	before := storeDump(t, dir)
	for _, url := range []string{"https://evil.example/signoff/x", "https://agents.example/signoffx", "https://agents.example.evil/signoff/"} {
		code, out, errs := cliWith(t, dir, cfg, nil, "submit", proposal(t, dir, "p.json", withCallback(url)))
		if code != exitRefused || !strings.Contains(errs, "callback_url is not allowed") || !strings.Contains(errs, "https://agents.example/signoff/") {
			t.Errorf("%s: exit %d, %q %q", url, code, out, errs)
		}
	}
	if after := storeDump(t, dir); after != before {
		t.Errorf("a refused submit changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestCallbackURLIsResolvedBeforeItIsMatched: submit matches a callback_url
// against the allow-list as a server reads it. One that leaves the prefix
// through dot segments is not allowed, one a server could read in more than
// one way is refused saying why, and neither writes anything; one that stays
// under the prefix is stored, shown and sent with its dot segments resolved.
func TestCallbackURLIsResolvedBeforeItIsMatched(t *testing.T) {
	t.Parallel()
	recv := newHookReceiver(t)
	prefix := recv.srv.URL + "/hooks/"
	dir := t.TempDir()
	cfg := callbackConfig(t, dir, nil, prefix)
	env := map[string]string{"SIGNOFF_CALLBACK_SECRET": callbackSecret}
	if code, out, errs := cliWith(t, dir, cfg, env, "submit", proposal(t, dir, "ok.json", refundJSON(agentID, "119.00", ""))); code != exitWaiting {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	before := storeDump(t, dir)
	for _, tt := range []struct{ url, says string }{
		{prefix + "../evil", "callback_url is not allowed: it reads as " + recv.srv.URL + "/evil"},
		{prefix + "%2e%2e/evil", "callback_url must not hold a dot encoded as %2e in its path"},
		{prefix + "%2E./evil", "callback_url must not hold a dot encoded as %2e in its path"},
		{prefix + "..%2Fevil", "callback_url must not hold a slash encoded as %2f in its path"},
		{prefix + `..\evil`, "callback_url must not contain a backslash"},
	} {
		code, out, errs := cliWith(t, dir, cfg, env, "submit", proposal(t, dir, "p.json", withCallback(tt.url)))
		if code != exitRefused || !strings.Contains(errs, tt.says) {
			t.Errorf("%s: exit %d, %q %q; want exit %d saying %q", tt.url, code, out, errs, exitRefused, tt.says)
		}
	}
	if after := storeDump(t, dir); after != before {
		t.Errorf("a refused submit changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	code, out, errs := cliWith(t, dir, cfg, env, "submit", proposal(t, dir, "p.json", withCallback(prefix+"v1/./../agent-1")))
	if code != exitWaiting {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	id := runIDOf(t, out)
	code, out, errs = cliWith(t, dir, cfg, env, "show", id, "--json")
	if code != exitWaiting || !strings.Contains(out, `"callback_url": "`+prefix+`agent-1"`) {
		t.Fatalf("show: exit %d, want the callback_url %sagent-1\n%s%s", code, prefix, out, errs)
	}
	a, err := openApp(t.Context(), options{db: dbPath(dir), shop: shopPath(dir), config: cfg}, func(k string) string { return env[k] }, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	d, err := callbackDispatcher(a)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.DeliverDue(t.Context(), 0); n != 1 || err != nil {
		t.Fatalf("delivered %d, %v; want the waiting event", n, err)
	}
	if got := recv.requests(); len(got) != 1 || got[0].path != "/hooks/agent-1" {
		t.Fatalf("the receiver took %+v, want one event at /hooks/agent-1", got)
	}
}

// TestOutboxShowsAFailingCallback: `signoff outbox` lists a callback its
// receiver refused, with the receiver's answer as its last error, shown
// inert: the answer is the receiver's text, not signoff's.
func TestOutboxShowsAFailingCallback(t *testing.T) {
	t.Parallel()
	// A receiver whose answer carries terminal control sequences.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err == nil {
					_, _ = io.Copy(io.Discard, req.Body)
				}
				_, _ = io.WriteString(conn, "HTTP/1.1 503 \x1b[2K\x1b[1Gall good\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			}()
		}
	}()
	prefix := "http://" + ln.Addr().String() + "/hooks/"
	dir := t.TempDir()
	cfg := callbackConfig(t, dir, nil, prefix)
	env := map[string]string{"SIGNOFF_CALLBACK_SECRET": callbackSecret}
	code, out, errs := cliWith(t, dir, cfg, env, "submit", proposal(t, dir, "p.json", withCallback(prefix+"a")))
	if code != exitWaiting {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	id := runIDOf(t, out)
	if code, out, errs := cliWith(t, dir, cfg, env, "outbox", "--failing"); code != 0 || !strings.Contains(out, "nothing waiting") {
		t.Fatalf("outbox --failing before any attempt: exit %d\n%s%s", code, out, errs)
	}

	a, err := openApp(t.Context(), options{db: dbPath(dir), shop: shopPath(dir), config: cfg}, func(k string) string { return env[k] }, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := callbackDispatcher(a)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.DeliverDue(t.Context(), 0); n != 0 || err != nil {
		t.Fatalf("delivered %d, %v", n, err)
	}
	a.Close()

	code, out, errs = cliWith(t, dir, cfg, env, "outbox", "--failing")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "callback") || !strings.Contains(out, `503 \x1b[2K\x1b[1Gall good`) {
		t.Fatalf("outbox --failing: exit %d\n%s%s", code, out, errs)
	}
	if strings.ContainsRune(out, 0x1b) {
		t.Errorf("outbox printed the receiver's escape sequences raw: %q", out)
	}
	if !regexp.MustCompile(`(?m)^\d+\s+callback\s+` + id + `\s+1\s+in `).MatchString(out) {
		t.Errorf("outbox does not show one attempt and the next to come:\n%s", out)
	}
	code, out, _ = cliWith(t, dir, cfg, env, "outbox", "--json")
	var rows []outboxRow
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 1 {
		t.Fatalf("outbox --json: exit %d, %v\n%s", code, err, out)
	}
	if r := rows[0]; r.Kind != callback.Kind || r.RunID != id || r.Attempts != 1 || r.URL != prefix+"a" ||
		!strings.HasPrefix(r.EventID, "evt_") || r.LastError != "the receiver answered 503 \x1b[2K\x1b[1Gall good" {
		t.Errorf("outbox --json row %+v", r)
	}
}

// TestServeRefusesCallbacksWithoutTheirSecret: with callbacks allowed, serve
// does not start without a readable signing secret, and opens no store.
func TestServeRefusesCallbacksWithoutTheirSecret(t *testing.T) {
	t.Parallel()
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	for _, tt := range []struct{ name, secret, want string }{
		{"unset", "", "SIGNOFF_CALLBACK_SECRET is not set"},
		{"not a whsec_ secret", "hunter2hunter2hunter2hunter2", "does not start with whsec_"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := callbackConfig(t, dir, fs, "https://agents.example/signoff/")
			env := map[string]string{"SLACK_SIGNING_SECRET": serveSecret, "SLACK_BOT_TOKEN": serveToken, "SIGNOFF_CALLBACK_SECRET": tt.secret}
			code, _, errs := cliWith(t, dir, cfg, env, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
			if code != exitRefused || !strings.Contains(errs, tt.want) || strings.Contains(errs, "hunter2") {
				t.Fatalf("exit %d, %q; want exit %d naming %q", code, errs, exitRefused, tt.want)
			}
			if _, err := os.Stat(dbPath(dir)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("serve made a store before refusing: %v", err)
			}
		})
	}
}
