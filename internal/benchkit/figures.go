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
	// CPUPerOp is the CPU time this process (the engine, its store on
	// SQLite, and the clients driving it) spent per operation, in
	// milliseconds: steadier than rates on a busy machine. PostgreSQL's
	// own is not in it. 0 where the system cannot say.
	CPUPerOp float64 `json:"cpu_ms_per_op,omitempty"`
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
		cpu := cpuMeter()
		n, took, err := Drive(ctx, c, d, func(ctx context.Context) (bool, error) { return true, t.RawCommit(ctx, body) })
		if err != nil {
			return nil, fmt.Errorf("raw commits with %d clients: %w", c, err)
		}
		out = append(out, Figure{Name: "raw_commit", Clients: c, Ops: n, Seconds: took.Seconds(), PerSec: float64(n) / took.Seconds(),
			CPUPerOp: cpu(n)})
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

// figure runs one measurement and reads the store's commits, flushes and size
// around it.
func (t *Target) figure(ctx context.Context, name string, clients int, run func() (int64, time.Duration, error)) (Figure, error) {
	size0, err := t.Size(ctx)
	if err != nil {
		return Figure{}, err
	}
	sync0, err := t.Syncs(ctx)
	if err != nil {
		return Figure{}, err
	}
	rows0, err := t.rowsWritten(ctx)
	if err != nil {
		return Figure{}, err
	}
	commits0 := t.Store.Commits()
	cpu := cpuMeter()
	n, took, err := run()
	if err != nil {
		return Figure{}, fmt.Errorf("%s with %d clients: %w", name, clients, err)
	}
	cpuPerOp := cpu(n)
	commits := t.Store.Commits() - commits0
	sync1, err := t.Syncs(ctx)
	if err != nil {
		return Figure{}, err
	}
	size1, err := t.Size(ctx)
	if err != nil {
		return Figure{}, err
	}
	rows1, err := t.rowsWritten(ctx)
	if err != nil {
		return Figure{}, err
	}
	f := Figure{Name: name, Clients: clients, Ops: n, Seconds: took.Seconds(), PerSec: float64(n) / took.Seconds()}
	if n > 0 {
		f.CommitsPerOp = float64(commits) / float64(n)
		f.SyncsPerOp = float64(sync1-sync0) / float64(n)
		f.BytesPerOp = float64(size1-size0) / float64(n)
		f.RowsPerOp = float64(rows1-rows0) / float64(n)
		f.CPUPerOp = cpuPerOp
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
