// Package bench is what `signoff bench` measures and prints: the store's raw
// commits, the engine's suspend, decide and whole runs (internal/benchkit
// has their bodies), and Slack's clicks and the agent API's submits over
// loopback HTTP. It is a package of its own so that the program's commands
// (internal/app) hold only the command that calls it.
package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/labstack/echo/v4"

	agentapi "github.com/signoff-dev/signoff/api"
	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/internal/benchkit"
	"github.com/signoff-dev/signoff/internal/benchkit/barebot"
	"github.com/signoff-dev/signoff/workflow"
)

// Report is what `signoff bench --json` prints.
type Report struct {
	DB       string  `json:"db"`
	Where    string  `json:"where"`
	Duration float64 `json:"seconds_per_figure"`
	CPUs     int     `json:"cpus"`
	Load     string  `json:"load_average,omitempty"`
	// GOGC is the garbage collector's goal during the run (the caller's,
	// which sets it).
	GOGC    string            `json:"gogc"`
	Figures []benchkit.Figure `json:"figures"`
	// Summary reads the figures against the targets of a whole run.
	Summary *Summary `json:"summary,omitempty"`
}

// Run opens the target db names ("" a temporary SQLite file; a file path
// that must not exist, removed after; a loopback PostgreSQL URL, in a schema
// of its own dropped after) and measures every figure for d. gogc is the
// garbage collector's goal in force, for the report.
func Run(ctx context.Context, db string, d time.Duration, gogc string) (*Report, error) {
	t, done, err := openTarget(ctx, db)
	if err != nil {
		return nil, err
	}
	defer done()
	eng, err := benchkit.NewEngine(t.Store)
	if err != nil {
		return nil, err
	}
	rep := &Report{DB: t.Name, Where: t.Where, Duration: d.Seconds(), CPUs: runtime.NumCPU(), Load: loadAverage(), GOGC: gogc}
	figs, err := benchkit.Measure(ctx, t, eng, []int{1, 8, 64}, d)
	if err != nil {
		return nil, err
	}
	rep.Figures = figs
	clicks, err := benchClicks(ctx, t, eng, d)
	if err != nil {
		return nil, err
	}
	rep.Figures = append(rep.Figures, clicks...)
	submits, err := benchAPISubmit(ctx, t, eng, d)
	if err != nil {
		return nil, err
	}
	rep.Figures = append(rep.Figures, submits...)
	if rep.Load == "" {
		rep.Load = loadAverage()
	}
	rep.Summary = Summarize(rep.Figures)
	return rep, nil
}

// openTarget opens the store db names, as Run says; done closes it and
// removes what it made.
func openTarget(ctx context.Context, db string) (t *benchkit.Target, done func(), err error) {
	switch {
	case isPostgres(db):
		if err := loopbackOnly(db); err != nil {
			return nil, nil, err
		}
		t, err = benchkit.OpenPostgres(ctx, db)
	case db == "":
		dir, derr := os.MkdirTemp("", "signoff-bench-")
		if derr != nil {
			return nil, nil, derr
		}
		if t, err = benchkit.OpenSQLite(ctx, filepath.Join(dir, "signoff.db")); err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
		return t, func() { t.Close(); os.RemoveAll(dir) }, nil
	default:
		t, err = benchkit.OpenSQLite(ctx, db)
	}
	if err != nil {
		return nil, nil, err
	}
	return t, func() { t.Close() }, nil
}

// isPostgres says whether db is a PostgreSQL URL rather than a SQLite path,
// as --db reads it.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// loopbackOnly refuses a PostgreSQL server that is not on this machine: the
// benchmark writes thousands of rows and measures this machine's disk.
func loopbackOnly(dsn string) error {
	u, err := url.Parse(dsn)
	if err != nil {
		return fmt.Errorf("--db: %w", err)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--db: the benchmark runs against a server on this machine only (127.0.0.1, ::1 or localhost), not %q", host)
}

// loadAverage is the first line of /proc/loadavg, where there is one.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

const (
	benchSecret = "bench-signing-secret"
	benchAppID  = "A0BENCH001"
	benchTeamID = "T0BENCH001"
)

// benchClicks measures Approve clicks over loopback HTTP, as Slack sends them,
// at 1 and 64 at once: each approves its own waiting run, made before the
// clock starts. Beside them, the same clicks on the bare handler.
func benchClicks(ctx context.Context, t *benchkit.Target, eng *workflow.Engine, d time.Duration) ([]benchkit.Figure, error) {
	slack := &benchSlack{}
	cfg := bot.ServerConfig{Engine: eng, SigningSecret: benchSecret, AppID: benchAppID, TeamID: benchTeamID, Slack: slack}
	srv, err := bot.NewServer(cfg)
	if err != nil {
		return nil, err
	}
	durable := serveBot(srv)
	defer durable.Close()
	var out []benchkit.Figure
	var some *workflow.RunView
	for _, n := range []int{1, 64} {
		// Waiting runs for the clicks, made as fast as 64 clients can.
		var (
			mu  sync.Mutex
			ids []string
		)
		if _, _, err := benchkit.Drive(ctx, 64, d, func(ctx context.Context) (bool, error) {
			id, err := benchkit.Suspend(ctx, eng)
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			return true, err
		}); err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("clicks: no run was made to click on in %s", d)
		}
		views := make([]*workflow.RunView, len(ids))
		for i, id := range ids {
			if views[i], err = eng.Get(ctx, id); err != nil {
				return nil, err
			}
		}
		some = views[0]
		// Counted on the store: a durable click's commits and round trips.
		f, err := t.Count(ctx, "click", n, func() (benchkit.Figure, error) {
			return benchkit.Clicks(ctx, durable.URL+"/slack/interactions", n, d, func(i int) (benchkit.Click, bool) {
				if i >= len(views) {
					return benchkit.Click{}, false
				}
				return approveClick(views[i]), true
			})
		})
		if err != nil {
			return nil, fmt.Errorf("clicks: %w", err)
		}
		if r := slack.refused.Load(); r > 0 {
			return nil, fmt.Errorf("clicks: %d were refused: %s", r, slack.last.Load())
		}
		out = append(out, f)
	}
	bare, decided, err := barebot.NewServer(cfg, some)
	if err != nil {
		return nil, err
	}
	bs := serveBot(bare)
	defer bs.Close()
	click := approveClick(some)
	for _, n := range []int{1, 64} {
		before := decided.Load()
		f, err := benchkit.Clicks(ctx, bs.URL+"/slack/interactions", n, d, func(int) (benchkit.Click, bool) { return click, true })
		if err != nil {
			return nil, fmt.Errorf("bare clicks: %w", err)
		}
		if got := decided.Load() - before; got != f.Ops {
			return nil, fmt.Errorf("bare clicks: %d decisions for %d clicks", got, f.Ops)
		}
		f.Name = "click_bare"
		out = append(out, f)
	}
	return out, nil
}

// benchAPISubmit measures POST /v1/runs over loopback HTTP at 1 and 64
// clients at once, each request a new gated proposal (201, waiting): the
// engine's suspend behind the API's token check, strict decoding and answer.
func benchAPISubmit(ctx context.Context, t *benchkit.Target, eng *workflow.Engine, d time.Duration) ([]benchkit.Figure, error) {
	const token = "sk_bench"
	sum := sha256.Sum256([]byte(token))
	h, err := agentapi.New(agentapi.Config{Engine: eng, Rate: 1e6, Burst: 1e6, Tokens: []agentapi.Token{
		{ID: "bench", SHA256: sum, Requester: benchkit.Requester, Scopes: []string{agentapi.ScopeSubmit}}}})
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	body, err := json.Marshal(benchkit.Proposal())
	if err != nil {
		return nil, err
	}
	req := benchkit.Click{Body: body, Header: map[string][]string{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}}
	var out []benchkit.Figure
	for _, n := range []int{1, 64} {
		f, err := t.Count(ctx, "api_submit", n, func() (benchkit.Figure, error) {
			return benchkit.Clicks(ctx, srv.URL+"/v1/runs", n, d, func(int) (benchkit.Click, bool) { return req, true })
		})
		if err != nil {
			return nil, fmt.Errorf("api submit: %w", err)
		}
		out = append(out, f)
	}
	return out, nil
}

func serveBot(srv *bot.Server) *httptest.Server {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	srv.Register(e)
	return httptest.NewServer(e) // listens on 127.0.0.1
}

// approveClick is the signed block_actions request of a team lead's Approve
// on v's pending request.
func approveClick(v *workflow.RunView) benchkit.Click {
	ref := bot.Ref{RunID: v.ID, RequestID: v.Gate.RequestID, Fingerprint: v.Gate.Fingerprint}
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "api_app_id": benchAppID, "trigger_id": "bench.trigger",
		"user":      map[string]any{"id": benchkit.Approver, "name": "lead", "team_id": benchTeamID},
		"team":      map[string]any{"id": benchTeamID},
		"container": map[string]any{"type": "message", "channel_id": "C0BENCH001", "message_ts": "1796029201.000200"},
		"channel":   map[string]any{"id": "C0BENCH001"},
		"actions":   []any{map[string]any{"type": "button", "action_id": bot.ActionApprove, "value": ref.String()}},
	})
	body := []byte("payload=" + url.QueryEscape(string(payload)))
	return benchkit.Click{Body: body, Header: slackHeaders(body)}
}

func slackHeaders(body []byte) map[string][]string {
	ts := time.Now().Unix()
	return map[string][]string{
		"Content-Type":      {"application/x-www-form-urlencoded"},
		bot.HeaderTimestamp: {fmt.Sprint(ts)},
		bot.HeaderSignature: {bot.Sign(benchSecret, ts, body)},
	}
}

// benchSlack stands in for Slack's Web API: a click the handler refuses is
// told to the clicker, so it is counted here and fails the figure.
type benchSlack struct {
	refused atomic.Int64
	last    atomic.Value
}

func (s *benchSlack) OpenView(context.Context, string, bot.ModalView) error { return nil }

func (s *benchSlack) PostEphemeral(_ context.Context, _, _ string, _ []bot.Block, text string) error {
	s.refused.Add(1)
	s.last.Store(text)
	return nil
}

// Print prints the report as tables for people.
func Print(out io.Writer, rep *Report) {
	var w bytes.Buffer
	defer func() {
		// tabwriter pads empty cells at the ends of lines.
		for _, line := range strings.Split(strings.TrimRight(w.String(), "\n"), "\n") {
			fmt.Fprintln(out, strings.TrimRight(line, " "))
		}
	}()
	fmt.Fprintf(&w, "signoff bench: %s (%s), %g s per figure, %d CPUs, GOGC %s, load average %s\n\n", rep.DB, rep.Where, rep.Duration, rep.CPUs, rep.GOGC, rep.Load)
	tw := tabwriter.NewWriter(&w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "figure\tclients\tper second\tcommits/op\tfsyncs/op\tbytes/op\trows/op\tround trips/op\tcpu ms/op\tserver cpu ms/op\t")
	for _, f := range rep.Figures {
		if strings.HasPrefix(f.Name, "click") || f.Name == "api_submit" {
			continue
		}
		if f.Name == "raw_commit" {
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t\t\t\t\t\t%s\t%s\t\n", f.Name, f.Clients, f.PerSec, cpuCell(f), serverCPUCell(f))
			continue
		}
		rows := "" // not counted on this database
		if f.RowsPerOp > 0 {
			rows = fmt.Sprintf("%.1f", f.RowsPerOp)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.2f\t%.0f\t%s\t%s\t%s\t%s\t\n", f.Name, f.Clients, f.PerSec, f.CommitsPerOp, f.SyncsPerOp, f.BytesPerOp, rows, roundTripsCell(f), cpuCell(f), serverCPUCell(f))
	}
	tw.Flush()
	fmt.Fprintln(&w)
	tw = tabwriter.NewWriter(&w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "over HTTP\tat once\tper second\tp50 ms\tp99 ms\tcommits/op\tround trips/op\tcpu ms/op\tserver cpu ms/op\t")
	for _, f := range rep.Figures {
		if !strings.HasPrefix(f.Name, "click") && f.Name != "api_submit" {
			continue
		}
		name := "click: durable decision"
		switch f.Name {
		case "click_bare":
			name = "click: bare handler"
		case "api_submit":
			name = "POST /v1/runs (suspend)"
		}
		commits := "" // the bare handler's store keeps nothing
		if f.Name != "click_bare" {
			commits = fmt.Sprintf("%.2f", f.CommitsPerOp)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t\n", name, f.Clients, f.PerSec, f.P50, f.P99, commits, roundTripsCell(f), cpuCell(f), serverCPUCell(f))
	}
	tw.Flush()
	printRatios(&w, rep.Figures)
	printSummary(&w, rep.Summary)
}

// cpuCell is a figure's CPU time per operation, or nothing where unknown.
func cpuCell(f benchkit.Figure) string {
	if f.CPUPerOp == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", f.CPUPerOp)
}

// serverCPUCell is a figure's server CPU time per operation, or nothing
// where there is no server or it was not found on this machine.
func serverCPUCell(f benchkit.Figure) string {
	if f.ServerCPUPerOp == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", f.ServerCPUPerOp)
}

// roundTripsCell is a figure's round trips per operation, or nothing where
// there is no server.
func roundTripsCell(f benchkit.Figure) string {
	if f.RoundTripsPerOp == 0 {
		return ""
	}
	return fmt.Sprintf("%.1f", f.RoundTripsPerOp)
}

// printRatios says what the figures are worth beside each other: e2e runs
// against the raw commit rate and against one client, and a click's p99
// against the bare handler's at the same concurrency.
func printRatios(w io.Writer, figs []benchkit.Figure) {
	at := map[string]benchkit.Figure{}
	for _, f := range figs {
		at[fmt.Sprintf("%s/%d", f.Name, f.Clients)] = f
	}
	var lines []string
	defer func() {
		if len(lines) > 0 {
			fmt.Fprintf(w, "\n%s\n", strings.Join(lines, "\n"))
		}
	}()
	raw, e2e1 := at["raw_commit/1"], at["e2e/1"]
	for _, c := range []int{8, 64} {
		f, ok := at[fmt.Sprintf("e2e/%d", c)]
		if !ok || raw.PerSec == 0 || e2e1.PerSec == 0 {
			continue
		}
		rows := ""
		if f.RowsPerOp > 0 {
			rows = fmt.Sprintf(", %.1f rows", f.RowsPerOp)
		}
		// Where raw commits ran at as many clients, their own gain is the
		// most the machine gives: the store's is read beside it.
		scale := ""
		if rawN, ok := at[fmt.Sprintf("raw_commit/%d", c)]; ok {
			scale = fmt.Sprintf(" (raw commits: %.1fx)", rawN.PerSec/raw.PerSec)
		}
		lines = append(lines, fmt.Sprintf("e2e at %d clients: %.2fx the raw single-row commit rate, %.1fx one client%s; %.2f fsyncs, %.0f bytes%s per run",
			c, f.PerSec/raw.PerSec, f.PerSec/e2e1.PerSec, scale, f.SyncsPerOp, f.BytesPerOp, rows))
	}
	for _, c := range []int{1, 64} {
		click, bare := at[fmt.Sprintf("click/%d", c)], at[fmt.Sprintf("click_bare/%d", c)]
		if click.P99 > 0 && bare.P99 > 0 {
			lines = append(lines, fmt.Sprintf("click p99 at %d at once: %.1fx the bare handler's", c, click.P99/bare.P99))
		}
	}
}
