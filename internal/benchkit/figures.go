package benchkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// Figure is one measured rate.
type Figure struct {
	// Name is raw_commit, suspend, decide, e2e, click, click_bare or
	// api_submit (POST /v1/runs over loopback HTTP).
	Name    string  `json:"name"`
	Clients int     `json:"clients"`
	Ops     int64   `json:"ops"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_sec"`
	// CommitsPerOp: Updates that committed, per operation.
	CommitsPerOp float64 `json:"commits_per_op,omitempty"`
	// SyncsPerOp: durable flushes per operation (see Target.Syncs).
	SyncsPerOp float64 `json:"fsyncs_per_op,omitempty"`
	// BytesPerOp: growth of the store per operation.
	BytesPerOp float64 `json:"bytes_per_op,omitempty"`
	// RowsPerOp: rows inserted, updated or deleted per operation, in every
	// table (see Target.RowsWritten); 0 where not counted.
	RowsPerOp float64 `json:"rows_per_op,omitempty"`
	// RoundTripsPerOp: the store's round trips to the server per operation
	// (statements sent alone, BEGIN and COMMIT included, and pipelined
	// batches; see Target.RoundTrips); 0 on SQLite, which has no server.
	RoundTripsPerOp float64 `json:"round_trips_per_op,omitempty"`
	// CPUPerOp is the CPU time this process (the engine, its store on
	// SQLite, and the clients driving it) spent per operation, in
	// milliseconds: steadier than rates on a busy machine. PostgreSQL's
	// own is ServerCPUPerOp. 0 where the system cannot say.
	CPUPerOp float64 `json:"cpu_ms_per_op,omitempty"`
	// ServerCPUPerOp is the CPU time the database server's processes spent
	// per operation, in milliseconds (PostgreSQL on this machine, the
	// whole server's: see Target.ServerCPU); 0 where not measured.
	ServerCPUPerOp float64 `json:"server_cpu_ms_per_op,omitempty"`
	// P50 and P99 are latencies of clicks, in milliseconds.
	P50 float64 `json:"p50_ms,omitempty"`
	P99 float64 `json:"p99_ms,omitempty"`
}

// Measure runs the store figures on t: the raw single-row commit at one
// client and at each number of clients t.RawClients allows, then at each
// number of clients suspend (submit a gated proposal), decide (approve
// the runs suspend left waiting) and e2e (submit, wait, approve, execute,
// done), each for about d.
func Measure(ctx context.Context, t *Target, eng *workflow.Engine, clients []int, d time.Duration) ([]Figure, error) {
	var out []Figure
	body := Payload(2048)
	rawAt := []int{1}
	for _, c := range clients {
		if c > 1 && c <= t.RawClients {
			rawAt = append(rawAt, c)
		}
	}
	for _, c := range rawAt {
		cpu, server := cpuMeter(), t.serverCPUMeter()
		n, took, err := Drive(ctx, c, d, func(ctx context.Context) (bool, error) { return true, t.RawCommit(ctx, body) })
		if err != nil {
			return nil, fmt.Errorf("raw commits with %d clients: %w", c, err)
		}
		f := Figure{Name: "raw_commit", Clients: c, Ops: n, Seconds: took.Seconds(), PerSec: float64(n) / took.Seconds(), CPUPerOp: cpu(n)}
		if f.ServerCPUPerOp, err = server(n); err != nil {
			return nil, fmt.Errorf("raw commits with %d clients: %w", c, err)
		}
		out = append(out, f)
	}
	for _, c := range clients {
		var (
			mu  sync.Mutex
			ids []string
		)
		f, err := t.figure(ctx, "suspend", c, func() (int64, time.Duration, error) {
			return Drive(ctx, c, d, func(ctx context.Context) (bool, error) {
				id, err := Suspend(ctx, eng)
				if err == nil {
					mu.Lock()
					ids = append(ids, id)
					mu.Unlock()
				}
				return true, err
			})
		})
		if err != nil {
			return nil, err
		}
		out = append(out, f)
		q := NewQueue(ids)
		f, err = t.figure(ctx, "decide", c, func() (int64, time.Duration, error) {
			return Drive(ctx, c, d, func(ctx context.Context) (bool, error) {
				id, ok := q.Take()
				if !ok {
					return false, nil
				}
				return true, Decide(ctx, eng, id)
			})
		})
		if err != nil {
			return nil, err
		}
		out = append(out, f)
		f, err = t.figure(ctx, "e2e", c, func() (int64, time.Duration, error) {
			return Drive(ctx, c, d, func(ctx context.Context) (bool, error) { return true, EndToEnd(ctx, eng) })
		})
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// figure runs one measurement of a driver and reads the store's commits,
// flushes, size, rows and round trips around it.
func (t *Target) figure(ctx context.Context, name string, clients int, run func() (int64, time.Duration, error)) (Figure, error) {
	return t.Count(ctx, name, clients, func() (Figure, error) {
		n, took, err := run()
		return Figure{Ops: n, Seconds: took.Seconds(), PerSec: float64(n) / took.Seconds()}, err
	})
}

// counters are what the store has done so far, read before and after a
// figure.
type counters struct {
	size, syncs, rows, commits, roundTrips int64
}

func (t *Target) counters(ctx context.Context) (counters, error) {
	var (
		c   counters
		err error
	)
	if c.size, err = t.Size(ctx); err != nil {
		return c, err
	}
	if c.syncs, err = t.Syncs(ctx); err != nil {
		return c, err
	}
	if c.rows, err = t.rowsWritten(ctx); err != nil {
		return c, err
	}
	c.commits = t.Store.Commits()
	if t.RoundTrips != nil {
		c.roundTrips = t.RoundTrips()
	}
	return c, nil
}

// Count runs one measurement (a driver's or the clicks' over HTTP, which
// say how many operations they made in how long) and adds what the store
// did for them, per operation: commits, flushes, bytes, rows and round
// trips, the process's CPU time unless run measured its own, and the
// database server's where it is measured.
func (t *Target) Count(ctx context.Context, name string, clients int, run func() (Figure, error)) (Figure, error) {
	c0, err := t.counters(ctx)
	if err != nil {
		return Figure{}, err
	}
	cpu, server := cpuMeter(), t.serverCPUMeter()
	f, err := run()
	if err != nil {
		return Figure{}, fmt.Errorf("%s with %d clients: %w", name, clients, err)
	}
	cpuPerOp := cpu(f.Ops)
	if f.ServerCPUPerOp, err = server(f.Ops); err != nil {
		return Figure{}, fmt.Errorf("%s with %d clients: %w", name, clients, err)
	}
	c1, err := t.counters(ctx)
	if err != nil {
		return Figure{}, err
	}
	f.Name, f.Clients = name, clients
	if n := float64(f.Ops); n > 0 {
		f.CommitsPerOp = float64(c1.commits-c0.commits) / n
		f.SyncsPerOp = float64(c1.syncs-c0.syncs) / n
		f.BytesPerOp = float64(c1.size-c0.size) / n
		f.RowsPerOp = float64(c1.rows-c0.rows) / n
		f.RoundTripsPerOp = float64(c1.roundTrips-c0.roundTrips) / n
		if f.CPUPerOp == 0 {
			f.CPUPerOp = cpuPerOp
		}
	}
	return f, nil
}

func (t *Target) rowsWritten(ctx context.Context) (int64, error) {
	if t.RowsWritten == nil {
		return 0, nil
	}
	return t.RowsWritten(ctx)
}

// Click is one signed Slack request.
type Click struct {
	Body   []byte
	Header http.Header
}

// Clicks posts clicks to url+path from clients goroutines, each click once,
// until they run out or d has passed (d <= 0: no time limit), and returns the rate and the p50 and
// p99 latencies. next gives the i-th click (false when there is none). Every
// answer must be 2xx (a Slack click answers 200, an API submit 201).
func Clicks(ctx context.Context, url string, clients int, d time.Duration, next func(i int) (Click, bool)) (Figure, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: clients, MaxIdleConnsPerHost: clients}}
	defer client.CloseIdleConnections()
	var (
		mu  sync.Mutex
		lat []time.Duration
		i   int
	)
	take := func() (Click, bool) {
		mu.Lock()
		defer mu.Unlock()
		c, ok := next(i)
		i++
		return c, ok
	}
	cpu := cpuMeter()
	n, took, err := Drive(ctx, clients, d, func(ctx context.Context) (bool, error) {
		c, ok := take()
		if !ok {
			return false, nil
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(c.Body))
		if err != nil {
			return false, err
		}
		req.Header = c.Header
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return false, fmt.Errorf("click: %w", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		l := time.Since(t0)
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return false, fmt.Errorf("click: status %d", resp.StatusCode)
		}
		mu.Lock()
		lat = append(lat, l)
		mu.Unlock()
		return true, nil
	})
	if err != nil {
		return Figure{}, err
	}
	f := Figure{Clients: clients, Ops: n, Seconds: took.Seconds(), PerSec: float64(n) / took.Seconds(), CPUPerOp: cpu(n)}
	if len(lat) > 0 {
		slices.Sort(lat)
		pct := func(p float64) float64 {
			return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
		}
		f.P50, f.P99 = pct(0.50), pct(0.99)
	}
	return f, nil
}

// serverCPUMeter starts measuring the database server's CPU time (see
// Target.ServerCPU): the function it returns gives the time since, per
// operation of n, in milliseconds (0 where it is not measured).
func (t *Target) serverCPUMeter() func(n int64) (float64, error) {
	if t.ServerCPU == nil {
		return func(int64) (float64, error) { return 0, nil }
	}
	start, err := t.ServerCPU()
	return func(n int64) (float64, error) {
		if err != nil || n == 0 {
			return 0, err
		}
		now, err := t.ServerCPU()
		if err != nil {
			return 0, err
		}
		return float64(now.Since(start).Microseconds()) / 1000 / float64(n), nil
	}
}

// cpuMeter starts measuring this process's CPU time: the function it
// returns gives the time since, per operation of n, in milliseconds (0 when
// the system cannot say).
func cpuMeter() func(n int64) float64 {
	start, ok := CPUTime()
	return func(n int64) float64 {
		now, _ := CPUTime()
		if !ok || n == 0 {
			return 0
		}
		return float64((now - start).Microseconds()) / 1000 / float64(n)
	}
}
