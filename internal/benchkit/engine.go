package benchkit

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// The people of the benchmark's engine.
const (
	Requester = "agent:bench"
	Approver  = "U0LEAD0001"
)

const refundSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["payment_id", "amount"],
  "properties": {
    "payment_id": {"type": "string", "minLength": 1},
    "amount": {"type": "number", "exclusiveMinimum": 0}
  }
}`

// NewEngine is an engine on st with one action, request_refund, that always
// needs a team lead's approval, and an executor that does nothing but keep
// its receipts, so that the figures are the engine's and the store's.
func NewEngine(st storage.Store) (*workflow.Engine, error) {
	roles, err := policy.NewRoles([]policy.Role{
		{Name: "agent", Members: []string{Requester}},
		{Name: "team_lead", Members: []string{Approver}},
	})
	if err != nil {
		return nil, err
	}
	policy, err := policy.New("bench", []policy.Rule{{
		Name: "refund", When: `action.name == "request_refund"`, Risk: record.RiskHigh,
		Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(72 * 3600)},
	}}, roles)
	if err != nil {
		return nil, err
	}
	spec, err := workflow.NewActionSpec("request_refund", []byte(refundSchema), &target{receipts: map[string]record.Receipt{}}, nil)
	if err != nil {
		return nil, err
	}
	return workflow.New(workflow.Config{Store: st, Policy: policy, Roles: roles,
		Actions: map[string]*workflow.ActionSpec{"request_refund": spec}})
}

// target is an executor that keeps its receipts in memory.
type target struct {
	mu       sync.Mutex
	receipts map[string]record.Receipt
}

func (t *target) Check(context.Context, record.Action) error { return nil }

func (t *target) Execute(_ context.Context, key string, _ record.Action) (record.Receipt, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rc, ok := t.receipts[key]; ok {
		return rc, nil
	}
	rc := record.Receipt{ID: fmt.Sprintf("RF-%d", len(t.receipts)+1)}
	t.receipts[key] = rc
	return rc, nil
}

func (t *target) Lookup(_ context.Context, key string) (record.Receipt, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rc, ok := t.receipts[key]
	return rc, ok, nil
}

// evidence is about 2 KB, the payload of a run in the figures of
// DESIGN's perf anchors: a payment lookup's answer, as varied as a real
// one, so that a store that compresses what it keeps (PostgreSQL's TOAST)
// is not flattered by a repeated letter. The same bytes every run.
var evidence = paymentsEvidence(evidenceBytes)

// evidenceBytes is the size evidence grows to.
const evidenceBytes = 2000

// paymentsEvidence is a JSON object listing payments, with ids, amounts and
// times drawn from a fixed seed, about size bytes long.
func paymentsEvidence(size int) json.RawMessage {
	rng := rand.New(rand.NewPCG(1, 2))
	const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var b strings.Builder
	b.WriteString(`{"payments":[`)
	for i := 0; b.Len() < size-60; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		id := make([]byte, 14)
		for j := range id {
			id[j] = alnum[rng.IntN(len(alnum))]
		}
		fmt.Fprintf(&b, `{"id":"pi_%s","amount":%d,"currency":"usd","created":%d}`, id, 100+rng.IntN(99900), 1796000000+rng.IntN(8000000))
	}
	b.WriteString(`]}`)
	return json.RawMessage(b.String())
}

// Proposal is a gated refund with about 2 KB of evidence.
func Proposal() *workflow.Proposal {
	return &workflow.Proposal{
		TaskID:    "T-BENCH",
		Requester: record.Person{ID: Requester, Name: "Bench"},
		Summary:   "refund a duplicate charge",
		Actions:   []record.Action{{Name: "request_refund", Args: json.RawMessage(`{"payment_id":"PAY-1","amount":119}`)}},
		Evidence:  []record.Evidence{{Source: "get_payments", Data: evidence}},
	}
}

// Suspend submits a gated proposal: the run waits for approval.
func Suspend(ctx context.Context, eng *workflow.Engine) (string, error) {
	run, err := eng.Submit(ctx, Proposal())
	if err != nil {
		return "", fmt.Errorf("submit: %w", err)
	}
	if run.Status != record.StatusWaitingApproval {
		return "", fmt.Errorf("submitted run %s is %s, want waiting_approval", run.ID, run.Status)
	}
	return run.ID, nil
}

// Decide approves a waiting run.
func Decide(ctx context.Context, eng *workflow.Engine, id string) error {
	run, err := eng.Decide(ctx, workflow.DecideInput{RunID: id, Approver: record.Person{ID: Approver}, Verdict: record.VerdictApprove, Via: record.ViaCLI})
	if err != nil {
		return fmt.Errorf("decide: %w", err)
	}
	if run.Status != record.StatusExecuting {
		return fmt.Errorf("approved run %s is %s, want executing", id, run.Status)
	}
	return nil
}

// Execute runs an approved run's action to the end.
func Execute(ctx context.Context, eng *workflow.Engine, id string) error {
	run, err := eng.Resume(ctx, id)
	if err != nil {
		return fmt.Errorf("execute: %w", err)
	}
	if run.Status != record.StatusDone {
		return fmt.Errorf("executed run %s is %s, want done", id, run.Status)
	}
	return nil
}

// EndToEnd is one whole run: submit, wait (the run is waiting), approve,
// execute, done.
func EndToEnd(ctx context.Context, eng *workflow.Engine) error {
	id, err := Suspend(ctx, eng)
	if err != nil {
		return err
	}
	if err := Decide(ctx, eng, id); err != nil {
		return err
	}
	return Execute(ctx, eng, id)
}

// Drive calls op from clients goroutines until d has passed (d <= 0: no time
// limit) or op says stop (returns false), and returns how many calls succeeded
// and how long it took. The first error stops every client.
func Drive(ctx context.Context, clients int, d time.Duration, op func(ctx context.Context) (bool, error)) (int64, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		n       atomic.Int64
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil && (d <= 0 || time.Now().Before(deadline)) {
				more, err := op(ctx)
				if err != nil {
					errOnce.Do(func() { first = err; cancel() })
					return
				}
				if !more {
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load(), time.Since(start), first
}

// Queue hands out ids to concurrent clients, each once.
type Queue struct {
	ids  []string
	next atomic.Int64
}

// NewQueue is a queue of ids.
func NewQueue(ids []string) *Queue { return &Queue{ids: ids} }

// Take returns the next id, or false when none is left.
func (q *Queue) Take() (string, bool) {
	i := q.next.Add(1) - 1
	if i >= int64(len(q.ids)) {
		return "", false
	}
	return q.ids[i], true
}
