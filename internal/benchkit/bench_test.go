package benchkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// BenchmarkEndToEnd is whole runs (submit, wait, approve, execute, done) from
// 1, 8 and 64 concurrent clients on a SQLite file, with the durable flushes
// each run cost: the e2e rows of `signoff bench`, as a Go benchmark to profile.
//
//	go test ./internal/benchkit -run '^$' -bench EndToEnd -benchtime 2s -cpuprofile cpu.out
func BenchmarkEndToEnd(b *testing.B) {
	for _, clients := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			t, err := OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "signoff.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer t.Close()
			eng, err := NewEngine(t.Store)
			if err != nil {
				b.Fatal(err)
			}
			syncs0, _ := t.Syncs(b.Context())
			benchWholeRuns(b, eng, clients)
			syncs1, _ := t.Syncs(b.Context())
			b.ReportMetric(float64(syncs1-syncs0)/float64(b.N), "fsyncs/run")
		})
	}
}

// BenchmarkEndToEndPostgres is BenchmarkEndToEnd at 64 clients on a schema
// of its own on the server SIGNOFF_TEST_POSTGRES names (it skips without),
// with the round trips each run made and the CPU time it cost the server's
// processes (where the server runs on this machine): the e2e/64 row of
// `signoff bench --db postgres://…`, as a Go benchmark to profile.
//
//	go test ./internal/benchkit -run '^$' -bench EndToEndPostgres -benchtime 2000x -cpuprofile cpu.out
func BenchmarkEndToEndPostgres(b *testing.B) {
	t, eng := postgresEngine(b)
	trips0 := t.RoundTrips()
	server := t.serverCPUMeter()
	benchWholeRuns(b, eng, 64)
	b.ReportMetric(float64(t.RoundTrips()-trips0)/float64(b.N), "round-trips/run")
	if ms, err := server(int64(b.N)); err != nil {
		b.Fatal(err)
	} else if ms > 0 {
		b.ReportMetric(ms, "server-cpu-ms/run")
	}
}

// benchWholeRuns times b.N whole runs on eng from clients at once and
// reports their rate; the timer is stopped when it returns.
func benchWholeRuns(b *testing.B, eng *workflow.Engine, clients int) {
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	_, took, err := Drive(b.Context(), clients, 0, func(ctx context.Context) (bool, error) {
		if left.Add(-1) < 0 {
			return false, nil
		}
		return true, EndToEnd(ctx, eng)
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/took.Seconds(), "runs/s")
}

// TestAListPageIsOneRoundTripOnPostgres: a page of runs with their latest
// states (Slack's /runs pending, GET /v1/runs, the console's inbox) is one
// round trip to PostgreSQL, its snapshot begun and ended in it.
func TestAListPageIsOneRoundTripOnPostgres(t *testing.T) {
	tg, eng := postgresEngine(t)
	for range 3 {
		if _, err := Suspend(t.Context(), eng); err != nil {
			t.Fatal(err)
		}
	}
	f := storage.RunFilter{Statuses: []record.Status{record.StatusWaitingApproval}, Limit: 11}
	if _, err := eng.ListViews(t.Context(), f); err != nil { // statements prepared
		t.Fatal(err)
	}
	before := tg.RoundTrips()
	vs, err := eng.ListViews(t.Context(), f)
	if err != nil || len(vs) != 3 {
		t.Fatalf("ListViews: %d runs, %v; want the 3 waiting", len(vs), err)
	}
	if trips := tg.RoundTrips() - before; trips != 1 {
		t.Errorf("a page of runs took %d round trips, want 1", trips)
	}
}

// postgresEngine is the benchmark's engine on a schema of its own on the
// server SIGNOFF_TEST_POSTGRES names, dropped when tb ends; tb skips
// without it.
func postgresEngine(tb testing.TB) (*Target, *workflow.Engine) {
	dsn := os.Getenv("SIGNOFF_TEST_POSTGRES")
	if dsn == "" {
		tb.Skip("SIGNOFF_TEST_POSTGRES is not set")
	}
	t, err := OpenPostgres(tb.Context(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { t.Close() })
	eng, err := NewEngine(t.Store)
	if err != nil {
		tb.Fatal(err)
	}
	return t, eng
}

// sqliteEngine is the benchmark's engine on a new SQLite file, closed and
// removed when t ends.
func sqliteEngine(t *testing.T) (*Target, *workflow.Engine) {
	tg, err := OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "signoff.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close() })
	eng, err := NewEngine(tg.Store)
	if err != nil {
		t.Fatal(err)
	}
	return tg, eng
}

// maxRoundTripsPerRun bounds the round trips of one whole run on PostgreSQL:
// what it takes today (a submission's first events, and a receipt's after
// the head its intent left, take seqs the store pooled ahead, see the
// driver's seqPool), so that a change that adds one is seen.
const maxRoundTripsPerRun = 6

// TestRoundTripsPerRunOnPostgres counts the round trips one whole run (submit,
// wait, approve, execute, done) makes to PostgreSQL, alone on its store: what
// a replica's run costs in latency beside its commits. It skips without
// SIGNOFF_TEST_POSTGRES.
func TestRoundTripsPerRunOnPostgres(t *testing.T) {
	tg, eng := postgresEngine(t)
	if err := EndToEnd(t.Context(), eng); err != nil { // statements prepared, keys read
		t.Fatal(err)
	}
	const runs = 10
	before := tg.RoundTrips()
	for range runs {
		if err := EndToEnd(t.Context(), eng); err != nil {
			t.Fatal(err)
		}
	}
	per := float64(tg.RoundTrips()-before) / runs
	t.Logf("%.1f round trips per run", per)
	if per > maxRoundTripsPerRun {
		t.Errorf("%.1f round trips per run, want at most %d", per, maxRoundTripsPerRun)
	}
	// Fewer round trips, the same log: every run's audit chain holds.
	if rep, err := eng.Verify(t.Context()); err != nil || !rep.OK() {
		t.Errorf("verify after the runs: %+v, %v", rep, err)
	}
}

// TestRowsPerRunByTable counts, on SQLite, the rows one whole run adds to
// each table (their counts before and after, read on a connection of their
// own) beside every row it wrote (total_changes of the store's writer): a
// run adds one run row, and what it updates or deletes is the rest. -v
// prints the breakdown.
func TestRowsPerRunByTable(t *testing.T) {
	tg, eng := sqliteEngine(t)
	if err := EndToEnd(t.Context(), eng); err != nil { // the keys and the first rows of each table
		t.Fatal(err)
	}
	db, err := sqlite.OpenDB(tg.Where)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	counts := func() map[string]int64 {
		rows, err := db.QueryContext(t.Context(), `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, n := range names {
			var c int64
			if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM "`+n+`"`).Scan(&c); err != nil {
				t.Fatal(err)
			}
			out[n] = c
		}
		return out
	}
	rowsWritten := func() int64 {
		n, err := tg.RowsWritten(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const runs = 20
	before, written0 := counts(), rowsWritten()
	for range runs {
		if err := EndToEnd(t.Context(), eng); err != nil {
			t.Fatal(err)
		}
	}
	after, written1 := counts(), rowsWritten()
	written := float64(written1-written0) / runs
	var added float64
	for _, name := range slices.Sorted(maps.Keys(after)) {
		if d := float64(after[name]-before[name]) / runs; d != 0 {
			t.Logf("%-20s %5.2f rows added per run", name, d)
			added += d
		}
	}
	t.Logf("%-20s %5.2f rows updated or deleted per run, %.2f written in all", "(the rest)", written-added, written)
	if d := after["runs"] - before["runs"]; d != runs {
		t.Errorf("%d run rows for %d runs", d, runs)
	}
	if added <= 0 || added > written {
		t.Errorf("%.2f rows added per run, %.2f written", added, written)
	}
	if written > maxRowsPerRun {
		t.Errorf("%.2f rows written per run, want at most %d", written, maxRowsPerRun)
	}
}

// maxRowsPerRun bounds the rows one whole run writes on SQLite: what it
// takes today (a transition's events ride in its checkpoint row, and the
// head they end at in its run row; an intent rides in its checkpoint, and
// the operation's row is written once, with its receipt), so that a change
// that adds one is seen.
const maxRowsPerRun = 12

// maxBytesPerRun bounds what one whole run with 2 KB of evidence adds to a
// SQLite store at one client: the target of 6 KB, so that a change that
// makes a run larger than that is seen.
const maxBytesPerRun = 6144

// TestBytesPerRunOnSQLite measures what 500 whole runs, one after another,
// add to the store (the file with its WAL folded into it), after as many
// that give every table and index its first pages.
func TestBytesPerRunOnSQLite(t *testing.T) {
	tg, eng := sqliteEngine(t)
	const runs = 500
	runAll := func() {
		for range runs {
			if err := EndToEnd(t.Context(), eng); err != nil {
				t.Fatal(err)
			}
		}
	}
	size := func() int64 {
		n, err := tg.Size(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	runAll()
	before := size()
	runAll()
	per := float64(size()-before) / runs
	t.Logf("%.0f bytes per run", per)
	if per > maxBytesPerRun {
		t.Errorf("%.0f bytes per run, want at most %d", per, maxBytesPerRun)
	}
}

// The figures are read "with 2 KB of evidence": the evidence is a JSON
// object of about 2 KB, the same bytes in every run and every process.
func TestTheEvidenceIsTwoKilobytesOfJSON(t *testing.T) {
	if n := len(evidence); n < 1900 || n > 2100 {
		t.Errorf("the evidence is %d bytes, want about 2,000", n)
	}
	var v map[string]any
	if err := json.Unmarshal(evidence, &v); err != nil {
		t.Fatalf("the evidence is not a JSON object: %v", err)
	}
	if again := paymentsEvidence(evidenceBytes); !bytes.Equal(again, evidence) {
		t.Error("the evidence differs from one making to the next")
	}
}
