package callback

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/signoff-dev/signoff/internal/stdwebhook"
	"github.com/signoff-dev/signoff/workflow"
)

// Retry schedule: after failed attempt n the next is due after FirstRetry
// doubled n-1 times, at most MaxRetry, less up to half of it at random (so
// that the events of an outage do not all come back at once); or after the
// Retry-After of a 429 or 503, at most MaxRetry.
const (
	FirstRetry = time.Second
	MaxRetry   = time.Hour
)

// DefaultTimeout bounds one POST, answer included.
const DefaultTimeout = 10 * time.Second

// Failpoints, for crash tests: before the POST of a claimed row, and after
// the receiver answered but before the answer is recorded.
const (
	FailBeforePost = "callback-before-post"
	FailAfterPost  = "callback-after-post"
)

// maxError bounds the last error kept on a row.
const maxError = 500

// Dispatcher delivers callback rows: it claims due rows of its kind by a
// compare-and-set (so that replicas share the queue), POSTs each event signed
// with every key, and records the outcome on the row. A run's events go out
// in the order they were queued: a row waits while an older one of its run is
// undelivered. A failing row is never dropped: it is retried on the schedule
// above, at most hourly, until the receiver takes it, and `signoff outbox
// --failing` shows it with its last error meanwhile.
type Dispatcher struct {
	Store storage.Store
	// Keys sign every event (several while a key rotates).
	Keys [][]byte
	// Allowed is the allow-list as it is now: a row whose URL it no longer
	// allows is not sent (it waits, failing, until the config allows it).
	Allowed func(url string) bool
	// Client sends the POSTs; by default one with DefaultTimeout that follows
	// no redirect (a 3xx is a failure, as the receiver must answer itself).
	Client *http.Client
	Clock  workflow.Clock // defaults to workflow.SystemClock
	// Jitter takes the random part out of a wait (d/2 to d by default).
	Jitter func(d time.Duration) time.Duration
	Logger *slog.Logger
	// ClaimFor is how long a claimed row is left to its claimer before
	// another may take it (a replica that died mid-delivery).
	ClaimFor time.Duration
	// Failpoint, when set, is called with FailBeforePost and FailAfterPost.
	Failpoint func(name string)
	// Parallel bounds the runs delivered at once (default 8), so that one
	// slow receiver does not hold up every other.
	Parallel int

	once   sync.Once
	client *http.Client
}

// perRun bounds the events of one run sent in one round, so that a run with
// many does not hold a slot while others wait.
const perRun = 20

// DeliverDue delivers the due callback rows of up to limit runs (0: 50), and
// returns how many rows were delivered. Only the oldest undelivered row of
// each run is looked at: a later one waits for it, and rows that wait never
// fill the round.
func (d *Dispatcher) DeliverDue(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		limit = 50
	}
	due, err := d.heads(ctx, "", limit)
	if err != nil {
		return 0, err
	}
	par := d.Parallel
	if par <= 0 {
		par = 8
	}
	var (
		mu        sync.Mutex
		delivered int
		errs      []error
		wg        sync.WaitGroup
		slots     = make(chan struct{}, par)
	)
	for _, m := range due {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			n, err := d.deliverRun(ctx, m)
			mu.Lock()
			delivered += n
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return delivered, errors.Join(errs...)
}

// deliverRun delivers m, the oldest undelivered row of its run, then the
// run's next rows while they are due, stopping at the first not delivered:
// the later ones wait for it.
func (d *Dispatcher) deliverRun(ctx context.Context, m *record.OutboxMessage) (int, error) {
	n := 0
	for m != nil && n < perRun {
		ok, err := d.deliver(ctx, m)
		if err != nil || !ok {
			return n, err
		}
		n++
		next, err := d.heads(ctx, m.RunID, 1)
		if err != nil || len(next) == 0 {
			return n, err
		}
		m = next[0]
	}
	return n, nil
}

// heads reads the due callback rows that are the oldest undelivered of
// their run (of run runID only, when set), at most limit.
func (d *Dispatcher) heads(ctx context.Context, runID string, limit int) ([]*record.OutboxMessage, error) {
	var ms []*record.OutboxMessage
	err := d.Store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		ms, err = tx.ListOutbox(ctx, storage.OutboxFilter{Kinds: []record.OutboxKind{Kind}, Heads: true, RunID: runID, DueBy: d.now(), Limit: limit})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the callback outbox: %w", err)
	}
	return ms, nil
}

// deliver claims one row, sends it and records the outcome. delivered is
// false when the row was not sent, or sent and not taken.
func (d *Dispatcher) deliver(ctx context.Context, m *record.OutboxMessage) (delivered bool, err error) {
	claim := d.ClaimFor
	if claim <= 0 {
		claim = time.Minute
	}
	m.Attempts++
	m.NextAttempt = d.now().Add(claim)
	err = d.Store.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return tx.UpdateOutbox(ctx, m) })
	if errors.Is(err, storage.ErrConflict) {
		return false, nil // another replica has it
	}
	if err != nil {
		return false, fmt.Errorf("claim callback row %d: %w", m.ID, err)
	}
	wait, sendErr := d.send(ctx, m)
	now := d.now()
	if sendErr == nil {
		m.DeliveredAt, m.LastError = now, ""
		d.log().Info("callback delivered", "outbox_id", m.ID, "run_id", m.RunID, "attempt", m.Attempts)
	} else {
		if wait <= 0 {
			wait = Backoff(m.Attempts, d.jitter)
		}
		m.NextAttempt, m.LastError = now.Add(wait), truncate(sendErr.Error())
		d.log().Warn("callback delivery failed", "outbox_id", m.ID, "run_id", m.RunID, "attempt", m.Attempts,
			"retry_in", wait.String(), "error", m.LastError)
	}
	if err := d.Store.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return tx.UpdateOutbox(ctx, m) }); err != nil {
		return false, fmt.Errorf("record delivery of callback row %d: %w", m.ID, err)
	}
	return sendErr == nil, nil
}

// send POSTs the row's event. wait is the receiver's Retry-After (0 when it
// gave none).
func (d *Dispatcher) send(ctx context.Context, m *record.OutboxMessage) (wait time.Duration, err error) {
	var p payload
	if err := json.Unmarshal(m.Payload, &p); err != nil || p.URL == "" || p.ID == "" {
		return 0, errors.New("the outbox row is not a readable callback event")
	}
	if d.Allowed == nil || !d.Allowed(p.URL) {
		return 0, errors.New("not sent: the URL is not allowed by api.callbacks.allow")
	}
	if len(d.Keys) == 0 {
		return 0, errors.New("not sent: no callback signing secret")
	}
	d.fail(FailBeforePost)
	body := []byte(p.Body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	now := d.now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "signoff")
	req.Header.Set(stdwebhook.HeaderID, p.ID)
	req.Header.Set(stdwebhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(stdwebhook.HeaderSignature, stdwebhook.Sign(d.Keys, p.ID, now, body))
	resp, err := d.httpClient().Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	d.fail(FailAfterPost)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return 0, nil
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		wait = stdwebhook.ParseRetryAfter(resp.Header.Get("Retry-After"), now, MaxRetry)
	}
	return wait, fmt.Errorf("the receiver answered %s", resp.Status)
}

// Backoff is the wait after failed attempt n (1-based): FirstRetry doubled
// n-1 times, at most MaxRetry, through jitter (nil: none).
func Backoff(n int, jitter func(time.Duration) time.Duration) time.Duration {
	d := MaxRetry
	if n < 1 {
		n = 1
	}
	if n <= 32 {
		d = min(FirstRetry<<(n-1), MaxRetry)
	}
	if jitter != nil {
		d = jitter(d)
	}
	return d
}

func (d *Dispatcher) jitter(w time.Duration) time.Duration {
	if d.Jitter != nil {
		return d.Jitter(w)
	}
	return w/2 + rand.N(w/2+1)
}

func (d *Dispatcher) httpClient() *http.Client {
	d.once.Do(func() {
		d.client = d.Client
		if d.client == nil {
			d.client = &http.Client{
				Timeout:       DefaultTimeout,
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			}
		}
	})
	return d.client
}

func (d *Dispatcher) now() time.Time {
	if d.Clock != nil {
		return d.Clock.Now().UTC().Truncate(time.Millisecond)
	}
	return time.Now().UTC().Truncate(time.Millisecond)
}

func (d *Dispatcher) fail(name string) {
	if d.Failpoint != nil {
		d.Failpoint(name)
	}
}

func (d *Dispatcher) log() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func truncate(s string) string {
	if len(s) <= maxError {
		return s
	}
	// Cut on a rune boundary, so that the row stays valid text.
	cut := maxError
	for cut > 0 && s[cut]&0xc0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
