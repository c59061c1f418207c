package callback_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/signoff-dev/signoff/api"
	"github.com/signoff-dev/signoff/callback"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/internal/stdwebhook"
	"github.com/signoff-dev/signoff/keyring"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/postgres"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// target does what it is asked, once per key, and echoes the card (a
// redact: field) at the top of its answer, deeper, and inside a message.
type target struct{}

func (target) Check(context.Context, record.Action) error { return nil }
func (target) Execute(_ context.Context, key string, _ record.Action) (record.Receipt, error) {
	return record.Receipt{ID: key, Detail: json.RawMessage(`{"card":"4242424242424242","ok":true,` +
		`"echo":{"request":{"card":"4242424242424242","amount":12}},"log":["charged card 4242424242424242"]}`)}, nil
}
func (target) Lookup(context.Context, string) (record.Receipt, bool, error) {
	return record.Receipt{}, false, nil
}

const schema = `{"type":"object","additionalProperties":false,"required":["card","amount"],
  "properties":{"card":{"type":"string"},"amount":{"type":"number"}}}`

// receiver is an agent's callback endpoint: it verifies every request as a
// receiver must and records what it got. answer decides the status of each
// request (after it was recorded).
type receiver struct {
	t      testing.TB
	clock  *clocktest.Clock
	mu     sync.Mutex
	got    []callback.Event
	bad    []string
	answer func(n int, path string) int
	srv    *httptest.Server
}

func newReceiver(t testing.TB, c *clocktest.Clock) *receiver {
	r := &receiver{t: t, clock: c, answer: func(int, string) int { return http.StatusNoContent }}
	keys, err := stdwebhook.ParseSecrets(secret)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		problem := ""
		if err := stdwebhook.Verify(keys, req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp"),
			req.Header.Get("webhook-signature"), body, c.Now(), 5*time.Minute); err != nil {
			problem = err.Error()
		}
		var ev callback.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			problem = "body: " + err.Error()
		} else if err := matchesDocument(body); err != nil {
			problem = "the event breaks api/openapi.yaml: " + err.Error()
		}
		switch {
		case req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json":
			problem = req.Method + " " + req.Header.Get("Content-Type")
		case ev.ID != req.Header.Get("webhook-id"):
			problem = "the event id " + ev.ID + " is not the webhook-id " + req.Header.Get("webhook-id")
		}
		if problem != "" {
			r.bad = append(r.bad, problem)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.got = append(r.got, ev)
		w.WriteHeader(r.answer(len(r.got), req.URL.Path))
	}))
	t.Cleanup(r.srv.Close)
	t.Cleanup(func() {
		if len(r.bad) > 0 {
			t.Errorf("the receiver refused requests: %q", r.bad)
		}
	})
	return r
}

// eventSchema is the CallbackEvent schema of api/openapi.yaml, loaded once.
var eventSchema = sync.OnceValues(func() (*openapi3.Schema, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		return nil, err
	}
	ref := doc.Components.Schemas["CallbackEvent"]
	if ref == nil {
		return nil, errors.New("no CallbackEvent schema")
	}
	return ref.Value, nil
})

// matchesDocument holds an event's body to the schema the API documents for
// it, so that an event type or field the document lacks fails here.
func matchesDocument(body []byte) error {
	s, err := eventSchema()
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	return s.VisitJSON(v, openapi3.MultiErrors())
}

func (r *receiver) events() []callback.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

type env struct {
	t      testing.TB
	clock  *clocktest.Clock
	store  storage.Store
	engine *workflow.Engine
	disp   *callback.Dispatcher
	recv   *receiver
}

func newEnv(t testing.TB) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "signoff.db"))
	if err != nil {
		t.Fatal(err)
	}
	return newEnvOn(t, st)
}

// newEnvOn is newEnv on a store of the caller's.
// Each tweak changes its one rule.
func newEnvOn(t testing.TB, st storage.Store, tweaks ...func(*policy.Rule)) *env {
	t.Helper()
	everything := policy.Rule{Name: "everything", When: "true", Risk: "high",
		Approval:   &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(3600)},
		BreakGlass: &record.BreakGlass{Role: "team_lead", Review: record.BreakGlassReview{Role: "team_lead", Within: 3600}}}
	for _, f := range tweaks {
		f(&everything)
	}
	return newEnvWith(t, st, everything)
}

// newEnvWith is newEnvOn with the one rule of the caller's.
func newEnvWith(t testing.TB, st storage.Store, rule policy.Rule) *env {
	t.Helper()
	c := clocktest.New(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	t.Cleanup(func() { st.Close() })
	roles, err := policy.NewRoles([]policy.Role{
		{Name: "agent", Members: []string{"agent:resolver"}},
		{Name: "team_lead", Members: []string{"U0LEAD0001", "U0LEAD0002"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := policy.New("rev-1", []policy.Rule{rule}, roles)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := workflow.NewActionSpec("charge", []byte(schema), target{}, []string{"card"})
	if err != nil {
		t.Fatal(err)
	}
	recv := newReceiver(t, c)
	prefix := recv.srv.URL + "/hooks/"
	allowed := func(u string) bool { return strings.HasPrefix(u, prefix) }
	// Sealed, as a server with keys runs: the hook is shown the run in the
	// transaction that seals it.
	line, err := keyring.NewLine("test")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := keyring.Parse(line + "\n")
	if err != nil {
		t.Fatal(err)
	}
	hook := callback.Hook{}
	eng, err := workflow.New(workflow.Config{Store: st, Policy: policy, Roles: roles, Clock: c, Keys: ring,
		Actions: map[string]*workflow.ActionSpec{"charge": spec}, Hooks: []workflow.Hook{hook},
		CallbackAllowed: allowed, CallbackPrefixes: []string{prefix}})
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := stdwebhook.ParseSecrets(secret)
	disp := &callback.Dispatcher{Outbox: eng.Outbox(), Keys: keys, Allowed: allowed, Clock: c,
		Jitter: func(d time.Duration) time.Duration { return d }, ClaimFor: time.Minute}
	return &env{t: t, clock: c, store: st, engine: eng, disp: disp, recv: recv}
}

func (e *env) submit(task string) *record.Run {
	e.t.Helper()
	run, err := e.engine.Submit(context.Background(), &workflow.Proposal{
		TaskID: task, Requester: record.Person{ID: "agent:resolver"},
		Actions:     []record.Action{{Name: "charge", Args: json.RawMessage(`{"card":"4242424242424242","amount":12}`)}},
		CallbackURL: e.recv.srv.URL + "/hooks/" + task,
	})
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return run
}

func (e *env) approve(id string) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.engine.Decide(ctx, workflow.DecideInput{RunID: id, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.engine.Resume(ctx, id); err != nil {
		e.t.Fatal(err)
	}
}

// drain delivers until nothing is due, moving the clock to each next attempt,
// at most rounds times.
func (e *env) drain(rounds int) {
	e.t.Helper()
	for range rounds {
		if _, err := e.disp.DeliverDue(context.Background(), 0); err != nil {
			e.t.Fatal(err)
		}
		rows := e.undelivered(false)
		if len(rows) == 0 {
			return
		}
		// To the soonest attempt to come: a row due now waits behind an older
		// row of its run, which is one of those.
		var next time.Time
		for _, m := range rows {
			if m.NextAttempt.After(e.clock.Now()) && (next.IsZero() || m.NextAttempt.Before(next)) {
				next = m.NextAttempt
			}
		}
		if !next.IsZero() {
			e.clock.Advance(next.Sub(e.clock.Now()))
		}
	}
	for _, m := range e.undelivered(false) {
		e.t.Logf("undelivered: row %d of run %s, attempts %d, next %s, error %q", m.ID, m.RunID, m.Attempts, m.NextAttempt, m.LastError)
	}
	e.t.Fatalf("still undelivered after %d rounds", rounds)
}

func (e *env) undelivered(failing bool) []*record.OutboxMessage {
	e.t.Helper()
	var ms []*record.OutboxMessage
	if err := e.store.View(context.Background(), func(ctx context.Context, tx storage.Tx) error {
		var err error
		ms, err = tx.ListOutbox(ctx, storage.OutboxFilter{Kinds: []record.OutboxKind{callback.Kind}, Failing: failing})
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return ms
}

// TestGatedRunSendsWaitingThenDone: a run with a callback URL tells its agent
// that it waits, then, after the approval, that it is done; each event is
// signed, has its own id, shows the status it announces and hides what the
// action's redact: list hides.
func TestGatedRunSendsWaitingThenDone(t *testing.T) {
	for _, driver := range []struct {
		name string
		open func(t *testing.T) *env
	}{
		{"sqlite", func(t *testing.T) *env { return newEnv(t) }},
		{"postgres", func(t *testing.T) *env {
			dsn := pgtest.Schema(t)
			if _, err := postgres.Migrate(context.Background(), dsn); err != nil {
				t.Fatal(err)
			}
			st, err := postgres.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			return newEnvOn(t, st)
		}},
	} {
		t.Run(driver.name, func(t *testing.T) { testWaitingThenDone(t, driver.open(t)) })
	}
}

func testWaitingThenDone(t *testing.T, e *env) {
	run := e.submit("T-1")
	e.drain(1)
	e.approve(run.ID)
	e.drain(1)
	got := e.recv.events()
	if len(got) != 2 {
		t.Fatalf("got %d events, want 2: %+v", len(got), got)
	}
	for i, want := range []struct {
		typ    string
		status record.Status
	}{{"run.waiting", record.StatusWaitingApproval}, {"run.done", record.StatusDone}} {
		ev := got[i]
		if ev.Type != want.typ || ev.Run == nil || ev.Run.ID != run.ID || ev.Run.Status != want.status {
			t.Errorf("event %d: %s of run %v, want %s with status %s", i+1, ev.Type, ev.Run, want.typ, want.status)
			continue
		}
		if !strings.HasPrefix(ev.ID, "evt_") {
			t.Errorf("event id %q", ev.ID)
		}
		b, _ := json.Marshal(ev.Run)
		if strings.Contains(string(b), "4242424242424242") || !strings.Contains(string(b), "[redacted]") {
			t.Errorf("event %d shows the card number: %s", i+1, b)
		}
	}
	if got[0].ID == got[1].ID {
		t.Errorf("two events share the id %s", got[0].ID)
	}
	if len(got[1].Run.Operations) != 1 || len(got[1].Run.Decisions) != 1 {
		t.Errorf("the done event shows operations %+v, decisions %+v", got[1].Run.Operations, got[1].Run.Decisions)
	}
	if rows := e.undelivered(false); len(rows) != 0 {
		t.Errorf("undelivered rows left: %+v", rows)
	}
	if rep, err := e.engine.Verify(context.Background()); err != nil || !rep.OK() || !rep.Keyed {
		t.Errorf("verify: %+v %v", rep, err)
	}
}

// flaky fails the first n round trips as if the receiver's host refused the
// connection, then passes them on.
type flaky struct {
	mu sync.Mutex
	n  int
}

func (f *flaky) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	down := f.n > 0
	f.n--
	f.mu.Unlock()
	if down {
		return nil, &refusedConn{}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// refusedConn is the error of a refused connection, as the transport gives it.
type refusedConn struct{}

func (*refusedConn) Error() string {
	return "dial tcp 127.0.0.1:9: connect: " + syscall.ECONNREFUSED.Error()
}

// TestReceiverDownForAWhile: the receiver's host refuses connections, then it
// answers 503 (some after taking the event), then it is back. Every event
// arrives, each run's in the order of its changes, and a repeated delivery
// carries the same event id; the first retry waits a second.
func TestReceiverDownForAWhile(t *testing.T) {
	e := newEnv(t)
	e.disp.Client = &http.Client{Transport: &flaky{n: 3}}
	e.recv.answer = func(n int, _ string) int {
		if n <= 3 {
			return http.StatusServiceUnavailable // took it, says it did not: it comes again
		}
		return http.StatusOK
	}
	a := e.submit("T-a")
	b := e.submit("T-b")
	start := e.clock.Now()
	// The first attempts: refused, waits 1 s, 2 s, 4 s (one row at a time:
	// each run's row waits behind nothing but itself).
	if n, err := e.disp.DeliverDue(context.Background(), 0); n != 0 || err != nil {
		t.Fatalf("delivered %d, %v while the receiver was down", n, err)
	}
	for _, m := range e.undelivered(true) {
		if m.Attempts != 1 || !m.NextAttempt.Equal(start.Add(time.Second)) || !strings.Contains(m.LastError, "connection refused") {
			t.Errorf("after the first failure: attempts %d, next %s, last error %q", m.Attempts, m.NextAttempt.Sub(start), m.LastError)
		}
	}
	e.approve(a.ID)
	if _, err := e.engine.Cancel(context.Background(), b.ID, record.Person{ID: "U0LEAD0001"}, "not needed"); err != nil {
		t.Fatal(err)
	}
	e.drain(20)

	byRun := map[string][]string{}
	ids := map[string]string{} // event id → type, for duplicates
	for _, ev := range e.recv.events() {
		if typ, seen := ids[ev.ID]; seen {
			if typ != ev.Type {
				t.Errorf("event id %s came as %s and as %s", ev.ID, typ, ev.Type)
			}
			continue
		}
		ids[ev.ID] = ev.Type
		byRun[ev.Run.ID] = append(byRun[ev.Run.ID], ev.Type)
	}
	if want := []string{"run.waiting", "run.done"}; !slices.Equal(byRun[a.ID], want) {
		t.Errorf("run a: events %q, want %q", byRun[a.ID], want)
	}
	if want := []string{"run.waiting", "run.cancelled"}; !slices.Equal(byRun[b.ID], want) {
		t.Errorf("run b: events %q, want %q", byRun[b.ID], want)
	}
	if len(e.recv.events()) <= len(ids) {
		t.Errorf("no event was delivered twice (%d deliveries, %d events): the 503s after taking one were not retried", len(e.recv.events()), len(ids))
	}
}

// TestBackoff is the retry schedule: doubling from a second, capped at an hour.
func TestBackoff(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {12, 2048 * time.Second}, {13, time.Hour}, {40, time.Hour}, {1000, time.Hour}} {
		if got := callback.Backoff(tt.n, nil); got != tt.want {
			t.Errorf("Backoff(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
	half := func(d time.Duration) time.Duration { return d / 2 }
	if got := callback.Backoff(13, half); got != 30*time.Minute {
		t.Errorf("Backoff(13) with jitter = %s", got)
	}
}

// TestRetryAfterAndRefusedURLs: a 429's Retry-After sets the next attempt; a
// URL the allow-list no longer allows is not called and the row says why.
func TestRetryAfterAndRefusedURLs(t *testing.T) {
	t.Run("Retry-After", func(t *testing.T) {
		e := newEnv(t)
		calls := 0
		e.recv.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			calls++
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		})
		e.submit("T-1")
		start := e.clock.Now()
		if _, err := e.disp.DeliverDue(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		rows := e.undelivered(true)
		if calls != 1 || len(rows) != 1 || !rows[0].NextAttempt.Equal(start.Add(2*time.Minute)) || !strings.Contains(rows[0].LastError, "429") {
			t.Fatalf("calls %d, rows %+v", calls, rows)
		}
		e.clock.Advance(time.Minute)
		if _, err := e.disp.DeliverDue(context.Background(), 0); err != nil || calls != 1 {
			t.Fatalf("called again before its Retry-After: %d calls, %v", calls, err)
		}
	})
	t.Run("no longer allowed", func(t *testing.T) {
		e := newEnv(t)
		e.submit("T-1")
		e.disp.Allowed = func(string) bool { return false }
		if _, err := e.disp.DeliverDue(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		rows := e.undelivered(true)
		if len(e.recv.events()) != 0 || len(rows) != 1 || !strings.Contains(rows[0].LastError, "not allowed") {
			t.Fatalf("events %d, rows %+v", len(e.recv.events()), rows)
		}
	})
}

// TestNoCallbackNoRow: a run without a callback URL queues nothing; one with
// a URL outside the allow-list is refused.
func TestNoCallbackNoRow(t *testing.T) {
	e := newEnv(t)
	if _, err := e.engine.Submit(context.Background(), &workflow.Proposal{Requester: record.Person{ID: "agent:resolver"},
		Actions: []record.Action{{Name: "charge", Args: json.RawMessage(`{"card":"1","amount":1}`)}}}); err != nil {
		t.Fatal(err)
	}
	if rows := e.undelivered(false); len(rows) != 0 {
		t.Fatalf("rows for a run without a callback: %+v", rows)
	}
	var refused *record.RefusedError
	_, err := e.engine.Submit(context.Background(), &workflow.Proposal{Requester: record.Person{ID: "agent:resolver"},
		Actions:     []record.Action{{Name: "charge", Args: json.RawMessage(`{"card":"1","amount":1}`)}},
		CallbackURL: "https://elsewhere.example/hooks/x"})
	if !errors.As(err, &refused) || refused.Code != record.CodeCallbackNotAllowed {
		t.Fatalf("submit to a URL outside the list: %v", err)
	}
}

// TestARunThatWaitsHoldsUpNoOther: the events queued behind a failing one
// of their run do not take the places of other runs' events in a round.
func TestARunThatWaitsHoldsUpNoOther(t *testing.T) {
	e := newEnv(t)
	e.recv.answer = func(_ int, path string) int {
		if strings.HasPrefix(path, "/hooks/down") {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	}
	var down []*record.Run
	for _, task := range []string{"down-1", "down-2"} {
		down = append(down, e.submit(task))
	}
	if n, err := e.disp.DeliverDue(context.Background(), 0); n != 0 || err != nil {
		t.Fatalf("delivered %d, %v", n, err)
	}
	for _, r := range down {
		if _, err := e.engine.Cancel(context.Background(), r.ID, record.Person{ID: "U0LEAD0001"}, "not needed"); err != nil {
			t.Fatal(err)
		}
	}
	up := e.submit("up")
	// One run a round: the cancelled events of the failing runs are older
	// and due, but wait behind their runs' first events.
	if n, err := e.disp.DeliverDue(context.Background(), 1); n != 1 || err != nil {
		t.Fatalf("delivered %d, %v; want the event of the run whose receiver is up", n, err)
	}
	var ok []string
	for _, ev := range e.recv.events() {
		if ev.Run.ID == up.ID {
			ok = append(ok, ev.Type)
		}
	}
	if !slices.Equal(ok, []string{"run.waiting"}) {
		t.Fatalf("the receiver took %q for the run whose receiver is up", ok)
	}
}

// BenchmarkSubmit is what a callback costs a submit that waits: the run is
// rendered and its event queued in the submit's transaction.
func BenchmarkSubmit(b *testing.B) {
	for _, withCallback := range []bool{false, true} {
		b.Run(map[bool]string{false: "no_callback", true: "callback"}[withCallback], func(b *testing.B) {
			e := newEnv(b)
			p := &workflow.Proposal{Requester: record.Person{ID: "agent:resolver"},
				Actions: []record.Action{{Name: "charge", Args: json.RawMessage(`{"card":"4242424242424242","amount":12}`)}}}
			if withCallback {
				p.CallbackURL = e.recv.srv.URL + "/hooks/bench"
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := e.engine.Submit(context.Background(), p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRemindedAndEscalatedReachTheAgent: a waiting run's agent hears when
// its approvers are reminded and when the request is escalated (who may
// decide now, the new deadline), though the run's status does not change;
// each is one event, in the order it happened.
func TestRemindedAndEscalatedReachTheAgent(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "signoff.db"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, st, policy.Rule{Name: "everything", When: "true", Risk: "high",
		Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(4 * 3600)},
		Remind:   []record.Seconds{3 * 3600},
		Escalate: []record.EscalationStep{{After: 2 * 3600, Users: []string{"U0OUT00001"}, Extend: 3600}}})
	run := e.submit("T-1")
	e.drain(1)
	ctx := context.Background()
	e.clock.Advance(time.Hour + time.Minute) // the reminder is due 3h before the 4h deadline
	if n, err := e.engine.RemindDue(ctx); err != nil || n != 1 {
		t.Fatalf("remind: %d %v", n, err)
	}
	e.drain(1)
	e.clock.Advance(time.Hour) // the escalation is due 2h after the request
	if n, err := e.engine.EscalateDue(ctx); err != nil || n != 1 {
		t.Fatalf("escalate: %d %v", n, err)
	}
	e.drain(1)
	got := e.recv.events()
	var types []string
	for _, ev := range got {
		types = append(types, ev.Type)
		if ev.Run == nil || ev.Run.ID != run.ID || ev.Run.Status != record.StatusWaitingApproval {
			t.Errorf("%s event shows run %+v", ev.Type, ev.Run)
		}
	}
	if want := []string{"run.waiting", "run.reminded", "run.escalated"}; !slices.Equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	if esc := got[2].Run.Escalations; len(esc) != 1 {
		t.Errorf("the escalated event shows escalations %+v", esc)
	}
	if got[2].Run.Deadline == nil || !got[2].Run.Deadline.Equal(run.CreatedAt.Add(5*time.Hour)) {
		t.Errorf("the escalated event shows the deadline %v, want the extended %v", got[2].Run.Deadline, run.CreatedAt.Add(5*time.Hour))
	}
}
