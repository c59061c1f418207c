package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/keyring"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/sqlite"
)

var auditHead = regexp.MustCompile(`(?m)^audit anchor: (A\d+:[0-9a-f]{64})$`)

// TestVerifyAnchor: anchor writes and prints an anchor, and verify prints
// it as the newest; later, --anchor with it passes while the log extends it,
// and fails once the events are gone (here with the stored anchors and the
// sealed head removed too, as a thorough attacker would).
func TestVerifyAnchor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	m := auditHead.FindStringSubmatch(must(t, dir, exitDone, "anchor"))
	if m == nil {
		t.Fatal("anchor printed no anchor")
	}
	anchor := m[1]
	if v := auditHead.FindStringSubmatch(must(t, dir, exitDone, "verify")); v == nil || v[1] != anchor {
		t.Fatalf("verify printed %v, anchor %s", v, anchor)
	}
	must(t, dir, exitDone, "approve", id, "--as", lead1)
	if out := must(t, dir, exitDone, "verify", "--anchor", anchor); !strings.Contains(out, "anchor "+anchor+": the log extends it") {
		t.Fatalf("verify --anchor:\n%s", out)
	}
	db, err := sqlite.OpenDB(dbPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The whole log, wherever the store keeps each event.
	if err := sqlite.EditAuditEvents(t.Context(), db, func(*record.AuditEvent) bool { return false }); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DELETE FROM audit_heads`, `UPDATE runs SET audit_seq = 0, audit_hash = '', audit_anchored = 0, audit_key_id = '', audit_mac = ''`,
		`DELETE FROM audit_anchors WHERE id > 0`, `DELETE FROM integrity_head`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ := signoff(t, dir, "verify", "--anchor", anchor)
	if code != exitFailed || !strings.Contains(out, "does not reach the anchor") {
		t.Fatalf("verify --anchor after the log was cut: exit %d, want 1\n%s", code, out)
	}
	if code, _, errs := signoff(t, dir, "verify", "--anchor", "12:nothex"); code != exitRefused || !strings.Contains(errs, "want A12:HASH") {
		t.Fatalf("a malformed anchor: exit %d %q", code, errs)
	}
}

// TestSealedStoreNeedsItsKeys: the first write makes signoff.keys beside the
// store; without it, commands that write refuse (a new key would orphan every
// seal) and say where they looked, while reading still works, unverified.
func TestSealedStoreNeedsItsKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	keys := filepath.Join(dir, "signoff.keys")
	info, err := os.Stat(keys)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", info, err)
	}
	if err := os.Rename(keys, keys+".away"); err != nil {
		t.Fatal(err)
	}
	code, _, errs := signoff(t, dir, "approve", id, "--as", lead1)
	if code != exitRefused || !strings.Contains(errs, "this store is sealed") || !strings.Contains(errs, keys) {
		t.Fatalf("approve without the keys: exit %d %q", code, errs)
	}
	if _, err := os.Stat(keys); !os.IsNotExist(err) {
		t.Fatal("a new key file was made for a sealed store")
	}
	if out := must(t, dir, exitDone, "verify"); !strings.Contains(out, "seals: not checked") {
		t.Fatalf("verify without keys:\n%s", out)
	}
	must(t, dir, exitWaiting, "show", id)
	if out := must(t, dir, exitDone, "approve", id, "--as", lead1, "--keys", keys+".away"); !strings.Contains(out, "DONE") {
		t.Fatalf("approve with --keys:\n%s", out)
	}
}

// TestKeysFromTheEnvironment: SIGNOFF_KEYS holds the keys themselves; no file
// is made, and a bad value is refused before anything is written.
func TestKeysFromTheEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd, _, errb := child(t, dir, []string{"SIGNOFF_KEYS=bad"}, "submit", fixture("refund-double-charge.json"))
	if err := cmd.Run(); exitCode(err) != exitRefused || !strings.Contains(errb.String(), "SIGNOFF_KEYS") {
		t.Fatalf("a bad SIGNOFF_KEYS: %v %s", err, errb)
	}
	env := []string{"SIGNOFF_KEYS=env-1:" + strings.Repeat("a2V5LW1hdGVyaWFs", 3)}
	cmd, out, errb := child(t, dir, env, "submit", fixture("refund-double-charge.json"))
	if err := cmd.Run(); exitCode(err) != exitWaiting {
		t.Fatalf("submit with SIGNOFF_KEYS: %v\n%s\n%s", err, out, errb)
	}
	if _, err := os.Stat(filepath.Join(dir, "signoff.keys")); !os.IsNotExist(err) {
		t.Fatal("a key file was made although SIGNOFF_KEYS was set")
	}
	cmd, out, _ = child(t, dir, env, "verify")
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "seals: checked") {
		t.Fatalf("verify with SIGNOFF_KEYS: %v\n%s", err, out)
	}
}

// TestServeLogsTheAuditAnchor: the anchor serve writes and logs is the one
// verify prints, and verify --anchor accepts it.
func TestServeLogsTheAuditAnchor(t *testing.T) {
	dir := t.TempDir()
	submitWaiting(t, dir)
	o := options{db: dbPath(dir), shop: shopPath(dir), quietBuiltin: true}
	a, err := openApp(t.Context(), o, noEnv, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var buf syncBuffer
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	go func() { publishAnchors(ctx, a.engine, &logSink{log: log}, log, time.Hour); close(done) }()
	waitFor(t, "the audit anchor in the log", func() bool { return strings.Contains(buf.String(), `"msg":"audit anchor"`) })
	cancel()
	<-done
	var line struct{ Anchor string }
	if err := json.Unmarshal([]byte(strings.SplitN(buf.String(), "\n", 2)[0]), &line); err != nil {
		t.Fatal(err)
	}
	m := auditHead.FindStringSubmatch(must(t, dir, exitDone, "verify"))
	if m == nil || m[1] != line.Anchor {
		t.Fatalf("serve logged %q, verify printed %v", line.Anchor, m)
	}
	must(t, dir, exitDone, "verify", "--anchor", line.Anchor)
}

// syncBuffer is a bytes.Buffer safe for a logger in another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestExtendStopsAtTheMaximumLifetime: with requests.max_lifetime in the
// config, extending past it is refused (exit 2) and the deadline stays.
func TestExtendStopsAtTheMaximumLifetime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "signoff.yaml", "roles:", "requests: {max_lifetime: 4d}\nroles:")
	id := runIDOf(t, must(t, dir, exitWaiting, "--config", cfg, "submit", fixture("refund-double-charge.json")))
	must(t, dir, exitWaiting, "--config", cfg, "extend", id, "12h", "--as", lead1)
	before := showRaw(t, dir, id)
	code, _, errs := signoff(t, dir, "--config", cfg, "extend", id, "1d", "--as", lead1)
	if code != exitRefused || !strings.Contains(errs, "a request lives at most 4 days") {
		t.Fatalf("extend past the lifetime: exit %d %q", code, errs)
	}
	if showRaw(t, dir, id) != before {
		t.Fatal("a refused extension changed the run")
	}
}

// TestKeysThatAreNotTheStores: with SIGNOFF_KEYS holding keys the store is
// not sealed with, every command that writes refuses before it writes,
// naming the key ids on both sides, and says in one line that SIGNOFF_KEYS
// shadows the key file beside the store; verify says the store's key was
// not given, rather than call the store damaged or unkeyed.
func TestKeysThatAreNotTheStores(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := submitWaiting(t, dir)
	// Slack at an address nobody listens on: serve refuses before it looks.
	cfg := writeConfig(t, dir, "signoff.yaml", "roles:", "slack: {channel: C0APPROVALS, app_id: A0SIGNOFF1, team_id: T0SHOP0001, api_url: 'http://127.0.0.1:1/'}\nroles:")
	keyFile := filepath.Join(dir, "signoff.keys")
	storeKey := firstKeyID(t, keyFile)
	k2, k3 := keyLine(t, "k2"), keyLine(t, "k3")
	body := proposal(t, dir, "other.json", refundJSON(agentID, "119", "another-key"))
	before, events := showRaw(t, dir, id), auditEvents(t, dir)
	for _, args := range [][]string{
		{"submit", body},
		{"approve", id, "--as", lead1},
		{"cancel", id, "--as", lead1, "--reason", "not needed"},
		{"resume", id},
		{"expire"},
		{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
	} {
		code, _, errs := withKeysEnv(t, dir, k2+"\n"+k3, append([]string{"--config", cfg}, args...)...)
		want := "the store is sealed with key " + storeKey + "; the keys given are k2, k3 (from SIGNOFF_KEYS)"
		if code != exitRefused || !strings.Contains(errs, want) {
			t.Errorf("%s with keys that are not the store's: exit %d\n%s", args[0], code, errs)
		}
		if n := strings.Count(errs, "the integrity keys come from SIGNOFF_KEYS; the key file "+keyFile+" is not read\n"); n != 1 {
			t.Errorf("%s: %d warnings that SIGNOFF_KEYS shadows the key file\n%s", args[0], n, errs)
		}
	}
	if showRaw(t, dir, id) != before || auditEvents(t, dir) != events || len(runs(t, dir)) != 1 {
		t.Fatal("a refused command changed the store")
	}
	code, out, _ := withKeysEnv(t, dir, k2, "verify")
	want := "seals: not checked: the store is sealed with key " + storeKey + ", which you did not give (the keys given: k2, from SIGNOFF_KEYS)\n"
	if code != exitRefused || !strings.Contains(out, want) || strings.Contains(out, "damaged") || strings.Contains(out, "without keys") {
		t.Fatalf("verify with keys that are not the store's: exit %d\n%s", code, out)
	}
	code, out, _ = withKeysEnv(t, dir, k2+"\n"+readFile(t, keyFile), "verify")
	if code != exitDone || !strings.Contains(out, "seals: checked") {
		t.Fatalf("verify with the store's key among others: exit %d\n%s", code, out)
	}
}

// withKeysEnv runs one command in process against dir with SIGNOFF_KEYS set.
// Its context ends with the test's at the latest: a command that should have
// refused, and serves instead, stops then.
func withKeysEnv(t *testing.T, dir, keys string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), childTimeout)
	defer cancel()
	env := func(k string) string {
		switch k {
		case "SIGNOFF_KEYS":
			return keys
		case "SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN":
			return "set" // so that serve gets as far as the store
		}
		return ""
	}
	var out, errb bytes.Buffer
	code = run(ctx, append(storeArgs(dir), args...), env, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// keyLine is a fresh ID:SECRET line.
func keyLine(t *testing.T, id string) string {
	t.Helper()
	line, err := keyring.NewLine(id)
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// firstKeyID is the id of the key that seals, in a key file.
func firstKeyID(t *testing.T, path string) string {
	t.Helper()
	for _, line := range strings.Split(readFile(t, path), "\n") {
		if id, _, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			return id
		}
	}
	t.Fatalf("no key in %s", path)
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTheKeyFileNamesItsDocs: a new key file says where to read about it,
// in a page and section that exist.
func TestTheKeyFileNamesItsDocs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, dir, exitWaiting, "submit", fixture("refund-double-charge.json"))
	b, err := os.ReadFile(filepath.Join(dir, "signoff.keys"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\(see (docs/[a-z-]+\.md), "([^"]+)"\)`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("the key file does not say where to read about it:\n%s", b)
	}
	if sec := docSection(t, m[1], m[2]); !strings.Contains(sec, "signoff.keys") {
		t.Errorf("%s, %q does not speak of signoff.keys", m[1], m[2])
	}
}
