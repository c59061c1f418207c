package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/workflow"
)

// TestLogFlags: a command on a terminal logs only what went wrong unless told
// otherwise; --log-level, --log-format and their environment variables change
// that; a value the program does not know is refused before anything runs.
func TestLogFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		args     []string
		wantCode int
		want     string // in stderr
		dont     string // not in stderr
	}{
		{"warn by default", nil, nil, exitWaiting, "", "run submitted"},
		{"info by flag", nil, []string{"--log-level", "info"}, exitWaiting, `level=INFO msg="run submitted" run_id=run_`, ""},
		{"json by environment", map[string]string{"SIGNOFF_LOG_FORMAT": "json", "SIGNOFF_LOG_LEVEL": "INFO"}, nil, exitWaiting,
			`"level":"INFO","msg":"run submitted","run_id":"run_`, ""},
		{"the flag beats the environment", map[string]string{"SIGNOFF_LOG_LEVEL": "info"}, []string{"--log-level", "error"}, exitWaiting, "", "run submitted"},
		{"unknown level", nil, []string{"--log-level", "loud"}, exitRefused, "want debug, info, warn or error", ""},
		{"unknown format", map[string]string{"SIGNOFF_LOG_FORMAT": "xml"}, nil, exitRefused, "want text or json", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"--db", dbPath(dir), "--shop", shopPath(dir)}, tc.args...)
			args = append(args, "submit", fixture("refund-double-charge.json"))
			var out, errOut bytes.Buffer
			code := run(t.Context(), args, func(k string) string { return tc.env[k] }, strings.NewReader(""), &out, &errOut)
			stderr := errOut.String()
			if code != tc.wantCode || !strings.Contains(stderr, tc.want) || (tc.dont != "" && strings.Contains(stderr, tc.dont)) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d, saying %q and not %q", code, stderr, tc.wantCode, tc.want, tc.dont)
			}
			if tc.wantCode == exitRefused {
				if _, err := os.Stat(dbPath(dir)); err == nil {
					t.Error("a refused command created the store")
				}
			}
		})
	}
}

// logLine is one JSON log line.
type logLine map[string]any

func (l logLine) str(k string) string { s, _ := l[k].(string); return s }

// TestServeLogsJSON: `signoff serve --log-format json` writes nothing but JSON
// lines on stderr: one start line that says what it serves (and no secret),
// and an info line for each post, click, decision, execution and rewrite,
// with the run id, then its shutdown.
func TestServeLogsJSON(t *testing.T) {
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(cfg, []byte(slackConfig(fs)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SLACK_SIGNING_SECRET": serveSecret, "SLACK_BOT_TOKEN": serveToken, "SIGNOFF_OWNER": "replica-a"}
	getenv := func(k string) string { return env[k] }
	global := []string{"--db", dbPath(dir), "--shop", shopPath(dir), "--config", cfg}
	cli := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append(global, args...), getenv, strings.NewReader(""), &out, &errOut); code != exitWaiting && code != exitDone {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out.String(), errOut.String())
		}
		return out.String()
	}
	id := runIDOf(t, cli("submit", fixture("refund-double-charge.json")))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr logBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, append(global, "--log-format", "json", "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"), getenv, strings.NewReader(""), io.Discard, &stderr)
	}()
	lines := func() []logLine {
		var out []logLine
		for _, raw := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
			if raw == "" {
				continue
			}
			var l logLine
			if err := json.Unmarshal([]byte(raw), &l); err != nil {
				t.Fatalf("a log line that is not JSON: %q", raw)
			}
			out = append(out, l)
		}
		return out
	}
	find := func(msg string) logLine {
		for _, l := range lines() {
			if l.str("msg") == msg && (l.str("run_id") == id || l["run_id"] == nil) {
				return l
			}
		}
		return nil
	}
	waitFor(t, "the start line", func() bool { return find("signoff serving") != nil })
	start := find("signoff serving")
	for k, want := range map[string]any{"store": "sqlite", "db": dbPath(dir), "channel": "C0APPROVALS", "socket_mode": false, "owner": "replica-a", "level": "INFO"} {
		if start[k] != want {
			t.Errorf("start line %s = %v, want %v (%v)", k, start[k], want, start)
		}
	}
	if start.str("version") == "" || !strings.HasPrefix(start.str("addr"), "127.0.0.1:") {
		t.Errorf("start line without version or addr: %v", start)
	}

	waitFor(t, "the post", func() bool { return find("slack message posted") != nil })
	var v workflow.RunView
	if err := json.Unmarshal([]byte(cli("show", id, "--json")), &v); err != nil {
		t.Fatal(err)
	}
	s := &served{addr: start.str("addr")}
	if status, body := s.click(t, "block_actions_approve.json", lead1, &v); status != http.StatusOK {
		t.Fatalf("click: %d %s", status, body)
	}
	for _, msg := range []string{"slack approval recorded", "decision recorded", "action executed", "run finished", "slack message updated"} {
		waitFor(t, "a line "+msg+" for the run", func() bool { return find(msg) != nil && find(msg).str("run_id") == id })
	}
	if l := find("slack approval recorded"); l.str("user_id") != lead1 || l.str("status") != "executing" {
		t.Errorf("the click's line: %v", l)
	}
	cancel()
	if code := <-exited; code != exitDone {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if find("signoff stopped") == nil {
		t.Error("no line saying it stopped")
	}
	if out := stderr.String(); strings.Contains(out, serveToken) || strings.Contains(out, serveSecret) {
		t.Error("a secret in the log")
	}
}

// TestDescribeDB: the start line names the store without any secret a
// database URL may carry.
func TestDescribeDB(t *testing.T) {
	for _, tc := range []struct{ db, want string }{
		{"/var/lib/signoff/signoff.db", "/var/lib/signoff/signoff.db"},
		{"postgres://signoff:secret@db.internal:5432/signoff?sslmode=require", "postgres://db.internal:5432/signoff"},
		{"postgresql://signoff@db.internal/signoff?password=secret", "postgresql://db.internal/signoff"},
	} {
		if got := describeDB(tc.db); got != tc.want {
			t.Errorf("describeDB(%q) = %q, want %q", tc.db, got, tc.want)
		}
	}
}
