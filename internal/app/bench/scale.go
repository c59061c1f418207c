package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync/atomic"
	"text/tabwriter"
	"time"

	agentapi "github.com/signoff-dev/signoff/api"
	"github.com/signoff-dev/signoff/internal/benchkit"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/counting"
	"github.com/signoff-dev/signoff/workflow"
)

// DefaultScaleRuns is how many ended runs `signoff bench --scale` loads;
// a tenth as many wait for approval beside them.
const DefaultScaleRuns = 1_000_000

// loadClients is how many clients load the runs at once: the most the
// store's group commit takes together in the figures.
const loadClients = 64

// ScaleReport is what `signoff bench --scale` prints: the lists the edges
// read, the prune and the store's size, with many runs in the store.
type ScaleReport struct {
	DB    string `json:"db"`
	Where string `json:"where"`
	CPUs  int    `json:"cpus"`
	Load  string `json:"load_average,omitempty"`
	GOGC  string `json:"gogc"`
	// Ended and Waiting are the runs loaded: whole runs (submit, approve,
	// execute, done) and gated submits left waiting, made by the engine
	// from loadClients clients at once, in LoadSeconds.
	Ended       int     `json:"ended"`
	Waiting     int     `json:"waiting"`
	LoadSeconds float64 `json:"load_seconds"`
	// Settled says what was done before the lists were read that a
	// running server does on its own ("" for nothing: SQLite).
	Settled string `json:"settled,omitempty"`
	// Lists are the first pages the edges read, timed around the engine's
	// call each edge makes.
	Lists []ListFigure `json:"lists"`
	// Prune is the runs that ended first (a tenth of Ended) pruned alone;
	// PruneRest the rest of them, after which the store gave the space back
	// as `signoff prune` does (on SQLite).
	Prune     PruneFigure `json:"prune"`
	PruneRest PruneFigure `json:"prune_rest"`
	// Bytes are the store's sizes: with the ended runs only, with the
	// waiting ones too, and after both prunes.
	BytesEnded  int64 `json:"bytes_ended"`
	BytesLoaded int64 `json:"bytes_loaded"`
	BytesPruned int64 `json:"bytes_pruned"`
	// BytesPerEndedRun and BytesPerPrunedRun are what an ended run takes
	// before and after prune: the ended runs' share of the store (the
	// waiting runs', which prune does not touch, taken out) over Ended.
	BytesPerEndedRun  float64 `json:"bytes_per_ended_run"`
	BytesPerPrunedRun float64 `json:"bytes_per_pruned_run"`
}

// ListFigure is one list read again and again.
type ListFigure struct {
	// Name says whose list: "pending" (Slack's /runs pending, first page),
	// "cli" (runs --status waiting_approval, first page) or "api" (GET
	// /v1/runs, first page).
	Name string `json:"name"`
	// Call is the engine's call with its filter, as the edge makes it.
	Call  string  `json:"call"`
	Runs  int     `json:"runs"`
	Reads int     `json:"reads"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	// StoreP50 and StoreP99 are the store's part of each call: the time its
	// one list query took, rows read and scanned.
	StoreP50 float64 `json:"store_p50_ms"`
	StoreP99 float64 `json:"store_p99_ms"`
}

// PruneFigure is one prune.
type PruneFigure struct {
	Runs    int     `json:"runs"`
	Seconds float64 `json:"seconds"`
	// Per100k is Seconds for 100,000 runs at the same rate.
	Per100k float64 `json:"seconds_per_100000"`
}

// Scale loads ended runs (a tenth as many waiting) into the store db names
// (as Run reads it) through the engine, then times the lists, the prune and
// the store's size. gogc is the garbage collector's goal in force, for the
// report.
func Scale(ctx context.Context, db string, ended int, gogc string) (*ScaleReport, error) {
	if ended < 10 {
		return nil, fmt.Errorf("--scale-runs: %d ended runs, want at least 10", ended)
	}
	t, done, err := openTarget(ctx, db)
	if err != nil {
		return nil, err
	}
	defer done()
	eng, err := benchkit.NewEngine(t.Store)
	if err != nil {
		return nil, err
	}
	rep := &ScaleReport{DB: t.Name, Where: t.Where, CPUs: runtime.NumCPU(), GOGC: gogc, Ended: ended, Waiting: ended / 10}
	start := time.Now()
	// The first tenth ends before the cutoff, the rest after: the first
	// prune takes the first tenth alone.
	first := ended / 10
	whole := func(ctx context.Context) error { return benchkit.EndToEnd(ctx, eng) }
	if err := loadSettling(ctx, t, first, whole); err != nil {
		return nil, err
	}
	// A run's end is stored to the millisecond, and prune takes the runs
	// that ended before the cutoff's: the cutoff is the next millisecond,
	// and the rest begin once it has come, so that the first tenth, and
	// only it, ended before it.
	cutoff := time.Now().Truncate(time.Millisecond).Add(time.Millisecond)
	time.Sleep(time.Until(cutoff))
	if err := loadSettling(ctx, t, ended-first, whole); err != nil {
		return nil, err
	}
	if rep.BytesEnded, err = t.Size(ctx); err != nil {
		return nil, err
	}
	if err := load(ctx, rep.Waiting, func(ctx context.Context) error { _, err := benchkit.Suspend(ctx, eng); return err }); err != nil {
		return nil, err
	}
	rep.LoadSeconds = time.Since(start).Seconds()
	if rep.BytesLoaded, err = t.Size(ctx); err != nil {
		return nil, err
	}
	if t.Settle != nil {
		if err := t.Settle(ctx); err != nil {
			return nil, err
		}
		rep.Settled = settled
	}
	if rep.Lists, err = timeLists(ctx, eng, t.Store, rep.Waiting, ended+rep.Waiting); err != nil {
		return nil, err
	}
	if rep.Prune, err = prune(ctx, eng, cutoff); err != nil {
		return nil, err
	}
	if rep.PruneRest, err = prune(ctx, eng, time.Now()); err != nil {
		return nil, err
	}
	if got := rep.Prune.Runs + rep.PruneRest.Runs; got != ended {
		return nil, fmt.Errorf("prune: %d runs pruned, want the %d that ended", got, ended)
	}
	if t.Reclaim != nil {
		if err := t.Reclaim(ctx); err != nil {
			return nil, fmt.Errorf("prune: give the space back: %w", err)
		}
	}
	if rep.BytesPruned, err = t.Size(ctx); err != nil {
		return nil, err
	}
	waiting := rep.BytesLoaded - rep.BytesEnded
	rep.BytesPerEndedRun = float64(rep.BytesEnded) / float64(ended)
	rep.BytesPerPrunedRun = float64(rep.BytesPruned-waiting) / float64(ended)
	rep.Load = loadAverage()
	return rep, nil
}

// settleEvery is how many runs loadSettling makes between two Settles: a
// server's autovacuum analyses a table once a tenth of it changed, and a
// million runs loaded on a server without it (stale statistics) slow
// from hundreds of runs a second to a dozen as plans go wrong.
const settleEvery = 100_000

// loadSettling is load in parts of settleEvery runs, with t's Settle
// after each part but the last, as the server's autovacuum would run.
func loadSettling(ctx context.Context, t *benchkit.Target, n int, op func(ctx context.Context) error) error {
	for n > 0 {
		part := min(n, settleEvery)
		if err := load(ctx, part, op); err != nil {
			return err
		}
		n -= part
		if n > 0 && t.Settle != nil {
			if err := t.Settle(ctx); err != nil {
				return fmt.Errorf("load runs: %w", err)
			}
		}
	}
	return nil
}

// load makes n runs with op from loadClients clients at once.
func load(ctx context.Context, n int, op func(ctx context.Context) error) error {
	var left atomic.Int64
	left.Store(int64(n))
	made, _, err := benchkit.Drive(ctx, loadClients, 0, func(ctx context.Context) (bool, error) {
		if left.Add(-1) < 0 {
			return false, nil
		}
		return true, op(ctx)
	})
	if err != nil {
		return fmt.Errorf("load runs: %w", err)
	}
	if made != int64(n) {
		return fmt.Errorf("load runs: %d made, want %d", made, n)
	}
	return nil
}

// settled is what Target.Settle does, for the report.
const settled = "VACUUM (ANALYZE), as autovacuum does (also after every 100,000 runs loaded)"

// pageReads is how many times each list is read: enough for a p99.
const pageReads = 200

// list is one edge's first page: the engine's call, returning how many
// runs it read.
type list struct {
	name, call string
	want       int
	read       func() (int, error)
}

// edgeLists are the first pages the edges read. Each returns as many runs as
// the store holds for it: waiting of them are waiting, all of them are the
// one requester's.
func edgeLists(ctx context.Context, eng *workflow.Engine, waiting, all int) []list {
	views := func(f storage.RunFilter) func() (int, error) {
		return func() (int, error) { vs, err := eng.ListViews(ctx, f); return len(vs), err }
	}
	waitingOnly := []record.Status{record.StatusWaitingApproval}
	return []list{
		// bot/commands.go: the first page of 10 and one to tell whether
		// there is more.
		{"pending", "ListViews(status waiting_approval, limit 11)", min(11, waiting),
			views(storage.RunFilter{Statuses: waitingOnly, Limit: 11})},
		// internal/app: runs --status waiting_approval, a page of 100 and
		// one more.
		{"cli", fmt.Sprintf("ListViews(status waiting_approval, limit %d)", CLIPage+1), min(CLIPage+1, waiting),
			views(storage.RunFilter{Statuses: waitingOnly, Limit: CLIPage + 1})},
		// api/handlers.go: the token's requester's runs, a page of
		// DefaultLimit and one more.
		{"api", fmt.Sprintf("ListViews(requester, limit %d)", agentapi.DefaultLimit+1), min(agentapi.DefaultLimit+1, all),
			views(storage.RunFilter{RequesterID: benchkit.Requester, Limit: agentapi.DefaultLimit + 1})},
	}
}

// CLIPage is the page `signoff runs` lists unless told.
const CLIPage = 100

// timeLists times each edge's list: the engine's call as the edge makes
// it, and the store's part of it, the time its list query took (st.Listed).
func timeLists(ctx context.Context, eng *workflow.Engine, st *counting.Store, waiting, all int) ([]ListFigure, error) {
	var out []ListFigure
	for _, l := range edgeLists(ctx, eng, waiting, all) {
		took := make([]time.Duration, 0, pageReads)
		inStore := make([]time.Duration, 0, pageReads)
		for range pageReads {
			t0, s0 := time.Now(), st.Listed()
			got, err := l.read()
			took, inStore = append(took, time.Since(t0)), append(inStore, st.Listed()-s0)
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", l.name, err)
			}
			if got != l.want {
				return nil, fmt.Errorf("list %s: %d runs, want %d", l.name, got, l.want)
			}
		}
		p50, p99 := percentiles(took)
		s50, s99 := percentiles(inStore)
		out = append(out, ListFigure{Name: l.name, Call: l.call, Runs: l.want, Reads: pageReads, P50: p50, P99: p99, StoreP50: s50, StoreP99: s99})
	}
	return out, nil
}

// percentiles are the p50 and p99 of ds in ms.
func percentiles(ds []time.Duration) (p50, p99 float64) {
	slices.Sort(ds)
	return ms(ds[len(ds)/2]), ms(ds[len(ds)*99/100])
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// prune prunes the runs that ended before cutoff, timed.
func prune(ctx context.Context, eng *workflow.Engine, cutoff time.Time) (PruneFigure, error) {
	t0 := time.Now()
	rep, err := eng.Prune(ctx, workflow.PruneOptions{Before: cutoff})
	took := time.Since(t0).Seconds()
	if err != nil {
		return PruneFigure{}, fmt.Errorf("prune: %w", err)
	}
	if len(rep.Skipped) > 0 {
		return PruneFigure{}, fmt.Errorf("prune: %d runs skipped: %v", len(rep.Skipped), rep.Skipped[0])
	}
	f := PruneFigure{Runs: rep.Runs, Seconds: took}
	if rep.Runs > 0 {
		f.Per100k = took * 100_000 / float64(rep.Runs)
	}
	return f, nil
}

// PrintScale prints the scale report for people.
func PrintScale(out io.Writer, rep *ScaleReport) {
	fmt.Fprintf(out, "signoff bench --scale: %s (%s), %d CPUs, GOGC %s, load average %s\n", rep.DB, rep.Where, rep.CPUs, rep.GOGC, rep.Load)
	fmt.Fprintf(out, "loaded %d ended runs and %d waiting through the engine (%d clients) in %.1f s\n",
		rep.Ended, rep.Waiting, loadClients, rep.LoadSeconds)
	if rep.Settled != "" {
		fmt.Fprintf(out, "then %s, before the lists were read\n", rep.Settled)
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "list\tengine call\truns\treads\tp50 ms\tp99 ms\tstore p50 ms\tstore p99 ms")
	for _, l := range rep.Lists {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\n", l.Name, l.Call, l.Runs, l.Reads, l.P50, l.P99, l.StoreP50, l.StoreP99)
	}
	tw.Flush()
	fmt.Fprintf(out, "\nprune of the first %d ended runs: %.1f s (%.1f s per 100,000); of the other %d: %.1f s\n",
		rep.Prune.Runs, rep.Prune.Seconds, rep.Prune.Per100k, rep.PruneRest.Runs, rep.PruneRest.Seconds)
	fmt.Fprintf(out, "store: %d bytes with the ended runs, %d with the waiting too, %d after prune\n", rep.BytesEnded, rep.BytesLoaded, rep.BytesPruned)
	fmt.Fprintf(out, "per ended run: %.0f bytes, %.0f after prune\n", rep.BytesPerEndedRun, rep.BytesPerPrunedRun)
}
