package app

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/signoff-dev/signoff/keyring"
	"github.com/signoff-dev/signoff/storage/postgres"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// docDSN is the database the operations docs name; docDSNs maps its
// database name to the one a test uses instead.
var docDSN = regexp.MustCompile(`postgres://signoff@db:5432/(\w+)\?sslmode=require`)

// withDSNs is s with each database URL of the docs replaced by dsns' for its
// database name; a name dsns lacks fails the test.
func withDSNs(t *testing.T, s string, dsns map[string]string) string {
	t.Helper()
	return docDSN.ReplaceAllStringFunc(s, func(m string) string {
		dsn, ok := dsns[docDSN.FindStringSubmatch(m)[1]]
		if !ok {
			t.Fatalf("no database for %s", m)
		}
		return dsn
	})
}

// exampleFolder is a folder with the practice shop's config as its
// signoff.yaml, which serve takes (it refuses the built-in one).
func exampleFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(repoRoot, "fixtures", "signoff.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "signoff.yaml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// aRefund submits a refund of the double charge's amount (over 50: a team
// lead approves it, as people would) under the idempotency key key, with
// words before the command (--db …) and env.
func aRefund(t *testing.T, dir string, env []string, key, amount string, global ...string) string {
	t.Helper()
	run := func(want int, stdin string, args ...string) string {
		t.Helper()
		code, out, errs := docRun(t, dir, env, stdin, append(append([]string{}, global...), args...)...)
		if code != want {
			t.Fatalf("signoff %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errs)
		}
		return out
	}
	id := runIDOf(t, run(exitWaiting, refundJSON(agentID, amount, key), "submit", "-"))
	run(exitDone, "", "approve", id, "--as", lead1)
	return id
}

// runsIn are the ids of the runs of dir's store, as `runs --json` lists them.
func runsIn(t *testing.T, dir string, env []string, global ...string) []string {
	t.Helper()
	code, out, errs := docRun(t, dir, env, "", append(global, "runs", "--json")...)
	var vs []workflow.RunView
	if err := json.Unmarshal([]byte(out), &vs); code != 0 || err != nil {
		t.Fatalf("runs --json: exit %d, %v\n%s%s", code, err, out, errs)
	}
	var ids []string
	for _, v := range vs {
		ids = append(ids, v.ID)
	}
	return ids
}

// TestTheAuditExportOfTheDocs: the export of "Logs" runs as written, and
// each line is one object with the fields the docs list (those they say
// belong to a transition on some lines only).
func TestTheAuditExportOfTheDocs(t *testing.T) {
	t.Parallel()
	sec := docSection(t, "docs/operations.md", "Logs")
	shs := blocksOf(sec, "sh")
	if len(shs) != 1 || len(shLines(shs[0])) != 1 {
		t.Fatalf("want one command, got %q", shs)
	}
	cmd, file, ok := strings.Cut(shLines(shs[0])[0].cmd, " > ")
	words := shellWords(t, cmd)
	if !ok || words[0] != "signoff" {
		t.Fatalf("not a signoff command into a file: %q", shLines(shs[0])[0].cmd)
	}
	dir := t.TempDir()
	auditHistory(t, dir)
	code, out, errs := docRun(t, dir, nil, "", words[1:]...)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", cmd, code, errs)
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}

	_, fields, ok := strings.Cut(sec, "One object a line: ")
	fields, _, _ = strings.Cut(fields, "Whoever ingests it")
	if !ok {
		t.Fatal("Logs does not say what each line holds")
	}
	named := regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(fields, -1)
	some := map[string]bool{"checkpoint_seq": true, "checkpoint_hash": true}
	seen := map[string]bool{}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 {
		t.Fatalf("the export has %d lines", len(lines))
	}
	for _, line := range lines {
		var ev map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not one object: %q: %v", line, err)
		}
		for k := range ev {
			seen[k] = true
		}
		for _, m := range named {
			if _, ok := ev[m[1]]; !ok && !some[m[1]] {
				t.Errorf("a line lacks %s: %s", m[1], line)
			}
		}
	}
	var want []string
	for _, m := range named {
		want = append(want, m[1])
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("the lines hold %v, the docs list %v", got, want)
	}
}

// TestThePostgresCommandsOfTheDocs: the two commands of "PostgreSQL and
// several replicas", on a database of their own: migrate applies the schema,
// and serve starts on it, ready.
func TestThePostgresCommandsOfTheDocs(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t) // skips without SIGNOFF_TEST_POSTGRES
	shs := blocksOf(docSection(t, "docs/operations.md", "PostgreSQL and several replicas"), "sh")
	if len(shs) != 1 {
		t.Fatalf("want one block, got %d", len(shs))
	}
	dir := exampleFolder(t)
	key, err := keyring.NewLine("k1")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"SIGNOFF_KEYS=" + key}
	lines := shLines(withDSNs(t, shs[0], map[string]string{"signoff": dsn}))
	if len(lines) != 2 {
		t.Fatalf("want migrate and serve, got %+v", lines)
	}
	words := shellWords(t, lines[0].cmd)
	code, out, errs := docRun(t, dir, env, "", words[1:]...)
	if ms := postgres.Migrations(); code != 0 || !strings.Contains(out, "applied 001_init") ||
		!strings.Contains(out, fmt.Sprintf("schema version %d (%s)", ms[len(ms)-1].Version, ms[len(ms)-1].Name)) {
		t.Fatalf("%s: exit %d\n%s%s", lines[0].cmd, code, out, errs)
	}
	words = shellWords(t, lines[1].cmd)
	if words[len(words)-1] != "serve" {
		t.Fatalf("not serve: %q", lines[1].cmd)
	}
	srv := startBackground(t, dir, env, append(words[1:], "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")...)
	admin := srv.adminAddr(t)
	srv.await(t, "the start line", regexp.MustCompile(`msg="signoff serving".* store=postgres`))
	resp, err := http.Get("http://" + admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz: %d %s", resp.StatusCode, body)
	}
	id := aRefund(t, dir, env, "pg", "60.00", "--db", dsn)
	if ids := runsIn(t, dir, env, "--db", dsn); !slices.Equal(ids, []string{id}) {
		t.Fatalf("runs %v, want %s", ids, id)
	}
}

// TestTheBackupsOfTheDocs: each backup of "Backups" runs as written: the
// SQLite copy while serve runs, and the restore of it once serve stopped,
// which has the runs of before the backup and not the one after; and the PostgreSQL dump
// restored into an empty database, which verifies with the same keys.
func TestTheBackupsOfTheDocs(t *testing.T) {
	t.Parallel()
	shs := blocksOf(docSection(t, "docs/operations.md", "Backups"), "sh")
	if len(shs) != 3 {
		t.Fatalf("want the SQLite backup, its restore and the PostgreSQL one; got %d blocks", len(shs))
	}
	// sh runs each line as a reader's shell would, and checks its exit code;
	// signoff is this program.
	sh := func(t *testing.T, dir string, env []string, l shLine) string {
		t.Helper()
		words := shellWords(t, l.cmd)
		var code int
		var out, errs string
		if words[0] == "signoff" {
			code, out, errs = docRun(t, dir, env, "", words[1:]...)
		} else {
			if _, err := exec.LookPath(words[0]); err != nil {
				t.Skipf("%s is not installed", words[0])
			}
			c := exec.CommandContext(t.Context(), words[0], words[1:]...)
			c.Dir, c.Env = dir, append(os.Environ(), env...)
			b, err := c.CombinedOutput()
			out = string(b)
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if code != l.exit {
			t.Fatalf("%s: exit %d, want %d\n%s%s", l.cmd, code, l.exit, out, errs)
		}
		// The copy's seals are checked: its keys came with it.
		if words[0] == "signoff" && slices.Contains(words, "verify") && (!strings.Contains(out, "seals: ") || strings.Contains(out, "not checked")) {
			t.Fatalf("%s checked no seal:\n%s", l.cmd, out)
		}
		return out
	}

	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dir := exampleFolder(t)
		before := aRefund(t, dir, nil, "before", "60.00")
		srv := startBackground(t, dir, nil, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
		srv.addr(t)
		for _, l := range shLines(shs[0]) {
			sh(t, dir, nil, l)
		}
		after := aRefund(t, dir, nil, "after", "59.00")
		if ids := runsIn(t, dir, nil, "--db", "backup/signoff.db"); !slices.Contains(ids, before) || slices.Contains(ids, after) {
			t.Fatalf("the backup holds %v; want %s and not %s", ids, before, after)
		}
		_ = srv.cmd.Process.Signal(syscall.SIGTERM)
		<-srv.exited
		for _, l := range shLines(shs[1]) {
			sh(t, dir, nil, l)
		}
		if ids := runsIn(t, dir, nil); !slices.Contains(ids, before) || slices.Contains(ids, after) {
			t.Fatalf("the restored store holds %v; want %s and not %s", ids, before, after)
		}
	})

	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		base := pgtest.DSN(t) // skips without SIGNOFF_TEST_POSTGRES
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		var b [6]byte
		rand.Read(b[:])
		dsns := map[string]string{}
		for _, name := range []string{"signoff", "signoff_restored"} {
			db := name + "_docs_" + hex.EncodeToString(b[:])
			pgtest.Exec(t, base, `CREATE DATABASE `+db)
			t.Cleanup(func() { pgtest.Exec(t, base, `DROP DATABASE `+db+` WITH (FORCE)`) })
			v := *u
			v.Path = "/" + db
			dsns[name] = v.String()
		}
		dir := t.TempDir()
		key, err := keyring.NewLine("k1")
		if err != nil {
			t.Fatal(err)
		}
		env := []string{"SIGNOFF_KEYS=" + key}
		if code, out, errs := docRun(t, dir, env, "", "--db", dsns["signoff"], "migrate"); code != 0 {
			t.Fatalf("migrate: exit %d\n%s%s", code, out, errs)
		}
		id := aRefund(t, dir, env, "pg", "60.00", "--db", dsns["signoff"])
		for _, l := range shLines(withDSNs(t, shs[2], dsns)) {
			sh(t, dir, env, l)
		}
		if ids := runsIn(t, dir, env, "--db", dsns["signoff_restored"]); !slices.Equal(ids, []string{id}) {
			t.Fatalf("the restored database holds %v, want %s", ids, id)
		}
	})
}

// TestTheUpgradesOfTheDocs: "Upgrades" runs as written on a SQLite file an
// older build wrote (fixtures/legacy) and on a new PostgreSQL database; and a
// serve whose store a newer build migrated answers /readyz with 503, as it
// says.
func TestTheUpgradesOfTheDocs(t *testing.T) {
	t.Parallel()
	shs := blocksOf(docSection(t, "docs/operations.md", "Upgrades"), "sh")
	if len(shs) != 2 {
		t.Fatalf("want a SQLite and a PostgreSQL block, got %d", len(shs))
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dir := legacyStore(t)
		for _, l := range shLines(shs[0]) {
			words := shellWords(t, l.cmd)
			code, out, errs := docRun(t, dir, nil, "", words[1:]...)
			if code != l.exit {
				t.Fatalf("%s: exit %d, want %d\n%s%s", l.cmd, code, l.exit, out, errs)
			}
			switch words[1] {
			case "runs":
				if !strings.Contains(errs, "run `signoff migrate`") {
					t.Errorf("%s does not say to migrate: %s", l.cmd, errs)
				}
			case "migrate":
				ms := sqlite.Migrations()
				if !strings.Contains(out, fmt.Sprintf("schema version %d (%s)", ms[len(ms)-1].Version, ms[len(ms)-1].Name)) {
					t.Errorf("%s does not say the schema version: %s", l.cmd, out)
				}
			}
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.Schema(t) // skips without SIGNOFF_TEST_POSTGRES
		lines := shLines(withDSNs(t, shs[1], map[string]string{"signoff": dsn}))
		if len(lines) != 1 {
			t.Fatalf("want one command, got %+v", lines)
		}
		code, out, errs := docRun(t, t.TempDir(), nil, "", shellWords(t, lines[0].cmd)[1:]...)
		if code != 0 || !strings.Contains(out, "applied 001_init") || !strings.Contains(out, "schema version") {
			t.Fatalf("%s: exit %d\n%s%s", lines[0].cmd, code, out, errs)
		}
	})
	t.Run("a serve of the older build", func(t *testing.T) {
		t.Parallel()
		dir := exampleFolder(t)
		addr := startBackground(t, dir, nil, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0").adminAddr(t)
		ready := func() (int, string) {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if code, body := ready(); code != http.StatusOK {
			t.Fatalf("/readyz: %d %s", code, body)
		}
		db, err := sqlite.OpenDB(filepath.Join(dir, "signoff.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (999, 'from_a_newer_build', 'x', 0)`); err != nil {
			t.Fatal(err)
		}
		if code, body := ready(); code != http.StatusServiceUnavailable || !strings.Contains(body, "schema not current") {
			t.Fatalf("/readyz after a newer build migrated: %d %s", code, body)
		}
	})
}
