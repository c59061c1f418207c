package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/internal/app/bench"
	"github.com/signoff-dev/signoff/internal/benchkit"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
)

// benchFigures reads what bench --json printed and checks that every figure
// measured something, the figures named in more too. It returns the report
// and every figure by name/clients.
func benchFigures(t *testing.T, out string, more []string) (*bench.Report, map[string]benchkit.Figure) {
	t.Helper()
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	seen := map[string]benchkit.Figure{}
	for _, f := range rep.Figures {
		seen[fmt.Sprintf("%s/%d", f.Name, f.Clients)] = f
	}
	want := append([]string{"raw_commit/1", "click/1", "click/64", "click_bare/1", "click_bare/64", "api_submit/1", "api_submit/64"}, more...)
	for _, c := range []int{1, 8, 64} {
		for _, name := range []string{"suspend", "decide", "e2e"} {
			want = append(want, fmt.Sprintf("%s/%d", name, c))
		}
	}
	for _, k := range want {
		f, ok := seen[k]
		switch {
		case !ok:
			t.Errorf("no figure %s", k)
		case f.Ops == 0 || f.PerSec <= 0:
			t.Errorf("figure %s measured nothing: %+v", k, f)
		case strings.HasPrefix(k, "e2e/") && f.CommitsPerOp != 4:
			// submit, decide, intent with its first attempt, receipt with the run's end
			t.Errorf("figure %s: %.2f commits per run, want 4", k, f.CommitsPerOp)
		case strings.HasPrefix(k, "e2e/") && f.BytesPerOp <= 0:
			t.Errorf("figure %s: the store did not grow: %+v", k, f)
		case (strings.HasPrefix(k, "click") || strings.HasPrefix(k, "api_submit")) && f.P99 < f.P50:
			t.Errorf("figure %s: p99 %.2f below p50 %.2f", k, f.P99, f.P50)
		}
	}
	return &rep, seen
}

// benchLines are the bench commands of the docs, as typed.
func benchLines(t *testing.T) [][]string {
	t.Helper()
	var lines [][]string
	for _, block := range blocksOf(docSection(t, "docs/performance.md", "signoff bench"), "sh") {
		for _, l := range shLines(block) {
			lines = append(lines, shellWords(t, l.cmd))
		}
	}
	if len(lines) != 3 || !slices.Equal(lines[0], []string{"signoff", "bench"}) || !slices.Equal(lines[1], []string{"signoff", "bench", "--json"}) ||
		len(lines[2]) != 4 || lines[2][2] != "--db" {
		t.Fatalf("want bench, bench --json and bench --db on PostgreSQL; the docs show %q", lines)
	}
	return lines
}

// TestBench runs every figure briefly: the docs' bench and bench --json (each
// on a new SQLite file in a temporary folder, which is gone after), and
// bench on a new file named by --db, which is gone after too; each figure
// measured something. The rates themselves are the benchmark's business,
// not a test's.
func TestBench(t *testing.T) {
	lines := benchLines(t)
	code, out, errs := docRun(t, t.TempDir(), nil, "", append(lines[1][1:], "--duration", "30ms")...)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", strings.Join(lines[1], " "), code, errs)
	}
	rep, seen := benchFigures(t, out, nil)
	if rep.DB != "sqlite" || !strings.HasPrefix(rep.Where, os.TempDir()) {
		t.Errorf("db %q in %q, want sqlite in a temporary folder", rep.DB, rep.Where)
	}
	if _, err := os.Stat(rep.Where); !os.IsNotExist(err) {
		t.Errorf("the bench store %s is left behind: %v", rep.Where, err)
	}
	// One writer takes SQLite's commits in turn: raw commits from several
	// clients at once would measure the same thing again.
	if f, ok := seen["raw_commit/8"]; ok {
		t.Errorf("raw commits at 8 clients on SQLite: %+v", f)
	}
	if rep.GOGC != "400" {
		t.Errorf("GOGC %q, want the server's 400", rep.GOGC)
	}
	// SQLite counts the rows each figure wrote: every whole run writes the
	// same records.
	for _, f := range rep.Figures {
		if f.Name == "e2e" && (f.RowsPerOp < 4 || f.RowsPerOp > 40) {
			t.Errorf("e2e with %d clients: %.2f rows per run", f.Clients, f.RowsPerOp)
		}
		// Every figure did work, so it cost CPU time, which Linux reports.
		if f.Ops > 0 && f.CPUPerOp <= 0 {
			t.Errorf("%s with %d clients: %.3f ms of CPU per operation", f.Name, f.Clients, f.CPUPerOp)
		}
	}
	// The summary reads the same run's figures: a whole run's CPU beside
	// four raw commits at one client (the most SQLite runs them at).
	checkSummary(t, rep, seen, "raw_commit/1")
	for _, f := range rep.Figures {
		if f.ServerCPUPerOp != 0 {
			t.Errorf("%s with %d clients: %.3f ms of a server's CPU per operation on SQLite, which has no server", f.Name, f.Clients, f.ServerCPUPerOp)
		}
		if f.RoundTripsPerOp != 0 {
			t.Errorf("%s with %d clients: %.1f round trips per operation on SQLite, which has no server", f.Name, f.Clients, f.RoundTripsPerOp)
		}
	}
	if s := rep.Summary; s != nil && s.RowsPerRun != seen["e2e/64"].RowsPerOp {
		t.Errorf("summary: %.2f rows per run, e2e at 64 wrote %.2f", s.RowsPerRun, seen["e2e/64"].RowsPerOp)
	}
	dir := t.TempDir()
	must(t, dir, 0, "bench", "--duration", "10ms")
	if _, err := os.Stat(dbPath(dir)); !os.IsNotExist(err) {
		t.Errorf("the bench store named by --db is left behind: %v", err)
	}
	// The table for people.
	code, table, errs := docRun(t, t.TempDir(), nil, "", append(lines[0][1:], "--duration", "10ms")...)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", strings.Join(lines[0], " "), code, errs)
	}
	for _, s := range []string{"raw_commit", "e2e", "durable decision", "bare handler", "POST /v1/runs", "fsyncs/op", "rows/op", "cpu ms/op",
		"e2e at 8 clients:", "e2e at 64 clients:", "one client", "click p99 at 64 at once:", "the bare handler's",
		"round trips/op", "the floor of 4 raw commits", "4 x raw_commit/1; target 3x", "bytes per run (target 6144)", "rows (target 12)",
		"click at 64 at once:"} {
		if !strings.Contains(table, s) {
			t.Errorf("bench table lacks %q:\n%s", s, table)
		}
	}
}

func TestBenchRefusesAnExistingFileAndRemoteServers(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dbPath(dir), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := signoff(t, dir, "bench", "--duration", "10ms"); code == 0 || !strings.Contains(errs, "exists") {
		t.Errorf("bench on an existing file: exit %d, %s", code, errs)
	}
	if b, _ := os.ReadFile(dbPath(dir)); string(b) != "mine" {
		t.Error("bench changed an existing file")
	}
	// Remote servers: internal/app/bench's TestLoopbackOnly.
}

// TestBenchPostgres: the docs' bench on a PostgreSQL server works in a
// schema of its own and drops it after.
func TestBenchPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	// The docs' bench on PostgreSQL, on this test's server.
	line := benchLines(t)[2]
	code, out, errs := docRun(t, t.TempDir(), nil, "", line[1], "--db", dsn, "--json", "--duration", "30ms")
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", strings.Join(line, " "), code, errs)
	}
	// Raw commits at 8 clients, each on a connection of its own: the most
	// this server and machine give the store's scaling from 1 to 8.
	rep, seen := benchFigures(t, out, []string{"raw_commit/8"})
	if _, ok := seen["raw_commit/64"]; ok {
		t.Error("raw commits at 64 clients: more connections than the raw pool holds")
	}
	checkSummary(t, rep, seen, "raw_commit/8")
	// Every figure on the store's pool went to the server.
	for _, f := range rep.Figures {
		if f.Name != "raw_commit" && f.Name != "click_bare" && f.RoundTripsPerOp <= 0 {
			t.Errorf("%s with %d clients: %.2f round trips per operation", f.Name, f.Clients, f.RoundTripsPerOp)
		}
	}
	if s := rep.Summary; s != nil && (s.RoundTripsPerRun != seen["e2e/64"].RoundTripsPerOp || s.RoundTripsPerRun < 4) {
		t.Errorf("summary: %.2f round trips per run, e2e at 64 made %.2f (four commits at least)", s.RoundTripsPerRun, seen["e2e/64"].RoundTripsPerOp)
	}
	checkServerCPU(t, dsn, rep, seen)
	var table bytes.Buffer
	bench.Print(&table, rep)
	if want := rep.Summary != nil && rep.Summary.CPURatioWithServer > 0; strings.Contains(table.String(), "with the server's CPU:") != want {
		t.Errorf("the table says the ratio with the server's CPU: %v, want %v:\n%s", !want, want, table.String())
	}
	if !regexp.MustCompile(`bytes per run \(target 6144\), rows not counted on this database, [0-9.]+ round trips`).MatchString(table.String()) {
		t.Errorf("the summary does not give a run's round trips:\n%s", table.String())
	}
	if !strings.Contains(table.String(), "e2e at 8 clients:") || !regexp.MustCompile(`e2e at 8 clients: [^\n]*one client \(raw commits: [0-9.]+x\)`).MatchString(table.String()) {
		t.Errorf("the table does not put the raw commits' gain beside the engine's at 8 clients:\n%s", table.String())
	}
	schema, _, ok := strings.Cut(strings.TrimPrefix(rep.Where, "schema "), ",")
	if rep.DB != "postgres" || !ok || !strings.HasPrefix(schema, "signoff_bench_") {
		t.Fatalf("db %q where %q, want postgres in a schema of its own", rep.DB, rep.Where)
	}
	conn := pgtest.Conn(t, dsn)
	var left int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("schema %s left behind", schema)
	}
}

// checkServerCPU: where the server at dsn runs on this machine, every
// figure the store made (raw commits included) says what it cost the
// server's processes, and the summary counts it on both sides of its ratio;
// elsewhere no figure does.
func checkServerCPU(t *testing.T, dsn string, rep *bench.Report, seen map[string]benchkit.Figure) {
	t.Helper()
	var pid int32
	if err := pgtest.Conn(t, dsn).QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	_, local := benchkit.ServerCPU(int(pid))
	for _, f := range rep.Figures {
		if f.Name == "click_bare" {
			continue // its store keeps nothing
		}
		if got := f.ServerCPUPerOp > 0; got != local {
			t.Errorf("%s with %d clients: %.3f ms of the server's CPU per operation; the server runs here: %v", f.Name, f.Clients, f.ServerCPUPerOp, local)
		}
	}
	s := rep.Summary
	if !local {
		if s.CPURatioWithServer != 0 {
			t.Errorf("summary %+v: a ratio with the CPU of a server not found here", s)
		}
		return
	}
	e2e, raw := seen["e2e/64"], seen["raw_commit/8"]
	if want := (e2e.CPUPerOp + e2e.ServerCPUPerOp) / (4 * (raw.CPUPerOp + raw.ServerCPUPerOp)); math.Abs(s.CPURatioWithServer-want) > 1e-9 {
		t.Errorf("summary: %.3f with the server's CPU, want e2e/64's over 4 x raw_commit/8's, both with the server's: %.3f", s.CPURatioWithServer, want)
	}
}

// checkSummary: the summary of rep is made of rep's own figures, the floor
// of raw figure floor.
func checkSummary(t *testing.T, rep *bench.Report, seen map[string]benchkit.Figure, floor string) {
	t.Helper()
	s := rep.Summary
	if s == nil {
		t.Fatal("no summary")
	}
	e2e, raw, click, bare := seen["e2e/64"], seen[floor], seen["click/64"], seen["click_bare/64"]
	if s.FloorFrom != floor || s.FloorCPU != 4*raw.CPUPerOp || s.E2ECPU != e2e.CPUPerOp || s.CPURatio != e2e.CPUPerOp/(4*raw.CPUPerOp) {
		t.Errorf("summary %+v, want e2e/64's CPU %.3f over 4 x %s's %.3f", s, e2e.CPUPerOp, floor, raw.CPUPerOp)
	}
	if s.CPURatioTarget != 3 || s.BytesPerRunTarget != 6144 || s.RowsPerRunTarget != 12 || s.BytesPerRun != e2e.BytesPerOp {
		t.Errorf("summary %+v: targets 3x, 6144 bytes and 12 rows beside e2e/64's %.0f bytes", s, e2e.BytesPerOp)
	}
	// A durable click is a decision at least: one commit, maybe more.
	if s.ClickCommits != click.CommitsPerOp || s.ClickCommits < 1 || s.ClickCPU != click.CPUPerOp || s.ClickP99 != click.P99 || s.ClickBareP99 != bare.P99 {
		t.Errorf("summary %+v, want click/64's commits %.2f, CPU and p99 beside click_bare/64's", s, click.CommitsPerOp)
	}
	for _, k := range []string{"click/1", "click/64", "api_submit/1", "api_submit/64"} {
		if f := seen[k]; f.CommitsPerOp < 1 {
			t.Errorf("%s: %.2f commits per operation", k, f.CommitsPerOp)
		}
	}
}

// scaleLines are the scale commands of the docs, as typed.
func scaleLines(t *testing.T) [][]string {
	t.Helper()
	var lines [][]string
	for _, block := range blocksOf(docSection(t, "docs/performance.md", "signoff bench --scale"), "sh") {
		for _, l := range shLines(block) {
			lines = append(lines, shellWords(t, l.cmd))
		}
	}
	if len(lines) != 2 || !slices.Equal(lines[0], []string{"signoff", "bench", "--scale"}) || len(lines[1]) != 5 || lines[1][3] != "--db" {
		t.Fatalf("want bench --scale and bench --scale --db on PostgreSQL; the docs show %q", lines)
	}
	return lines
}

// TestBenchScale runs the docs' bench --scale with few runs, on SQLite and,
// with SIGNOFF_TEST_POSTGRES, on PostgreSQL: every list read what the store
// holds, every ended run was pruned, and on SQLite, which gives the space
// back, a pruned run takes less than it did.
func TestBenchScale(t *testing.T) {
	lines := scaleLines(t)
	const ended = 60
	for _, line := range lines {
		words := append([]string{}, line[1:]...)
		if len(words) > 2 {
			if os.Getenv("SIGNOFF_TEST_POSTGRES") == "" {
				continue // TestBenchScale on SQLite alone
			}
			words[3] = pgtest.DSN(t)
		}
		code, out, errs := docRun(t, t.TempDir(), nil, "", append(words, "--scale-runs", fmt.Sprint(ended), "--json")...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", strings.Join(line, " "), code, errs)
		}
		var rep bench.ScaleReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("bench --scale --json: %v\n%s", err, out)
		}
		if rep.Ended != ended || rep.Waiting != ended/10 || rep.LoadSeconds <= 0 || rep.GOGC != "400" {
			t.Errorf("%s: loaded %d ended and %d waiting in %.2f s, want %d and %d", rep.DB, rep.Ended, rep.Waiting, rep.LoadSeconds, ended, ended/10)
		}
		want := map[string]int{"pending": ended / 10, "cli": ended / 10, "api": 51}
		for _, l := range rep.Lists {
			if l.Runs != want[l.Name] || l.Reads == 0 || l.P50 <= 0 || l.P99 < l.P50 || l.StoreP50 <= 0 || l.StoreP99 < l.StoreP50 {
				t.Errorf("%s: list %+v, want %d runs and p99 >= p50 > 0, in the engine and in the store", rep.DB, l, want[l.Name])
			}
			delete(want, l.Name)
		}
		if len(want) > 0 {
			t.Errorf("%s: no list %v", rep.DB, want)
		}
		if rep.Prune.Runs != ended/10 || rep.PruneRest.Runs != ended-ended/10 || rep.Prune.Per100k <= 0 {
			t.Errorf("%s: pruned %+v then %+v, want %d then %d", rep.DB, rep.Prune, rep.PruneRest, ended/10, ended-ended/10)
		}
		if rep.BytesEnded <= 0 || rep.BytesLoaded < rep.BytesEnded || rep.BytesPerEndedRun <= 0 || rep.BytesPerPrunedRun <= 0 {
			t.Errorf("%s: sizes %+v", rep.DB, rep)
		}
		if settledWant := map[string]bool{"sqlite": false, "postgres": true}[rep.DB]; (rep.Settled != "") != settledWant {
			t.Errorf("%s: settled %q before the lists; want the server's vacuum on PostgreSQL alone", rep.DB, rep.Settled)
		}
		if rep.DB == "sqlite" && rep.BytesPerPrunedRun >= rep.BytesPerEndedRun {
			t.Errorf("sqlite: %.0f bytes per ended run after prune, %.0f before", rep.BytesPerPrunedRun, rep.BytesPerEndedRun)
		}
	}
	// The table for people.
	if code, table, errs := docRun(t, t.TempDir(), nil, "", "bench", "--scale", "--scale-runs", "10"); code != 0 ||
		!strings.Contains(table, "per ended run:") || !strings.Contains(table, "ListViews(status waiting_approval, limit 11)") {
		t.Errorf("bench --scale: exit %d\n%s%s", code, table, errs)
	}
	if bench.CLIPage != defaultRunsPage {
		t.Errorf("bench --scale reads a page of %d runs as signoff runs would, which lists %d", bench.CLIPage, defaultRunsPage)
	}
	if code, _, errs := docRun(t, t.TempDir(), nil, "", "bench", "--scale", "--scale-runs", "9"); code == 0 || !strings.Contains(errs, "at least 10") {
		t.Errorf("bench --scale --scale-runs 9: exit %d, %s", code, errs)
	}
	if code, _, errs := docRun(t, t.TempDir(), nil, "", "bench", "--scale-runs", "100"); code == 0 || !strings.Contains(errs, "is for --scale") {
		t.Errorf("bench --scale-runs without --scale: exit %d, %s", code, errs)
	}
}
