package mcpgateway_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/internal/bearer"
	"github.com/signoff-dev/signoff/mcpgateway"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/postgres"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/workflow"
)

// The figures of docs/performance.md ("The MCP gateway"):
//
//	go test ./mcpgateway -run '^$' -bench AllowedCall -benchtime 1000x
//	go test ./mcpgateway -run '^$' -bench GatedCall -benchtime 300x
//
// BenchmarkAllowedCall is the gateway's overhead for a call the policy lets
// through: the same read_note call, made by an SDK client straight to the
// upstream and through the gateway (a run of its own: the proposal, the
// intent, the call, the receipt), alternating, so that both see the same
// machine. Over the SDK's in-memory transports and over streamable HTTP on
// loopback (the upstream and the gateway both served over it). It reports
// each path's p50 and p99 and their differences.
func BenchmarkAllowedCall(b *testing.B) {
	for _, transport := range []string{"memory", "http"} {
		b.Run("transport="+transport, func(b *testing.B) {
			direct, gated := allowedPaths(b, transport)
			b.ResetTimer()
			dl, gl := allowedCalls(b, direct, gated, b.N)
			b.StopTimer()
			dp50, dp99 := percentiles(dl)
			gp50, gp99 := percentiles(gl)
			b.ReportMetric(ms(dp50), "direct_p50_ms")
			b.ReportMetric(ms(dp99), "direct_p99_ms")
			b.ReportMetric(ms(gp50), "gateway_p50_ms")
			b.ReportMetric(ms(gp99), "gateway_p99_ms")
			b.ReportMetric(ms(gp50-dp50), "overhead_p50_ms")
			b.ReportMetric(ms(gp99-dp99), "overhead_p99_ms")
		})
	}
}

// allowedCalls makes n calls on each path, alternating which goes first so
// that neither always finds the other's garbage to collect, and returns
// each call's time.
func allowedCalls(tb testing.TB, direct, gated path, n int) (dl, gl []time.Duration) {
	args := map[string]any{"title": "plan"}
	for i := range n {
		if i%2 == 0 {
			dl = append(dl, timedCall(tb, direct, args))
			gl = append(gl, timedCall(tb, gated, args))
		} else {
			gl = append(gl, timedCall(tb, gated, args))
			dl = append(dl, timedCall(tb, direct, args))
		}
	}
	return dl, gl
}

type path struct {
	cs   *mcp.ClientSession
	tool string
}

// allowedPaths are an SDK client of the upstream and one of a gateway in
// front of it (on SQLite), over transport.
func allowedPaths(tb testing.TB, transport string) (direct, gated path) {
	if transport == "memory" {
		h := newHarness(tb, quietly)
		st, ct := mcp.NewInMemoryTransports()
		if _, err := h.notes.server().Connect(context.Background(), st, nil); err != nil {
			tb.Fatal(err)
		}
		return path{connectClient(tb, ct), "read_note"}, path{h.client(h.gateway(time.Second, 0), nil), "notes.read_note"}
	}
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newNotes().server() },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	tb.Cleanup(upstream.Close)
	h := newHarness(tb, quietly, func(_ *harness, ups *[]mcpgateway.Upstream) {
		(*ups)[0] = mcpgateway.HTTPUpstream("notes", upstream.URL, nil)
	})
	handler, err := h.gateway(time.Second, 0).Handler(mcpgateway.HTTPConfig{Rate: 1e6, Burst: 1e6, Tokens: []bearer.Token{
		{ID: "coder", SHA256: sha256.Sum256([]byte("sk_coder")), Requester: "agent:coder"}}})
	if err != nil {
		tb.Fatal(err)
	}
	gw := httptest.NewServer(handler)
	tb.Cleanup(gw.Close)
	return path{connectClient(tb, mcpgateway.HTTPUpstream("direct", upstream.URL, nil).Transport), "read_note"},
		path{connectClient(tb, mcpgateway.HTTPUpstream("signoff", gw.URL, map[string]string{"Authorization": "Bearer sk_coder"}).Transport), "notes.read_note"}
}

func quietly(h *harness, _ *[]mcpgateway.Upstream) { h.quiet = true }

func connectClient(tb testing.TB, t mcp.Transport) *mcp.ClientSession {
	tb.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), t, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

func timedCall(tb testing.TB, p path, args any) time.Duration {
	start := time.Now()
	a := call(tb, p.cs, p.tool, args)
	d := time.Since(start)
	if a.isError || a.text != "note plan: " {
		tb.Fatalf("%s = %+v, want the upstream's answer", p.tool, a)
	}
	return d
}

// BenchmarkGatedCall is gated calls end to end, at 1, 8 and 64 at once: a
// write_note call answers that it waits (the run is made and waits for a
// team lead), the engine's Decide approves it, the same call made again
// carries it out (the intent, the upstream's call, the receipt) and gets
// the upstream's answer. It reports whole calls a second, on SQLite and,
// with SIGNOFF_TEST_POSTGRES, on PostgreSQL.
func BenchmarkGatedCall(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, clients := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("db=%s/clients=%d", db, clients), func(b *testing.B) {
				h, sessions := gatedHarness(b, db, clients)
				b.ResetTimer()
				elapsed := gatedCalls(b, h, sessions, b.N)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
			})
		}
	}
}

// gatedHarness is a gateway that holds no gated call (each answers that it
// waits at once) on db, with clients connected to it.
func gatedHarness(tb testing.TB, db string, clients int) (*harness, []*mcp.ClientSession) {
	opts := []option{quietly}
	if db == "postgres" {
		opts = append(opts, onPostgres)
	}
	h := newHarness(tb, opts...)
	g := h.gateway(time.Nanosecond, 0)
	sessions := make([]*mcp.ClientSession, clients)
	for i := range sessions {
		sessions[i] = h.client(g, nil)
	}
	return h, sessions
}

// gatedCalls makes n gated calls, each a new note, spread over the
// sessions at once, and checks that the upstream wrote each once.
func gatedCalls(tb testing.TB, h *harness, sessions []*mcp.ClientSession, n int) time.Duration {
	var (
		next   atomic.Int64
		failed atomic.Value
		wg     sync.WaitGroup
	)
	writes := h.notes.writes.Load()
	start := time.Now()
	for _, cs := range sessions {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n) && failed.Load() == nil; i = next.Add(1) {
				if err := gatedCall(h, cs, fmt.Sprintf("note-%d", i)); err != nil {
					failed.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		tb.Fatal(err)
	}
	if got := h.notes.writes.Load() - writes; got != int32(n) {
		tb.Fatalf("the upstream wrote %d times for %d approved calls", got, n)
	}
	return elapsed
}

// gatedCall is one gated call's life: waits, approved, made again, answered
// from the receipt.
func gatedCall(h *harness, cs *mcp.ClientSession, title string) error {
	ctx := context.Background()
	args := map[string]any{"title": title, "body": "ship on friday"}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "notes.write_note", Arguments: args})
	if err != nil {
		return err
	}
	id, _ := res.Meta["signoff/run_id"].(string)
	if id == "" || res.IsError {
		return fmt.Errorf("first call of %s = %+v, want it waiting with its run id", title, res.Content)
	}
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: id, Approver: record.Person{ID: "U0LEAD"},
		Verdict: record.VerdictApprove, Via: record.ViaCLI}); err != nil {
		return err
	}
	if res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "notes.write_note", Arguments: args}); err != nil {
		return err
	}
	if txt, ok := res.Content[0].(*mcp.TextContent); res.IsError || !ok || txt.Text != "wrote "+title {
		return fmt.Errorf("the call of %s made again = %+v, want the upstream's answer", title, res.Content)
	}
	return nil
}

// onPostgres puts the harness's store in a schema of its own on the server
// of SIGNOFF_TEST_POSTGRES (skipping without one).
func onPostgres(h *harness, _ *[]mcpgateway.Upstream) {
	h.open = func(t testing.TB) storage.Store {
		dsn := pgtest.Schema(t)
		if _, err := postgres.Migrate(context.Background(), dsn); err != nil {
			t.Fatal(err)
		}
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
}

func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestBenchmarksRunOnce runs the benchmarks' bodies briefly (the
// PostgreSQL ones with SIGNOFF_TEST_POSTGRES): the figures of the docs come
// from code that still works, and every call in them was answered as a
// user would see it (the upstream's answer, once per approved call).
func TestBenchmarksRunOnce(t *testing.T) {
	for _, transport := range []string{"memory", "http"} {
		t.Run("allowed/transport="+transport, func(t *testing.T) {
			direct, gated := allowedPaths(t, transport)
			if dl, gl := allowedCalls(t, direct, gated, 3); len(dl) != 3 || len(gl) != 3 {
				t.Fatalf("%d and %d calls timed, want 3 each", len(dl), len(gl))
			}
		})
	}
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run("gated/db="+db, func(t *testing.T) {
			h, sessions := gatedHarness(t, db, 4)
			gatedCalls(t, h, sessions, 8)
		})
	}
}
