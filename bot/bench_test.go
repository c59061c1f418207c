package bot

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/signoff-dev/signoff/internal/benchkit"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// BenchmarkClick measures an Approve click over loopback HTTP, as Slack sends
// it: signature, strict parse, organisation check, and a durable decision by
// compare-and-set on SQLite, which is the click's one check, with the replay
// claim and its answer in the same commit. Every click approves its own fresh
// waiting run, made before the timer starts. "bare" is the same handler
// with an engine and a store that keep nothing: what the HTTP edge costs by
// itself.
//
//	go test ./bot -run '^$' -bench BenchmarkClick -benchtime 2000x
func BenchmarkClick(b *testing.B) {
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("durable/clicks=%d", conc), func(b *testing.B) { benchDurable(b, conc) })
	}
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("bare/clicks=%d", conc), func(b *testing.B) { benchBare(b, conc) })
	}
}

type benchClick struct {
	body []byte
	hdr  http.Header
}

func benchDurable(b *testing.B, conc int) {
	h := newSlackHarness(b)
	b.StopTimer()
	clicks := make([]benchClick, b.N)
	runs := make([]string, b.N)
	users := []string{leadGrace, leadOmar, manager}
	for i := range clicks {
		v := h.submit("refund-double-charge", "")
		runs[i] = v.ID
		body := formBody(fixture(b, "block_actions_approve.json", refOf(v), users[i%len(users)], nil))
		clicks[i] = benchClick{body, signed(hSecret, h.clock.Now().Unix(), body)}
	}
	runClicks(b, h.url, conc, clicks)
	b.StopTimer()
	for _, id := range runs {
		if s := h.get(id).Status; s != record.StatusExecuting {
			b.Fatalf("run %s is %s after its click, want executing", id, s)
		}
	}
}

func benchBare(b *testing.B, conc int) {
	now := time.Now()
	replays, err := benchkit.KeepNothingReplays(benchRoles)
	if err != nil {
		b.Fatal(err)
	}
	eng := &benchEngine{replays: replays}
	srv := newServer(eng, ServerConfig{
		SigningSecret: hSecret, AppID: hAppID, TeamID: hTeamID, Clock: clocktest.New(now), Slack: &fakeSlackActions{},
	})
	e := echo.New()
	srv.Register(e)
	ts := httptest.NewServer(e)
	defer ts.Close()
	b.StopTimer()
	body := formBody(fixture(b, "block_actions_approve.json", benchRef, leadGrace, nil))
	click := benchClick{body, signed(hSecret, now.Unix(), body)}
	clicks := make([]benchClick, b.N)
	for i := range clicks {
		clicks[i] = click
	}
	runClicks(b, ts.URL, conc, clicks)
	if got := eng.decided.Load(); got != int64(b.N) {
		b.Fatalf("%d decisions, want %d", got, b.N)
	}
}

// runClicks posts every click from conc workers with the timer running and
// reports requests per second and the p50 and p99 latencies, with the driver
// `signoff bench` uses.
//
// It also reports the process's CPU time per click (server and client: both
// run here), which a busy machine disturbs less than latencies.
func runClicks(b *testing.B, base string, conc int, clicks []benchClick) {
	cpu0 := cpuTime(b)
	b.ResetTimer()
	b.StartTimer()
	f, err := benchkit.Clicks(context.Background(), base+"/slack/interactions", conc, 0, func(i int) (benchkit.Click, bool) {
		if i >= len(clicks) {
			return benchkit.Click{}, false
		}
		return benchkit.Click{Body: clicks[i].body, Header: clicks[i].hdr}, true
	})
	b.StopTimer()
	cpu := cpuTime(b) - cpu0
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(clicks)), "cpu-ms/click")
	b.ReportMetric(f.PerSec, "req/s")
	b.ReportMetric(f.P50, "p50-ms")
	b.ReportMetric(f.P99, "p99-ms")
}

func cpuTime(b *testing.B) time.Duration {
	t, ok := benchkit.CPUTime()
	if !ok {
		b.Skip("this system does not say how much CPU time a process used")
	}
	return t
}

var benchRef = Ref{RunID: "run_01a22a03beb60001db0e0344", RequestID: "req_01a22a03beb70002c0ffee01", Fingerprint: gFP}

// benchEngine answers like an engine with one waiting run and records
// nothing but a count.
type benchEngine struct {
	decided atomic.Int64
	replays *workflow.Replays
}

var _ Engine = (*benchEngine)(nil)

func (e *benchEngine) Get(_ context.Context, id string) (*workflow.RunView, error) {
	if id != benchRef.RunID {
		return nil, &record.RefusedError{Code: record.CodeUnknownRun, RunID: id, Msg: "no such run"}
	}
	v := refundView()
	v.ID, v.Gate.RequestID, v.Requests[0].ID = benchRef.RunID, benchRef.RequestID, benchRef.RequestID
	return v, nil
}

func (e *benchEngine) Decide(_ context.Context, in workflow.DecideInput) (*record.Run, error) {
	e.decided.Add(1)
	return &record.Run{ID: in.RunID, Status: record.StatusExecuting}, nil
}

func (e *benchEngine) List(context.Context, storage.RunFilter) ([]*record.Run, error) {
	return nil, nil
}

func (e *benchEngine) Cancel(context.Context, string, record.Person, string) (*record.Run, error) {
	return nil, storage.ErrNotFound
}

func (e *benchEngine) Reassign(context.Context, string, record.Person, record.Person) (*record.Run, error) {
	return nil, storage.ErrNotFound
}

func (e *benchEngine) Extend(context.Context, string, record.Person, time.Duration) (*record.Run, error) {
	return nil, storage.ErrNotFound
}

func (e *benchEngine) Resolve(context.Context, workflow.ResolveInput) (*record.Run, error) {
	return nil, storage.ErrNotFound
}

func (e *benchEngine) Roles() *policy.Roles { return benchRoles }

func (e *benchEngine) Action(string) (*workflow.ActionSpec, bool) { return nil, false }

// Replays claims every request as new and keeps no answer: the replay claim
// without its commits.
func (e *benchEngine) Replays() *workflow.Replays { return e.replays }

var benchRoles, _ = policy.NewRoles([]policy.Role{{Name: "team_lead", Members: []string{leadGrace}}})
