package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/storage/sqlite"
)

// pgSignoff runs one command in process against the PostgreSQL database dsn,
// with dir's shop.
func pgSignoff(t *testing.T, dsn, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	full := append([]string{"--db", dsn, "--shop", shopPath(dir)}, args...)
	var out, errb bytes.Buffer
	code = run(t.Context(), full, noEnv, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func pgMust(t *testing.T, dsn, dir string, want int, args ...string) string {
	t.Helper()
	code, out, errs := pgSignoff(t, dsn, dir, args...)
	if code != want {
		t.Fatalf("signoff %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errs)
	}
	return out
}

// TestPostgresMigrateSubmitApprove is the story of the demo on PostgreSQL: an
// unmigrated database is refused with the way out, `signoff migrate` applies the
// schema (once), and a gated refund waits, is approved and happens once.
func TestPostgresMigrateSubmitApprove(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	dir := t.TempDir()

	code, _, errs := pgSignoff(t, dsn, dir, "runs")
	if code != exitRefused || !strings.Contains(errs, "run `signoff migrate`") || !strings.Contains(errs, "not migrated") {
		t.Fatalf("runs on an unmigrated database: exit %d, stderr %q; want exit 2 saying to run signoff migrate", code, errs)
	}

	out := pgMust(t, dsn, dir, exitDone, "migrate")
	if !strings.Contains(out, "applied 001_init") {
		t.Errorf("migrate printed %q; want the migrations it applied", out)
	}
	if out := pgMust(t, dsn, dir, exitDone, "migrate"); !strings.Contains(out, "up to date") || strings.Contains(out, "applied") {
		t.Errorf("migrate again printed %q; want up to date and nothing applied", out)
	}

	id := runIDOf(t, pgMust(t, dsn, dir, exitWaiting, "submit", fixture("refund-double-charge.json")))
	if ch := pgChanges(t, dsn, dir); len(ch) != 0 {
		t.Fatalf("the shop changed before the approval: %+v", ch)
	}
	pgMust(t, dsn, dir, exitDone, "approve", id, "--as", lead1)

	ch := pgChanges(t, dsn, dir)
	if len(ch) != 1 || ch[0].Kind != demo.KindRefund || ch[0].PaymentID != "PAY-507862-2" || ch[0].Amount != "119.00" || ch[0].Key != id+"/1" {
		t.Fatalf("the shop's changes are %+v, want one refund of PAY-507862-2 of 119.00 under key %s/1", ch, id)
	}
	// Approving again changes nothing, and the stored chains verify.
	if code, _, errs := pgSignoff(t, dsn, dir, "approve", id, "--as", lead2); code != exitRefused || !strings.Contains(errs, "already approved by "+lead1) {
		t.Errorf("approve again: exit %d, %q", code, errs)
	}
	if ch := pgChanges(t, dsn, dir); len(ch) != 1 {
		t.Errorf("the shop made %d changes after a second approval, want 1", len(ch))
	}
	pgMust(t, dsn, dir, exitDone, "verify")
}

func pgChanges(t *testing.T, dsn, dir string) []demo.Change {
	t.Helper()
	out := pgMust(t, dsn, dir, exitDone, "shop", "changes", "--json")
	var ch []demo.Change
	if err := json.Unmarshal([]byte(out), &ch); err != nil {
		t.Fatalf("shop changes --json: %v\n%s", err, out)
	}
	return ch
}

// TestPostgresSchemaFromTheFuture: a database migrated by a newer build is
// refused by every command, migrate included, naming the version.
func TestPostgresSchemaFromTheFuture(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	dir := t.TempDir()
	pgMust(t, dsn, dir, exitDone, "migrate")
	pgtest.Exec(t, dsn, `INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (999, 'from_the_future', 'x', 0)`)
	for _, args := range [][]string{{"runs"}, {"migrate"}} {
		code, _, errs := pgSignoff(t, dsn, dir, args...)
		if code != exitRefused || !strings.Contains(errs, "999") || !strings.Contains(errs, "upgrade signoff") {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming version 999", args[0], code, errs)
		}
	}
}

// TestMigrateSQLiteReports: SQLite migrates when a file is opened, so migrate
// only reports.
func TestMigrateSQLiteReports(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := must(t, dir, exitDone, "migrate")
	ms := sqlite.Migrations()
	last := fmt.Sprintf("schema version %d (%s)", ms[len(ms)-1].Version, ms[len(ms)-1].Name)
	if !strings.Contains(out, "SQLite migrates when opened") || !strings.Contains(out, last) {
		t.Errorf("migrate on SQLite printed %q", out)
	}
	must(t, dir, exitDone, "runs")
}

// TestShopPathDefault: the shop lives beside a store file; a database URL has
// no directory, so then it is shop.db in the working directory.
func TestShopPathDefault(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		filepath.Join("var", "lib", "signoff.db"): filepath.Join("var", "lib", "shop.db"),
		"signoff.db": "shop.db",
		"postgres://signoff:secret@db.internal:5432/signoff?sslmode=require": "shop.db",
		"postgresql://db.internal/signoff":                                   "shop.db",
	}
	for db, want := range cases {
		o := options{db: db}
		o.resolve(noEnv)
		if o.shop != want {
			t.Errorf("--db %s: shop %q, want %q", db, o.shop, want)
		}
	}
}

func TestRedactDB(t *testing.T) {
	t.Parallel()
	got := redactDB("postgres://signoff:secret@db.internal:5432/signoff")
	if strings.Contains(got, "secret") || !strings.Contains(got, "db.internal") {
		t.Errorf("redactDB gave %q", got)
	}
	if got := redactDB("/var/lib/signoff.db"); got != "/var/lib/signoff.db" {
		t.Errorf("redactDB of a path gave %q", got)
	}
}
