package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/workflow"
)

// waitingMarker is what wait logs at debug level once it has read the run
// and goes to sleep on it.
const waitingMarker = "waiting for the run to move on"

// wakeBound is the generous bound on how long after the deciding process
// exits a waiting process may exit; the figure measured is logged.
const wakeBound = 2 * time.Second

// watchedOutput is a child's output read while it runs: seen is closed once
// it holds marker.
type watchedOutput struct {
	mu     sync.Mutex
	b      bytes.Buffer
	marker string
	seen   chan struct{}
	once   sync.Once
}

func newWatchedOutput(marker string) *watchedOutput {
	return &watchedOutput{marker: marker, seen: make(chan struct{})}
}

func (w *watchedOutput) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.marker) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watchedOutput) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// proc is a child process of this program started on a store (global
// flags in db), with its stdout and stderr watched.
type proc struct {
	cmd      *exec.Cmd
	out, err *watchedOutput
	exited   chan time.Time
}

func startProc(t *testing.T, db []string, outMarker, errMarker string, args ...string) *proc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), childTimeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, self, append(append([]string{}, db...), args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	p := &proc{cmd: cmd, out: newWatchedOutput(outMarker), err: newWatchedOutput(errMarker), exited: make(chan time.Time, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.err
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		p.exited <- time.Now()
	}()
	return p
}

// await waits for seen, failing t (with p's output) when p exits first.
func (p *proc) await(t *testing.T, seen <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-seen:
	case <-p.exited:
		t.Fatalf("exited (%v) before %s\nstdout:\n%s\nstderr:\n%s", p.cmd.ProcessState, what, p.out, p.err)
	}
}

// end is when p exited and its exit code.
func (p *proc) end(t *testing.T) (time.Time, int) {
	t.Helper()
	at := <-p.exited
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Exited() {
		t.Fatalf("did not exit normally: %v\nstdout:\n%s\nstderr:\n%s", p.cmd.ProcessState, p.out, p.err)
	}
	return at, ws.ExitStatus()
}

// decideAndTime runs a deciding process on db once the waiter sleeps on run
// id, and returns how long after the decider exited the waiter did, how long
// after the decision's time (taken before its commit, so an upper bound of
// commit to exit) the waiter exited, and the waiter's exit code.
func decideAndTime(t *testing.T, db []string, waiter *proc, id string, decide ...string) (afterExit, afterDecision time.Duration, code int) {
	t.Helper()
	waiter.await(t, waiter.err.seen, "it went to sleep on the run")
	decider := startProc(t, db, "\n", "\n", decide...)
	decided, dcode := decider.end(t)
	if dcode != exitEnded && dcode != exitDone {
		t.Fatalf("signoff %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(decide, " "), dcode, decider.out, decider.err)
	}
	woke, code := waiter.end(t)
	var v workflow.RunView
	if err := json.Unmarshal([]byte(mustOn(t, db, -1, "show", id, "--json")), &v); err != nil || len(v.Decisions) != 1 {
		t.Fatalf("show %s --json: %v, %d decisions", id, err, len(v.Decisions))
	}
	return woke.Sub(decided), woke.Sub(v.Decisions[0].At), code
}

// TestWaitWakesOnAnotherProcessDecision: a `signoff wait` asleep on a run
// exits with the run's outcome soon after another process decides it, on a
// SQLite file (two processes) and on PostgreSQL (two replicas, each with its
// own connections).
func TestWaitWakesOnAnotherProcessDecision(t *testing.T) {
	t.Parallel()
	stores := []struct {
		name string
		db   func(t *testing.T) []string
	}{
		{"sqlite", func(t *testing.T) []string {
			dir := t.TempDir()
			return []string{"--db", dbPath(dir), "--shop", shopPath(dir)}
		}},
		{"postgres", func(t *testing.T) []string {
			dsn, dir := pgtest.Schema(t), t.TempDir()
			pgMust(t, dsn, dir, exitDone, "migrate")
			return []string{"--db", dsn, "--shop", shopPath(dir)}
		}},
	}
	decisions := []struct {
		name   string
		decide []string
		code   int
		status string
	}{
		{"reject", []string{"reject", "RUN", "--as", lead1, "--reason", "not this one"}, exitEnded, "REJECTED"},
		{"approve", []string{"approve", "RUN", "--as", lead1}, exitDone, "DONE"},
	}
	for _, st := range stores {
		for _, d := range decisions {
			t.Run(st.name+"/"+d.name, func(t *testing.T) {
				t.Parallel()
				db := st.db(t)
				id := runIDOf(t, mustOn(t, db, exitWaiting, "submit", fixture("refund-double-charge.json")))
				waiter := startProc(t, db, "\n", waitingMarker, "--log-level", "debug", "wait", id, "--timeout", "1m")
				decide := append([]string{}, d.decide...)
				decide[1] = id
				lag, sinceDecision, code := decideAndTime(t, db, waiter, id, decide...)
				t.Logf("%s: wait exited %v after the process that decided (%s) exited, %v after the decision's time",
					st.name, lag.Round(time.Millisecond), d.name, sinceDecision.Round(time.Millisecond))
				if lag > wakeBound {
					t.Errorf("wait exited %v after the decision; want well under %v", lag, wakeBound)
				}
				if code != d.code || !strings.Contains(waiter.out.String(), id+"  "+d.status) {
					t.Errorf("wait: exit %d, want %d with the run %s\nstdout:\n%s\nstderr:\n%s", code, d.code, d.status, waiter.out, waiter.err)
				}
			})
		}
	}
}

// mustOn runs a command in process on the store db names; want -1 takes any
// exit code.
func mustOn(t *testing.T, db []string, want int, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), append(append([]string{}, db...), args...), noEnv, strings.NewReader(""), &out, &errb)
	if want >= 0 && code != want {
		t.Fatalf("signoff %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out.String(), errb.String())
	}
	return out.String()
}

// TestSubmitWait: submit --wait exits with the code of the run's outcome: at
// once for a low-risk run that is done on submit, and once another process
// rejects a gated one.
func TestSubmitWait(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := []string{"--db", dbPath(dir), "--shop", shopPath(dir)}
	out := must(t, dir, exitDone, "submit", "--wait", fixture("small-refund.json"))
	if id := runIDOf(t, out); !strings.Contains(out, id+"  DONE") {
		t.Errorf("submit --wait of a low-risk run printed:\n%s", out)
	}

	submitter := startProc(t, db, "\n", waitingMarker, "--log-level", "debug", "submit", "--wait", "--timeout", "1m", fixture("refund-double-charge.json"))
	submitter.await(t, submitter.out.seen, "it printed the run id")
	id := runIDOf(t, submitter.out.String())
	lag, sinceDecision, code := decideAndTime(t, db, submitter, id, "reject", id, "--as", lead1, "--reason", "not this one")
	t.Logf("submit --wait exited %v after the rejecting process, %v after the decision's time", lag.Round(time.Millisecond), sinceDecision.Round(time.Millisecond))
	if lag > wakeBound {
		t.Errorf("submit --wait exited %v after the decision; want well under %v", lag, wakeBound)
	}
	if code != exitEnded || !strings.Contains(submitter.out.String(), id+"  REJECTED") {
		t.Errorf("submit --wait: exit %d, want %d with the run rejected\nstdout:\n%s\nstderr:\n%s", code, exitEnded, submitter.out, submitter.err)
	}
	if lines := strings.Count(submitter.out.String(), "run "+id+"  "); lines != 1 {
		t.Errorf("submit --wait showed the run %d times, want once, at the end:\n%s", lines, submitter.out)
	}
}

// TestWaitTimeout: a wait whose timeout passes shows the run as it is, says
// it is still waiting or executing, and exits with the code that says so: 3
// for a run waiting for approval, 6 for one a crash left executing.
func TestWaitTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		make   func(t *testing.T, dir string) string
		code   int
		status string
	}{
		{"waiting", func(t *testing.T, dir string) string { return submitWaiting(t, dir) }, exitWaiting, "waiting_approval"},
		{"executing", func(t *testing.T, dir string) string {
			id := submitWaiting(t, dir)
			crash(t, dir, "after-decision-commit", "approve", id, "--as", lead1)
			return id
		}, exitActive, "executing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			id := tc.make(t, dir)
			code, out, errs := signoff(t, dir, "wait", id, "--timeout", "50ms")
			if code != tc.code || !strings.Contains(out, id+"  "+strings.ToUpper(tc.status)) || !strings.Contains(errs, "still "+tc.status+" after waiting 50ms") {
				t.Fatalf("wait --timeout 50ms: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errs)
			}
			code, out, errs = signoff(t, dir, "wait", id, "--timeout", "50ms", "--json")
			if v := strings.TrimSpace(out); code != tc.code || !strings.HasPrefix(v, "{") || !strings.Contains(v, `"status": "`+tc.status+`"`) {
				t.Fatalf("wait --json: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
			}
		})
	}
}

// TestWaitRefuses: bad input is refused (exit 2) and an unknown run is
// named, as other commands do.
func TestWaitRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"wait", "run_nosuchrun"}, "run run_nosuchrun: no such run"},
		{[]string{"wait", id, "--timeout", "-1s"}, "--timeout -1s"},
		{[]string{"wait", id, "--timeout", "soon"}, "invalid argument"},
		{[]string{"wait"}, "wait needs RUN"},
		{[]string{"submit", "--timeout", "1m", fixture("small-refund.json")}, "--timeout goes with --wait"},
	} {
		code, out, errs := signoff(t, dir, tc.args...)
		if code != exitRefused || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("signoff %s: exit %d, stdout %q, stderr %q; want exit 2 saying %q", strings.Join(tc.args, " "), code, out, errs, tc.want)
		}
	}
	if rs := runs(t, dir); len(rs) != 1 {
		t.Errorf("%d runs after refused commands, want 1", len(rs))
	}
}

// TestWaitRunWakesThroughTheFeed: Engine.WaitRun on one app wakes when a
// second app, with a store handle of its own on the same database (a second
// *sqlite.Store on the file; a second PostgreSQL pool), decides the run: the
// only word of that commit is what the first store's feed hears.
func TestWaitRunWakesThroughTheFeed(t *testing.T) {
	t.Parallel()
	stores := []struct {
		name string
		db   func(t *testing.T) options
	}{
		{"sqlite", func(t *testing.T) options {
			dir := t.TempDir()
			return options{db: dbPath(dir), shop: shopPath(dir), quietBuiltin: true}
		}},
		{"postgres", func(t *testing.T) options {
			dsn, dir := pgtest.Schema(t), t.TempDir()
			pgMust(t, dsn, dir, exitDone, "migrate")
			return options{db: dsn, shop: shopPath(dir), quietBuiltin: true}
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			o := st.db(t)
			open := func() *app {
				a, err := openApp(t.Context(), o, noEnv, io.Discard, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { a.Close() })
				return a
			}
			waiter, decider := open(), open()
			p, err := (&cli{}).readProposal(fixture("refund-double-charge.json"))
			if err != nil {
				t.Fatal(err)
			}
			run, err := decider.engine.Submit(t.Context(), p)
			if err != nil || run.Status != record.StatusWaitingApproval {
				t.Fatalf("submit: %v, %v", run, err)
			}
			stop := waiter.feedChanges(t.Context())
			defer stop()
			type result struct {
				v       *workflow.RunView
				changed bool
				err     error
			}
			done := make(chan result, 1)
			go func() {
				v, changed, err := waiter.engine.WaitRun(t.Context(), run.ID, record.StatusWaitingApproval)
				done <- result{v, changed, err}
			}()
			for waiter.changes.Waiting() == 0 { // until the waiter sleeps
				runtime.Gosched()
			}
			select {
			case r := <-done:
				t.Fatalf("WaitRun returned before the decision: %+v", r)
			default:
			}
			if _, err := decider.engine.Decide(t.Context(), workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: lead1},
				Verdict: record.VerdictReject, Reason: "not this one", Via: "cli"}); err != nil {
				t.Fatal(err)
			}
			decided := time.Now()
			select {
			case r := <-done:
				if r.err != nil || !r.changed || r.v.Status != record.StatusRejected {
					t.Fatalf("WaitRun = %+v, want the run rejected", r)
				}
				t.Logf("%s: WaitRun returned %v after the other store's commit", st.name, time.Since(decided).Round(time.Microsecond))
			case <-time.After(10 * time.Second):
				t.Fatal("WaitRun was not woken by the other store's commit")
			}
		})
	}
}

// TestServeFeedsItsWaiters: serve runs its store's feed as one of its
// workers, so a waiter in the server (as the API's long poll is) wakes when
// a CLI, with a store of its own, rejects the run; and readiness counts the
// feed among the workers.
func TestServeFeedsItsWaiters(t *testing.T) {
	t.Parallel()
	s := startServed(t)
	code, out := s.cli(t, "submit", fixture("refund-double-charge.json"))
	if code != exitWaiting {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	id := runIDOf(t, out)
	done := make(chan *workflow.RunView, 1)
	go func() {
		v, _, err := s.app.engine.WaitRun(t.Context(), id, record.StatusWaitingApproval)
		if err != nil {
			t.Error(err)
		}
		done <- v
	}()
	for s.app.changes.Waiting() == 0 { // until the waiter sleeps
		runtime.Gosched()
	}
	if code, out := s.cli(t, "reject", id, "--as", lead1, "--reason", "not this one"); code != exitEnded {
		t.Fatalf("reject: exit %d\n%s", code, out)
	}
	select {
	case v := <-done:
		if v == nil || v.Status != record.StatusRejected {
			t.Fatalf("the server's waiter woke to %+v, want the run rejected", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's waiter was not woken by the CLI's rejection")
	}
	resp, err := http.Get("http://" + s.adminAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz: %d", resp.StatusCode)
	}
}
