package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// newFakeClock is the harness's clock: it only moves when told to.
func newFakeClock() *clocktest.Clock {
	return clocktest.New(time.Date(2026, 11, 27, 17, 0, 0, 0, time.UTC))
}

// ledger is a hand-written target: a payment service with its own register of
// operations keyed by idempotency key.
type ledger struct {
	mu        sync.Mutex
	captured  map[string]float64 // payment → refundable amount
	register  map[string]record.Receipt
	effects   []string // every effect, in order: the thing that must never repeat
	calls     int
	failNext  []error // errors returned (before any effect) by the next calls
	afterFail []error // errors returned after the effect happened
	lookupErr error
	// lookupDown makes the next lookups fail: the register is down for a while.
	lookupDown int
	lookups    int
	// onExecute, when set, runs at the start of every call.
	onExecute func()
}

var _ workflow.Executor = (*ledger)(nil)

func newLedger() *ledger {
	return &ledger{
		captured: map[string]float64{"PAY-1": 119, "PAY-2": 9.95},
		register: map[string]record.Receipt{},
	}
}

type refundArgs struct {
	PaymentID string  `json:"payment_id"`
	Amount    float64 `json:"amount"`
}

func (l *ledger) Check(_ context.Context, a record.Action) error {
	var args refundArgs
	if err := json.Unmarshal(a.Args, &args); err != nil {
		return workflow.Permanent(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if left, ok := l.captured[args.PaymentID]; !ok || left < args.Amount {
		return workflow.Permanent(fmt.Errorf("%s is not a captured charge of at least %.2f", args.PaymentID, args.Amount))
	}
	return nil
}

func (l *ledger) Execute(_ context.Context, key string, a record.Action) (record.Receipt, error) {
	var args refundArgs
	if err := json.Unmarshal(a.Args, &args); err != nil {
		return record.Receipt{}, workflow.Permanent(err)
	}
	if l.onExecute != nil {
		l.onExecute()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if len(l.failNext) > 0 {
		err := l.failNext[0]
		l.failNext = l.failNext[1:]
		return record.Receipt{}, err
	}
	if rc, ok := l.register[key]; ok {
		return rc, nil
	}
	if left, ok := l.captured[args.PaymentID]; !ok || left < args.Amount {
		return record.Receipt{}, workflow.Permanent(fmt.Errorf("%s is not a captured charge of at least %.2f", args.PaymentID, args.Amount))
	}
	l.captured[args.PaymentID] -= args.Amount
	rc := record.Receipt{ID: fmt.Sprintf("RF-%d", len(l.effects)+1)}
	l.register[key] = rc
	l.effects = append(l.effects, fmt.Sprintf("refund %s %.2f key=%s", args.PaymentID, args.Amount, key))
	if len(l.afterFail) > 0 {
		err := l.afterFail[0]
		l.afterFail = l.afterFail[1:]
		return record.Receipt{}, err
	}
	return rc, nil
}

func (l *ledger) Lookup(_ context.Context, key string) (record.Receipt, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lookups++
	if l.lookupErr != nil {
		return record.Receipt{}, false, l.lookupErr
	}
	if l.lookupDown > 0 {
		l.lookupDown--
		return record.Receipt{}, false, errors.New("register unavailable")
	}
	rc, ok := l.register[key]
	return rc, ok, nil
}

// refundByHand is a change made outside signoff while a run waits.
func (l *ledger) refundByHand(payment string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.effects = append(l.effects, "manual refund "+payment)
	l.captured[payment] = 0
}

func (l *ledger) Effects() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.effects...)
}

const refundSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "required": ["payment_id", "amount"],
  "properties": {
    "payment_id": {"type": "string", "minLength": 1},
    "amount": {"type": "number", "exclusiveMinimum": 0}
  }
}`

var testRoles = []policy.Role{
	{Name: "agent", Members: []string{"agent:resolver"}},
	{Name: "team_lead", Members: []string{"U0LEAD0001", "U0LEAD0002"}},
	{Name: "manager", Members: []string{"U0MGR00001"}},
}

func testPolicy(t testing.TB, revision string, roles *policy.Roles) *policy.Policy {
	t.Helper()
	p, err := policy.New(revision, []policy.Rule{
		{Name: "large-refund", When: `action.name == "request_refund" && double(action.args.amount) > 50.0`, Risk: "high",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(72 * 3600), Edit: true}},
		{Name: "everything-else", When: "true", Risk: "low"},
	}, roles)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

// harness is one engine on one real SQLite file, as one process would have.
type harness struct {
	t      testing.TB
	path   string
	store  *sqlite.Store
	engine *workflow.Engine
	target *ledger
	clock  *clocktest.Clock
	roles  *policy.Roles
}

type harnessOption func(*workflow.Config)

func newHarness(t testing.TB, opts ...harnessOption) *harness {
	t.Helper()
	h := &harness{t: t, path: filepath.Join(t.TempDir(), "signoff.db"), target: newLedger(), clock: newFakeClock()}
	roles, err := policy.NewRoles(testRoles)
	if err != nil {
		t.Fatal(err)
	}
	h.roles = roles
	h.open(testPolicy(t, "rev-1", roles), opts...)
	return h
}

// open (re)opens the store and builds a new engine, as a restarted process would.
func (h *harness) open(p *policy.Policy, opts ...harnessOption) {
	h.t.Helper()
	if h.store != nil {
		h.store.Close()
	}
	st, err := sqlite.Open(context.Background(), h.path)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { st.Close() })
	h.store = st
	h.build(st, p, opts...)
}

// build makes the harness's engine on a store: the fake target's one action,
// the policy, the roles and the fake clock.
func (h *harness) build(st storage.Store, p *policy.Policy, opts ...harnessOption) {
	h.t.Helper()
	spec, err := workflow.NewActionSpec("request_refund", []byte(refundSchema), h.target, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	cfg := workflow.Config{
		Store: st, Policy: p, Roles: h.roles, Clock: h.clock,
		Actions: map[string]*workflow.ActionSpec{"request_refund": spec},
	}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.Hooks = append(cfg.Hooks, namedEvents{h.t})
	if h.engine, err = workflow.New(cfg); err != nil {
		h.t.Fatal(err)
	}
}

// namedEvents fails the test on a transition whose event is not one of
// record.Events, whatever the test is about.
type namedEvents struct{ t testing.TB }

func (n namedEvents) OnTransition(_ context.Context, _ storage.Tx, tr workflow.Transition) error {
	if !tr.Event.Valid() {
		n.t.Errorf("run %s: transition %q is not in record.Events", tr.Run.ID, tr.Event)
	}
	return nil
}

func refund(payment string, amount float64) *workflow.Proposal {
	return &workflow.Proposal{
		TaskID:    "T-1",
		Requester: record.Person{ID: "agent:resolver", Name: "Resolver"},
		Summary:   "refund",
		Actions:   []record.Action{{Name: "request_refund", Args: json.RawMessage(fmt.Sprintf(`{"payment_id":%q,"amount":%v}`, payment, amount))}},
		Evidence:  []record.Evidence{{Source: "get_payments", Data: json.RawMessage(`{"payments":[{"id":"PAY-1","status":"captured"}]}`)}},
	}
}

func (h *harness) submit(p *workflow.Proposal) *record.Run {
	h.t.Helper()
	run, err := h.engine.Submit(context.Background(), p)
	if err != nil {
		h.t.Fatalf("submit: %v", err)
	}
	return run
}

// run submits p and, when its target asked for time, carries on waiting
// it out, as `signoff submit` does (a server's workers would instead).
func (h *harness) run(p *workflow.Proposal) *record.Run {
	h.t.Helper()
	run := h.submit(p)
	if workflow.ParkedUntil(run, h.clock.Now()).IsZero() {
		return run
	}
	run, err := h.engine.Resume(context.Background(), run.ID)
	if err != nil {
		h.t.Fatalf("resume: %v", err)
	}
	return run
}

func (h *harness) get(id string) *workflow.RunView {
	h.t.Helper()
	v, err := h.engine.Get(context.Background(), id)
	if err != nil {
		h.t.Fatalf("get %s: %v", id, err)
	}
	return v
}

func (h *harness) approve(id, who string) (*record.Run, error) {
	run, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: id, Approver: record.Person{ID: who}, Verdict: record.VerdictApprove, Via: "cli"})
	if err != nil {
		return run, err
	}
	return h.engine.Resume(context.Background(), id)
}

// snapshot is every row a decision could change except the audit log.
func (h *harness) snapshot(id string) string {
	h.t.Helper()
	v := h.get(id)
	v.UpdatedAt = time.Time{}
	b, err := json.Marshal(v)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

func (h *harness) auditCount(id string) int {
	h.t.Helper()
	evs, err := h.engine.AuditLog(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(evs)
}

func wantRefused(t testing.TB, err error, code string) *record.RefusedError {
	t.Helper()
	var r *record.RefusedError
	if !errors.As(err, &r) {
		t.Fatalf("want refusal %s, got %v", code, err)
	}
	if r.Code != code {
		t.Fatalf("want refusal %s, got %s: %s", code, r.Code, r.Msg)
	}
	return r
}
