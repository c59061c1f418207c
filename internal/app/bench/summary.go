package bench

import (
	"fmt"
	"io"

	"github.com/signoff-dev/signoff/internal/benchkit"
)

// The targets a whole run at 64 clients is read against: its CPU within
// three times that of four raw 2 KB commits (a run is four commits), its
// store growth and its rows written with 2 KB of evidence.
const (
	TargetCPURatio    = 3
	TargetBytesPerRun = 6 * 1024
	TargetRowsPerRun  = 12
)

// summaryClients is the concurrency the summary reads the figures at.
const summaryClients = 64

// Summary is what the figures of one run are worth against the targets,
// every number taken from that run's own figures.
type Summary struct {
	// Clients is the concurrency of the e2e and click figures read.
	Clients int `json:"clients"`
	// E2ECPU is a whole run's CPU time (cpu_ms_per_op of e2e at Clients).
	E2ECPU float64 `json:"e2e_cpu_ms_per_run"`
	// FloorFrom names the raw figure the floor is made of: raw commits at
	// Clients where the store ran them, else at the most clients it did
	// (SQLite's one writer takes raw commits at one client only).
	FloorFrom string `json:"floor_from"`
	// FloorCPU is four times the raw commit's CPU time: four 2 KB commits.
	FloorCPU float64 `json:"floor_cpu_ms"`
	// CPURatio is E2ECPU over FloorCPU, against CPURatioTarget.
	CPURatio       float64 `json:"cpu_ratio"`
	CPURatioTarget float64 `json:"cpu_ratio_target"`
	// On a PostgreSQL server on this machine, half of a commit's work is
	// the server's: a whole run's CPU and the floor's again with the
	// server's processes' counted on both sides (as SQLite's work is
	// counted in this process), and their ratio; 0 where not measured.
	E2ECPUWithServer   float64 `json:"e2e_cpu_ms_per_run_with_server,omitempty"`
	FloorCPUWithServer float64 `json:"floor_cpu_ms_with_server,omitempty"`
	CPURatioWithServer float64 `json:"cpu_ratio_with_server,omitempty"`
	// A whole run's store growth and rows written (rows: 0 where not
	// counted), beside their targets.
	BytesPerRun       float64 `json:"bytes_per_run"`
	BytesPerRunTarget float64 `json:"bytes_per_run_target"`
	RowsPerRun        float64 `json:"rows_per_run,omitempty"`
	RowsPerRunTarget  float64 `json:"rows_per_run_target"`
	// RoundTripsPerRun: a whole run's round trips to the server (0 on
	// SQLite).
	RoundTripsPerRun float64 `json:"round_trips_per_run,omitempty"`
	// A durable click at Clients at once: its commits, CPU time and p99,
	// beside the bare handler's p99.
	ClickCommits  float64 `json:"click_commits_per_op"`
	ClickCPU      float64 `json:"click_cpu_ms_per_op"`
	ClickP99      float64 `json:"click_p99_ms"`
	ClickBareP99  float64 `json:"click_bare_p99_ms"`
	ClickP99Ratio float64 `json:"click_p99_ratio,omitempty"`
}

// Summarize reads the summary from figs; nil when figs lack a whole run at
// summaryClients or a raw commit with its CPU time.
func Summarize(figs []benchkit.Figure) *Summary {
	at := map[string]benchkit.Figure{}
	var raw benchkit.Figure
	for _, f := range figs {
		at[fmt.Sprintf("%s/%d", f.Name, f.Clients)] = f
		if f.Name == "raw_commit" && f.Clients <= summaryClients && f.Clients > raw.Clients {
			raw = f
		}
	}
	e2e, ok := at[fmt.Sprintf("e2e/%d", summaryClients)]
	if !ok || raw.CPUPerOp == 0 {
		return nil
	}
	s := &Summary{
		Clients: summaryClients, E2ECPU: e2e.CPUPerOp,
		FloorFrom: fmt.Sprintf("raw_commit/%d", raw.Clients), FloorCPU: 4 * raw.CPUPerOp, CPURatioTarget: TargetCPURatio,
		BytesPerRun: e2e.BytesPerOp, BytesPerRunTarget: TargetBytesPerRun,
		RowsPerRun: e2e.RowsPerOp, RowsPerRunTarget: TargetRowsPerRun,
		RoundTripsPerRun: e2e.RoundTripsPerOp,
	}
	s.CPURatio = s.E2ECPU / s.FloorCPU
	if e2e.ServerCPUPerOp > 0 && raw.ServerCPUPerOp > 0 {
		s.E2ECPUWithServer = e2e.CPUPerOp + e2e.ServerCPUPerOp
		s.FloorCPUWithServer = 4 * (raw.CPUPerOp + raw.ServerCPUPerOp)
		s.CPURatioWithServer = s.E2ECPUWithServer / s.FloorCPUWithServer
	}
	click, bare := at[fmt.Sprintf("click/%d", summaryClients)], at[fmt.Sprintf("click_bare/%d", summaryClients)]
	s.ClickCommits, s.ClickCPU, s.ClickP99, s.ClickBareP99 = click.CommitsPerOp, click.CPUPerOp, click.P99, bare.P99
	if bare.P99 > 0 {
		s.ClickP99Ratio = click.P99 / bare.P99
	}
	return s
}

// printSummary prints s as the lines that end the table.
func printSummary(w io.Writer, s *Summary) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "\ne2e at %d clients: %.2f ms of CPU per run, %.2fx the floor of 4 raw commits (%.2f ms, 4 x %s; target %gx)\n",
		s.Clients, s.E2ECPU, s.CPURatio, s.FloorCPU, s.FloorFrom, s.CPURatioTarget)
	if s.CPURatioWithServer > 0 {
		fmt.Fprintf(w, "e2e at %d clients with the server's CPU: %.2f ms per run, %.2fx the floor's %.2f ms (target %gx)\n",
			s.Clients, s.E2ECPUWithServer, s.CPURatioWithServer, s.FloorCPUWithServer, s.CPURatioTarget)
	}
	rows := "rows not counted on this database"
	if s.RowsPerRun > 0 {
		rows = fmt.Sprintf("%.1f rows (target %g)", s.RowsPerRun, s.RowsPerRunTarget)
	}
	fmt.Fprintf(w, "e2e at %d clients: %.0f bytes per run (target %g), %s", s.Clients, s.BytesPerRun, s.BytesPerRunTarget, rows)
	if s.RoundTripsPerRun > 0 {
		fmt.Fprintf(w, ", %.1f round trips", s.RoundTripsPerRun)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "click at %d at once: %.2f commits, %.2f ms of CPU, p99 %.2f ms beside the bare handler's %.2f ms\n",
		s.Clients, s.ClickCommits, s.ClickCPU, s.ClickP99, s.ClickBareP99)
}
