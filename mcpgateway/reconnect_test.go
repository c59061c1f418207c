package mcpgateway_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/mcpgateway"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// flaky is an upstream that can go down and come back: each dial while up
// connects a fresh session of the same notes server, each while down fails.
type flaky struct {
	t     testing.TB
	notes *notes
	mu    sync.Mutex
	down  bool
	dials int
	cut   func() // breaks the connection of the last dial
}

func (f *flaky) dial() mcp.Transport {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials++
	if f.down {
		return refusing{}
	}
	server, client := mcp.NewInMemoryTransports()
	under := &cutTransport{Transport: server}
	ss, err := f.notes.server().Connect(context.Background(), under, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { ss.Close() })
	f.cut = func() { under.conn.Close() }
	return client
}

func (f *flaky) set(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

type refusing struct{}

func (refusing) Connect(context.Context) (mcp.Connection, error) {
	return nil, errors.New("connection refused")
}

func withFlaky(f *flaky) option {
	return func(h *harness, ups *[]mcpgateway.Upstream) {
		f.t, f.notes = h.t, newNotes()
		*ups = append(*ups, mcpgateway.Upstream{Name: "tickets", Transport: f.dial(), Dial: f.dial})
	}
}

// TestUpstreamReconnects: an upstream whose connection ends is reconnected
// on the next call; while it cannot be reached a call is a tool error at
// once, nothing is proposed, and reconnects are spaced by a backoff.
func TestUpstreamReconnects(t *testing.T) {
	f := &flaky{}
	h := newHarness(t, withFlaky(f))
	clk := clocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	mcpgateway.SetNow(h.ups, clk.Now)
	cs := h.client(h.gateway(time.Nanosecond, 0), nil)
	read := map[string]any{"title": "x"}
	if a := call(t, cs, "tickets.read_note", read); a.isError {
		t.Fatalf("read = %+v", a)
	}
	f.set(true)
	f.cut()
	mcpgateway.WaitLost(h.ups, "tickets")
	runs := func() int {
		t.Helper()
		rs, err := h.engine.List(context.Background(), storage.RunFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	before, dials := runs(), f.dials
	for _, c := range []struct {
		name, tool string
		want       string
		dialed     int // reconnects tried by the call
	}{
		{"the first call after the loss tries once", "tickets.read_note", "cannot be reached", 1},
		{"within the backoff nothing is tried", "tickets.write_note", "tries to reconnect in 1s", 0},
	} {
		a := call(t, cs, c.tool, map[string]any{"title": "x"})
		if !a.isError || !strings.Contains(a.text, c.want) || !strings.Contains(a.text, "Nothing was proposed or run") {
			t.Fatalf("%s: %+v, want a tool error saying %q", c.name, a, c.want)
		}
		if f.dials-dials != c.dialed {
			t.Fatalf("%s: %d reconnects, want %d", c.name, f.dials-dials, c.dialed)
		}
		dials = f.dials
	}
	if n := runs(); n != before {
		t.Fatalf("%d runs during the outage, want none new", n-before)
	}
	clk.Advance(time.Second)
	if a := call(t, cs, "tickets.read_note", read); !a.isError || !strings.Contains(a.text, "tries to reconnect in 2s") {
		t.Fatalf("a failed reconnect again = %+v, want the backoff doubled", a)
	}
	f.set(false)
	clk.Advance(2 * time.Second)
	if a := call(t, cs, "tickets.read_note", read); a.isError || f.notes.reads.Load() != 2 {
		t.Fatalf("after the upstream is back = %+v (reads %d), want the read answered", a, f.notes.reads.Load())
	}
	if a := call(t, cs, "notes.read_note", read); a.isError {
		t.Fatalf("another upstream during all this = %+v", a)
	}
}

// TestApprovedCallRetriedWhenUpstreamDown: an approved call whose upstream
// cannot be reached never reached it, so that it is retried as the
// engine's retry policy says, and the upstream is called once when back.
func TestApprovedCallRetriedWhenUpstreamDown(t *testing.T) {
	f := &flaky{}
	h := newHarness(t, withFlaky(f))
	clk := clocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	h.wcfg.Clock, h.wcfg.Backoff = clk, func(int) time.Duration { return 10 * time.Minute }
	var err error
	if h.engine, err = workflow.New(h.wcfg); err != nil {
		t.Fatal(err)
	}
	mcpgateway.SetNow(h.ups, clk.Now)
	cs := h.client(h.gateway(time.Nanosecond, 0), nil)
	first := call(t, cs, "tickets.write_note", note)
	h.decide(first.runID, record.VerdictApprove, "")
	f.set(true)
	f.cut()
	mcpgateway.WaitLost(h.ups, "tickets")
	a := call(t, cs, "tickets.write_note", note)
	if a.isError || a.runID != first.runID || !strings.Contains(a.text, "cannot be reached") {
		t.Fatalf("the approved call during the outage = %+v, want run %s carried out later, saying why", a, first.runID)
	}
	if st := h.status(first.runID); st != record.StatusExecuting {
		t.Fatalf("run is %s, want executing (to be retried)", st)
	}
	f.set(false)
	clk.Advance(11 * time.Minute) // the engine's wait before the retry
	a = call(t, cs, "tickets.write_note", note)
	if a.isError || a.text != "wrote plan" {
		t.Fatalf("the call once the upstream is back = %+v, want its answer", a)
	}
	if st, n := h.status(first.runID), f.notes.writes.Load(); st != record.StatusDone || n != 1 {
		t.Fatalf("run is %s with %d writes, want done with 1", st, n)
	}
}
