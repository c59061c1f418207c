package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// auditHistory makes a store whose audit log has every kind of event: a run
// approved and done, a refused approval (no checkpoint), and a run cancelled
// with a reason that tries to take over the terminal. It returns the run ids.
func auditHistory(t *testing.T, dir string) (done, cancelled string) {
	t.Helper()
	done = submitWaiting(t, dir)
	must(t, dir, exitRefused, "approve", done, "--as", agentID)
	must(t, dir, exitDone, "approve", done, "--as", lead1)
	cancelled = runIDOf(t, must(t, dir, exitWaiting, "submit", fixture("reship-planter.json")))
	must(t, dir, exitEnded, "cancel", cancelled, "--as", lead1, "--reason", "dup\x1b[2J\nok: all clear\u202e")
	return done, cancelled
}

// readAuditLines parses `audit --json` output, one object a line, refusing
// fields the export does not define.
func readAuditLines(t *testing.T, out string) []auditLine {
	t.Helper()
	var lines []auditLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var l auditLine
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %d does not parse: %v\n%s", len(lines)+1, err, sc.Text())
		}
		lines = append(lines, l)
	}
	return lines
}

// recomputeChain checks the lines as a SIEM would, knowing only the export's
// format: seqs increase; a line of format 1 follows the line before it by
// seq and prev_hash, one of format 2 the previous line of its run; and each
// hash is the event's. It returns the first problem.
func recomputeChain(lines []auditLine) string {
	prev, seq := "", int64(0)
	runPrev := map[string]string{}
	for _, l := range lines {
		e := l.event()
		switch {
		case e.Seq <= seq:
			return fmt.Sprintf("seq %d does not follow %d", e.Seq, seq)
		case e.Format == record.AuditPerRun && e.PrevHash != runPrev[e.RunID]:
			return "prev_hash does not name the hash of the run's event before"
		case e.Format != record.AuditPerRun && (e.Seq != seq+1 || e.PrevHash != prev):
			return "prev_hash does not name the hash before"
		case record.AuditHash(e) != e.Hash:
			return "hash does not match the event"
		}
		prev, seq = e.Hash, e.Seq
		runPrev[e.RunID] = e.Hash
	}
	return ""
}

// TestAuditJSONRoundTrips: every line of `audit --json` parses, recomputing
// the chains over them hold, with as many events as verify checked; every event carries its seal, and those of
// transitions the checkpoint they name.
func TestAuditJSONRoundTrips(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	auditHistory(t, dir)
	lines := readAuditLines(t, must(t, dir, exitDone, "audit", "--json"))

	var rep workflow.VerifyReport
	if err := json.Unmarshal([]byte(must(t, dir, exitDone, "verify", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(lines) != rep.AuditEvents || len(lines) == 0 {
		t.Fatalf("audit printed %d events, verify checked %d", len(lines), rep.AuditEvents)
	}
	if problem := recomputeChain(lines); problem != "" {
		t.Fatalf("recomputing the exported chain: %s", problem)
	}
	var withCheckpoint, without int
	for _, l := range lines {
		if l.KeyID == "" || l.MAC == "" {
			t.Errorf("event %d has no seal in the export: %+v", l.Seq, l)
		}
		if l.CheckpointSeq != 0 && l.CheckpointHash != "" {
			withCheckpoint++
		} else {
			without++
		}
	}
	if withCheckpoint == 0 || without == 0 {
		t.Errorf("want events with and without a checkpoint, got %d and %d", withCheckpoint, without)
	}

	// The recomputation notices a changed field: it is a check, not a formality.
	for name, change := range map[string]func(*auditLine){
		"actor":  func(l *auditLine) { l.Actor = lead2 },
		"detail": func(l *auditLine) { l.Detail = bytes.Replace(l.Detail, []byte(`"`), []byte(` "`), 1) },
		"at":     func(l *auditLine) { l.At = l.At.Add(time.Millisecond) },
	} {
		changed := append([]auditLine(nil), lines...)
		change(&changed[len(changed)/2])
		if recomputeChain(changed) == "" {
			t.Errorf("a changed %s went unnoticed", name)
		}
	}
}

// TestAuditFilters: --run keeps one run's events, --since keeps those at or
// after a time or within an age.
func TestAuditFilters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	done, cancelled := auditHistory(t, dir)
	all := readAuditLines(t, must(t, dir, exitDone, "audit", "--json"))
	count := func(run string) (n int) {
		for _, l := range all {
			if l.RunID == run {
				n++
			}
		}
		return n
	}
	tests := []struct {
		args []string
		want int
	}{
		{nil, len(all)},
		{[]string{"--run", done}, count(done)},
		{[]string{"--run", cancelled}, count(cancelled)},
		{[]string{"--run", "run_nosuchrun"}, 0},
		{[]string{"--since", "1h"}, len(all)},
		{[]string{"--since", "1d"}, len(all)},
		{[]string{"--since", all[len(all)-1].At.Format(time.RFC3339Nano)}, countSince(all, all[len(all)-1].At)},
		{[]string{"--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, 0},
	}
	for _, tc := range tests {
		got := readAuditLines(t, must(t, dir, exitDone, append([]string{"audit", "--json"}, tc.args...)...))
		if len(got) != tc.want {
			t.Errorf("audit %v: %d events, want %d", tc.args, len(got), tc.want)
		}
		for _, l := range got {
			if len(tc.args) == 2 && tc.args[0] == "--run" && l.RunID != tc.args[1] {
				t.Errorf("audit %v printed an event of %s", tc.args, l.RunID)
			}
		}
	}
	if code, _, errs := signoff(t, dir, "audit", "--since", "yesterday"); code != exitRefused || !strings.Contains(errs, "--since") {
		t.Errorf("audit --since yesterday: exit %d %s", code, errs)
	}
}

// countSince counts the events at or after at.
func countSince(lines []auditLine, at time.Time) (n int) {
	for _, l := range lines {
		if !l.At.Before(at) {
			n++
		}
	}
	return n
}

// TestAuditHumanOutputIsInert: one line an event, whatever the text that a
// person or an agent wrote, and no control character reaches the terminal.
func TestAuditHumanOutputIsInert(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	auditHistory(t, dir)
	n := len(readAuditLines(t, must(t, dir, exitDone, "audit", "--json")))
	out := must(t, dir, exitDone, "audit")
	if got := strings.Count(out, "\n"); got != n {
		t.Errorf("%d lines for %d events:\n%s", got, n, out)
	}
	if strings.ContainsAny(out, "\x1b\u202e") {
		t.Errorf("a control character reached the terminal:\n%q", out)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if strings.HasPrefix(line, "ok:") || !strings.Contains(line, " hash ") || !strings.Contains(line, " sealed ") {
			t.Errorf("line %q: want seq, time, run, action, actor, hash and seal", line)
		}
	}
	if !strings.Contains(out, "cancel") || !strings.Contains(out, "dup") {
		t.Errorf("the cancellation and its reason are missing:\n%s", out)
	}
}

// lockedBuffer is a log destination the test reads while serve's loop writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAuditLogLines: with audit_log, serve logs every event appended after its
// start as one structured line with the fields of the export.
func TestAuditLogLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	auditHistory(t, dir)
	want := readAuditLines(t, must(t, dir, exitDone, "audit", "--json"))
	store, err := sqlite.OpenReadOnly(t.Context(), dbPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var buf lockedBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	from := want[1].Seq // as if serve started after the second event
	go func() {
		defer close(stopped)
		logAudit(ctx, engineOn(t, store), nil, log, 10*time.Millisecond, from)
	}()
	waitFor(t, "the audit events logged", func() bool { return strings.Count(buf.String(), "\n") >= len(want)-2 })
	cancel()
	<-stopped

	var got []map[string]any
	dec := json.NewDecoder(strings.NewReader(buf.String()))
	for {
		var m map[string]any
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	if len(got) != len(want)-2 {
		t.Fatalf("%d lines logged, want %d (the events after %d, once each):\n%s", len(got), len(want)-2, from, buf.String())
	}
	for i, m := range got {
		w := want[i+2]
		if m["msg"] != "audit_event" || m["seq"] != float64(w.Seq) || m["hash"] != w.Hash || m["prev_hash"] != w.PrevHash ||
			m["run_id"] != w.RunID || m["action"] != string(w.Action) || m["mac"] != w.MAC || m["detail"] != string(w.Detail) {
			t.Errorf("line %d: %v\nwant the event %+v", i, m, w)
		}
	}
}

// TestServeLogsAuditEvents: serve with audit_log: true logs each event
// appended while it runs, once, and nothing from before its start.
func TestServeLogsAuditEvents(t *testing.T) {
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	dir := t.TempDir()
	before := submitWaiting(t, dir) // written before serve starts: not logged
	cfgPath := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(cfgPath, []byte(slackConfig(fs)+"audit_log: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SLACK_SIGNING_SECRET": serveSecret, "SLACK_BOT_TOKEN": serveToken}
	var logs lockedBuffer
	o := options{db: dbPath(dir), shop: shopPath(dir), config: cfgPath, server: true, logFormat: "json"}
	ctx, cancel := context.WithCancel(t.Context())
	a, err := openApp(ctx, o, func(k string) string { return env[k] }, &logs, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := startServer(ctx, a, serveOptions{addr: "127.0.0.1:0", signingSecret: serveSecret, botToken: serveToken, poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		s.stop()
		a.Close()
	})
	code, out, errs := signoffIn(t, dir, "", "--config", cfgPath, "cancel", before, "--as", lead1, "--reason", "duplicate")
	if code != exitEnded {
		t.Fatalf("cancel: exit %d %s%s", code, out, errs)
	}
	all := readAuditLines(t, must(t, dir, exitDone, "audit", "--json"))
	last := all[len(all)-1]
	waitFor(t, "the cancellation logged", func() bool { return strings.Contains(logs.String(), last.Hash) })
	var logged []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"audit_event"`) {
			logged = append(logged, line)
		}
	}
	// Only the cancellation: the events from before the start are not logged
	// (the audit head serve logs at start names one, as an anchor, not as an event).
	if len(logged) != 1 || !strings.Contains(logged[0], fmt.Sprintf(`"seq":%d,`, last.Seq)) ||
		!strings.Contains(logged[0], `"hash":"`+last.Hash+`"`) || !strings.Contains(logged[0], `"mac":"`+last.MAC+`"`) {
		t.Fatalf("want one audit_event line, the cancellation (seq %d); got:\n%s", last.Seq, strings.Join(logged, "\n"))
	}
}
