package bench

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/signoff-dev/signoff/internal/benchkit"
)

// TestLoopbackOnly: the benchmark runs against a PostgreSQL server on this
// machine only.
func TestLoopbackOnly(t *testing.T) {
	for dsn, ok := range map[string]bool{
		"postgres://u@127.0.0.1:5432/db": true, "postgresql://localhost/db": true, "postgres://[::1]/db": true,
		"postgres://db.example.com/db": false, "postgres://10.0.0.5/db": false,
	} {
		if err := loopbackOnly(dsn); (err == nil) != ok {
			t.Errorf("loopbackOnly(%s) = %v", dsn, err)
		}
	}
}

// TestSummarize: the floor is four of the raw commits run at the most
// clients up to 64, and the ratio is the same run's e2e CPU over it; without
// a whole run at 64 or a raw commit's CPU there is no summary.
func TestSummarize(t *testing.T) {
	e2e := benchkit.Figure{Name: "e2e", Clients: 64, CPUPerOp: 1.2, BytesPerOp: 9000, RowsPerOp: 23, RoundTripsPerOp: 18}
	click := benchkit.Figure{Name: "click", Clients: 64, CommitsPerOp: 3, CPUPerOp: 0.7, P99: 50}
	bare := benchkit.Figure{Name: "click_bare", Clients: 64, P99: 10}
	raw := func(clients int, cpu float64) benchkit.Figure {
		return benchkit.Figure{Name: "raw_commit", Clients: clients, CPUPerOp: cpu}
	}
	for _, tc := range []struct {
		name      string
		figs      []benchkit.Figure
		floorFrom string
		ratio     float64
	}{
		{"sqlite: one client", []benchkit.Figure{raw(1, 0.2), e2e, click, bare}, "raw_commit/1", 1.2 / 0.8},
		{"postgres: eight clients", []benchkit.Figure{raw(1, 0.5), raw(8, 0.1), e2e, click, bare}, "raw_commit/8", 1.2 / 0.4},
		{"no whole run at 64", []benchkit.Figure{raw(1, 0.2), click}, "", 0},
		{"no raw CPU", []benchkit.Figure{raw(1, 0), e2e}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(tc.figs)
			if tc.floorFrom == "" {
				if s != nil {
					t.Fatalf("summary %+v, want none", s)
				}
				return
			}
			if s == nil {
				t.Fatal("no summary")
			}
			if s.FloorFrom != tc.floorFrom || math.Abs(s.CPURatio-tc.ratio) > 1e-9 || s.BytesPerRun != 9000 || s.RowsPerRun != 23 ||
				s.RoundTripsPerRun != 18 || s.ClickCommits != 3 || s.ClickP99Ratio != 5 {
				t.Errorf("summary %+v, want floor %s, ratio %.3f", s, tc.floorFrom, tc.ratio)
			}
		})
	}
}

// TestSummarizeWithTheServersCPU: where the server's CPU was measured for
// both the floor and the whole run, the summary counts it on both sides;
// where either lacks it, it gives no such ratio.
func TestSummarizeWithTheServersCPU(t *testing.T) {
	e2e := benchkit.Figure{Name: "e2e", Clients: 64, CPUPerOp: 1.1, ServerCPUPerOp: 1.5}
	raw := benchkit.Figure{Name: "raw_commit", Clients: 8, CPUPerOp: 0.07, ServerCPUPerOp: 0.15}
	s := Summarize([]benchkit.Figure{raw, e2e})
	if s == nil || math.Abs(s.E2ECPUWithServer-2.6) > 1e-9 || math.Abs(s.FloorCPUWithServer-0.88) > 1e-9 ||
		math.Abs(s.CPURatioWithServer-2.6/0.88) > 1e-9 || math.Abs(s.CPURatio-1.1/0.28) > 1e-9 {
		t.Fatalf("summary %+v, want 2.6 ms over 0.88 ms with the server, 1.1 over 0.28 without", s)
	}
	var out bytes.Buffer
	printSummary(&out, s)
	if !strings.Contains(out.String(), "with the server's CPU: 2.60 ms per run, 2.95x the floor's 0.88 ms (target 3x)") {
		t.Errorf("summary lines lack the ratio with the server's CPU:\n%s", out.String())
	}
	raw.ServerCPUPerOp = 0
	if s := Summarize([]benchkit.Figure{raw, e2e}); s == nil || s.CPURatioWithServer != 0 || s.E2ECPUWithServer != 0 {
		t.Errorf("summary %+v: a ratio with the server's CPU where the floor lacks it", s)
	}
	out.Reset()
	printSummary(&out, Summarize([]benchkit.Figure{raw, e2e}))
	if strings.Contains(out.String(), "server") {
		t.Errorf("summary lines speak of a server's CPU not measured:\n%s", out.String())
	}
}

// TestALoadSettlesAsAutovacuumWould: a load of more runs than settleEvery
// settles the store after each full part but the last, and makes every run;
// a store with nothing to settle is only loaded.
func TestALoadSettlesAsAutovacuumWould(t *testing.T) {
	var made atomic.Int64
	op := func(context.Context) error { made.Add(1); return nil }
	var settles []int64
	tg := &benchkit.Target{Settle: func(context.Context) error { settles = append(settles, made.Load()); return nil }}
	if err := loadSettling(t.Context(), tg, 2*settleEvery+7, op); err != nil {
		t.Fatal(err)
	}
	if made.Load() != 2*settleEvery+7 || !slices.Equal(settles, []int64{settleEvery, 2 * settleEvery}) {
		t.Fatalf("made %d runs, settled after %v; want %d, and after %d and %d", made.Load(), settles, 2*settleEvery+7, settleEvery, 2*settleEvery)
	}
	made.Store(0)
	if err := loadSettling(t.Context(), &benchkit.Target{}, settleEvery+1, op); err != nil || made.Load() != settleEvery+1 {
		t.Fatalf("without Settle: made %d runs, %v; want %d", made.Load(), err, settleEvery+1)
	}
}
