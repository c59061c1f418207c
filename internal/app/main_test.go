package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/executor/command"
	"github.com/signoff-dev/signoff/keyring"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/storage/sqlstore"
	"github.com/signoff-dev/signoff/workflow"
)

// asMainEnv makes the test binary behave as the signoff program itself.
//
// Crash tests need a real process that SIGKILLs itself at a failpoint, and
// `signoff demo` re-executes os.Executable() to crash for real. Rather than
// building the binary a second time with `go build` (slow, and under -race a
// different build than the one being tested), the test binary doubles as the
// program: TestMain sets this variable for every child it starts, and a child
// that sees it runs Main exactly as the installed binary would — the same
// flags, environment, exit codes and failpoints — and never runs a test.
const asMainEnv = "SIGNOFF_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	// The command executor's programs start through this binary, as they
	// do through signoff's.
	command.MaybeLaunch()
	if os.Getenv(asMainEnv) == "1" {
		os.Exit(Main(os.Args[1:], ""))
	}
	// Children (ours and those of `signoff demo`) inherit the environment.
	// Keep them hermetic: no store, config or failpoint from the developer's shell.
	for _, k := range []string{"SIGNOFF_DB", "SIGNOFF_CONFIG", "SIGNOFF_SHOP", "SIGNOFF_FAILPOINT"} {
		os.Unsetenv(k)
	}
	os.Setenv(asMainEnv, "1")
	os.Exit(m.Run())
}

// The seeded shop and the example proposals.
const (
	lead1   = "U0LEAD0001"
	lead2   = "U0LEAD0002"
	manager = "U0MGR00001"
	agentID = "agent:resolver"
)

func shopPath(dir string) string { return filepath.Join(dir, "shop.db") }

// dbPath is the store the test's commands against dir use: dir's SQLite file,
// or the PostgreSQL schema onPostgres gave dir.
func dbPath(dir string) string {
	if dsn, ok := pgStores.Load(dir); ok {
		return dsn.(string)
	}
	return filepath.Join(dir, "signoff.db")
}

// storeArgs are the global flags of a command against dir: its store, its
// shop and, on PostgreSQL, its integrity keys (a SQLite store makes its own
// beside it).
func storeArgs(dir string) []string {
	args := []string{"--db", dbPath(dir), "--shop", shopPath(dir)}
	if _, ok := pgStores.Load(dir); ok {
		args = append(args, "--keys", filepath.Join(dir, "signoff.keys"))
	}
	return args
}

// pgStores maps a test's dir to the DSN of its PostgreSQL schema.
var pgStores sync.Map

// onPostgres makes every command a test runs against dir, in process or in a
// child, use a new, migrated PostgreSQL schema instead of dir's SQLite file,
// sealed with a key of its own as a SQLite store would be, so that verify
// also matches every transition with its audit event. It skips the test
// without SIGNOFF_TEST_POSTGRES.
func onPostgres(t *testing.T, dir string) {
	t.Helper()
	key, err := keyring.NewLine("k1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "signoff.keys"), []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pgStores.Store(dir, pgtest.Schema(t))
	t.Cleanup(func() {
		pgStores.Delete(dir)
		if _, err := os.Stat(filepath.Join(dir, "signoff.db")); err == nil {
			t.Error("a command used dir's SQLite file, not the PostgreSQL schema")
		}
	})
	must(t, dir, exitDone, "migrate")
}

// onEachStore runs test once on SQLite and once on PostgreSQL (skipped
// without SIGNOFF_TEST_POSTGRES), as subtests named after the store. newDir
// gives a new dir whose commands use that store, with a shop of its own.
func onEachStore(t *testing.T, test func(t *testing.T, newDir func(t *testing.T) string)) {
	t.Helper()
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			if store == "postgres" {
				pgtest.DSN(t) // skip here, not once per subtest
			}
			test(t, func(t *testing.T) string {
				t.Helper()
				dir := t.TempDir()
				if store == "postgres" {
					onPostgres(t, dir)
				}
				return dir
			})
		})
	}
}

// noEnv is the environment of in-process runs: nothing set, so only flags count.
func noEnv(string) string { return "" }

// signoff runs one command in process against dir's store and shop.
func signoff(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return signoffIn(t, dir, "", args...)
}

// signoffIn is signoff with stdin.
func signoffIn(t *testing.T, dir, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	full := append(storeArgs(dir), args...)
	var out, errb bytes.Buffer
	code = run(t.Context(), full, noEnv, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// must runs a command and fails the test unless it exits with want. It returns stdout.
func must(t *testing.T, dir string, want int, args ...string) string {
	t.Helper()
	code, out, errs := signoff(t, dir, args...)
	if code != want {
		t.Fatalf("signoff %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errs)
	}
	return out
}

// runIDOf is the run id on the first line of s.
func runIDOf(t *testing.T, s string) string {
	t.Helper()
	line, _, _ := strings.Cut(s, "\n")
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "run_") {
		t.Fatalf("first line %q is not a run id; output:\n%s", line, s)
	}
	return line
}

// childTimeout bounds one child process; a healthy one takes well under a second.
const childTimeout = 2 * time.Minute

// child prepares this program as a separate process against dir, with extra
// environment variables (NAME=value).
func child(t *testing.T, dir string, env []string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	full := append(storeArgs(dir), args...)
	// A child that hangs is stopped with SIGQUIT, which dumps its goroutines:
	// never with SIGKILL, which crash would mistake for the failpoint.
	ctx, cancel := context.WithTimeout(t.Context(), childTimeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, self, full...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return cmd, &out, &errb
}

// crash runs a command in a child process with SIGNOFF_FAILPOINT=failpoint and
// asserts that it died of SIGKILL, as a crashed machine would leave it.
func crash(t *testing.T, dir, failpoint string, args ...string) {
	t.Helper()
	cmd, out, errb := child(t, dir, []string{"SIGNOFF_FAILPOINT=" + failpoint}, args...)
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return
		}
	}
	t.Fatalf("signoff %s with SIGNOFF_FAILPOINT=%s should have died of SIGKILL, got %v\nstdout:\n%s\nstderr:\n%s",
		strings.Join(args, " "), failpoint, err, out, errb)
}

// changes is what the shop did, from `shop changes --json`.
func changes(t *testing.T, dir string) []demo.Change {
	t.Helper()
	out := must(t, dir, 0, "shop", "changes", "--json")
	var ch []demo.Change
	if err := json.Unmarshal([]byte(out), &ch); err != nil {
		t.Fatalf("shop changes --json: %v\n%s", err, out)
	}
	return ch
}

// showRaw is `show RUN --json` as printed.
func showRaw(t *testing.T, dir, id string) string {
	t.Helper()
	code, out, errs := signoff(t, dir, "show", id, "--json")
	if out == "" {
		t.Fatalf("show %s --json printed nothing (exit %d): %s", id, code, errs)
	}
	return out
}

// showJSON is a run from `show RUN --json`.
func showJSON(t *testing.T, dir, id string) workflow.RunView {
	t.Helper()
	out := showRaw(t, dir, id)
	var v workflow.RunView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("show %s --json: %v\n%s", id, err, out)
	}
	return v
}

// runs is `runs --json` with extra arguments.
func runs(t *testing.T, dir string, args ...string) []workflow.RunView {
	t.Helper()
	out := must(t, dir, 0, append([]string{"runs", "--json"}, args...)...)
	var vs []workflow.RunView
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("runs --json: %v\n%s", err, out)
	}
	return vs
}

// auditEvents is the number of audit events `verify` checked; it fails the
// test if verify finds damage.
func auditEvents(t *testing.T, dir string) int {
	t.Helper()
	out := must(t, dir, 0, "verify")
	var r, c, a int
	if _, err := fmt.Sscanf(out, "ok: %d runs, %d checkpoints, %d audit events verified", &r, &c, &a); err != nil {
		t.Fatalf("verify printed %q: %v", out, err)
	}
	return a
}

// proposal writes a proposal file into dir and returns its path.
func proposal(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fixture is the path of an example proposal.
func fixture(name string) string {
	return filepath.Join("..", "..", "fixtures", "proposals", name)
}

// refundJSON is a refund proposal of PAY-507862-2 (the double charge).
func refundJSON(requester, amount, key string) string {
	k := ""
	if key != "" {
		k = fmt.Sprintf(`, "idempotency_key": %q`, key)
	}
	return fmt.Sprintf(`{"task_id": "T-65273", "requester": {"id": %q, "name": "Someone"},
  "summary": "Refund the duplicate charge.",
  "actions": [{"name": "request_refund", "args": {"order_id": "LK-507862", "payment_id": "PAY-507862-2",
    "amount": %s, "currency": "CAD", "reason_code": "RFD-DOUBLE"}}],
  "evidence": [{"source": "ticket", "data": {"id": "T-65273"}}]%s}`, requester, amount, k)
}

// submit submits the double-charge refund fixture; it waits for a team lead.
func submitWaiting(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out := must(t, dir, exitWaiting, append([]string{"submit", fixture("refund-double-charge.json")}, args...)...)
	return runIDOf(t, out)
}

// writeConfig writes the built-in config with the replacements (old, new, …)
// applied and returns its path; each old string must occur.
func writeConfig(t *testing.T, dir, name string, replace ...string) string {
	t.Helper()
	y := string(config.DefaultYAML())
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(y, replace[i]) {
			t.Fatalf("the built-in config has no %q", replace[i])
		}
		y = strings.Replace(y, replace[i], replace[i+1], 1)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// rewriteLatestCheckpoint edits the latest checkpoint of a run behind signoff's
// back, as someone with access to the file could. With rehash the hash chain is
// recomputed, so only the strict decoding can catch the change.
func rewriteLatestCheckpoint(t *testing.T, dir, id string, edit func([]byte) []byte, rehash bool) {
	t.Helper()
	db, err := sqlite.OpenDB(dbPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The latest state as a whole, written back whole (without a base):
	// whoever can write the file can do that too.
	rows, err := db.Query(`SELECT run_id, seq, schema_version, state, prev_hash, created_at, base_seq FROM checkpoints WHERE run_id = ? ORDER BY seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	var cps []*record.Checkpoint
	for rows.Next() {
		var c record.Checkpoint
		var at int64
		if err := rows.Scan(&c.RunID, &c.Seq, &c.SchemaVersion, &c.State, &c.PrevHash, &at, &c.BaseSeq); err != nil {
			t.Fatal(err)
		}
		c.State = sqlstore.StateOf(c.State) // stored compressed (zstd), as anyone can inflate it
		c.CreatedAt = time.UnixMilli(at).UTC()
		cps = append(cps, &c)
	}
	if err := rows.Close(); err != nil || len(cps) == 0 {
		t.Fatalf("read checkpoints of run %s: %d, %v", id, len(cps), err)
	}
	c := cps[len(cps)-1]
	c.State, c.BaseSeq = edit(wholeState(t, cps)), 0
	hash := strings.Repeat("0", 64)
	if rehash {
		hash = record.CheckpointHash(c)
	}
	res, err := db.Exec(`UPDATE checkpoints SET state = ?, hash = ?, base_seq = 0 WHERE run_id = ? AND seq = ?`, c.State, hash, c.RunID, c.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("rewrote %d checkpoints", n)
	}
}

// wholeState is the latest state of cps as a whole, put together as anyone
// who reads the file can: a checkpoint written against a base (base_seq)
// holds only the members that changed, under "$unset" the names of the
// base's members it lacks and under "$append" the elements its lists gained.
func wholeState(t *testing.T, cps []*record.Checkpoint) []byte {
	t.Helper()
	c := cps[len(cps)-1]
	if c.BaseSeq == 0 {
		return c.State
	}
	var st, changes map[string]json.RawMessage
	if err := json.Unmarshal(cps[c.BaseSeq-1].State, &st); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(c.State, &changes); err != nil {
		t.Fatal(err)
	}
	for name, v := range changes {
		switch name {
		case "$unset":
			var names []string
			if err := json.Unmarshal(v, &names); err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				delete(st, n)
			}
		case "$append":
			var grown map[string][]json.RawMessage
			if err := json.Unmarshal(v, &grown); err != nil {
				t.Fatal(err)
			}
			for n, added := range grown {
				var list []json.RawMessage
				if err := json.Unmarshal(st[n], &list); err != nil {
					t.Fatal(err)
				}
				b, err := json.Marshal(append(list, added...))
				if err != nil {
					t.Fatal(err)
				}
				st[n] = b
			}
		default:
			st[name] = v
		}
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// editState is rewriteLatestCheckpoint over the decoded state.
func editState(t *testing.T, dir, id string, edit func(st map[string]any), rehash bool) {
	t.Helper()
	rewriteLatestCheckpoint(t, dir, id, func(b []byte) []byte {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var st map[string]any
		if err := d.Decode(&st); err != nil {
			t.Fatal(err)
		}
		edit(st)
		out, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}, rehash)
}

// modelCalls reads the shop's own usage ledger: how many model calls it was charged for.
func modelCalls(t *testing.T, dir, runID string) int {
	t.Helper()
	db, err := sqlite.OpenDB(shopPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	shop, err := demo.OpenShop(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := shop.ModelCalls(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// oneRefund asserts that the shop made exactly one change: a refund of
// PAY-507862-2 of amount under key, and returns it.
func oneRefund(t *testing.T, dir, key, amount string) demo.Change {
	t.Helper()
	ch := changes(t, dir)
	if len(ch) != 1 {
		t.Fatalf("the shop made %d changes, want exactly one refund: %+v", len(ch), ch)
	}
	c := ch[0]
	if c.Kind != demo.KindRefund || c.OrderID != "LK-507862" || c.PaymentID != "PAY-507862-2" || c.Amount != amount || c.Currency != "CAD" || c.Key != key {
		t.Fatalf("the shop's change is %+v, want a refund of PAY-507862-2 of %s CAD under key %s", c, amount, key)
	}
	return c
}

// noChanges asserts that the shop did nothing.
func noChanges(t *testing.T, dir string) {
	t.Helper()
	if ch := changes(t, dir); len(ch) != 0 {
		t.Fatalf("the shop changed: %+v", ch)
	}
}
