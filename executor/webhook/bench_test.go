package webhook_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/signoff-dev/signoff/executor/webhook"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// memTarget is an in-process executor with a ledger: the cost of a run
// without the network, for comparison.
type memTarget struct {
	mu     sync.Mutex
	ledger map[string]record.Receipt
}

func (m *memTarget) Check(context.Context, record.Action) error { return nil }

func (m *memTarget) Execute(_ context.Context, key string, _ record.Action) (record.Receipt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rc, ok := m.ledger[key]; ok {
		return rc, nil
	}
	rc := record.Receipt{ID: key}
	m.ledger[key] = rc
	return rc, nil
}

func (m *memTarget) Lookup(_ context.Context, key string) (record.Receipt, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rc, ok := m.ledger[key]
	return rc, ok, nil
}

// BenchmarkEndToEnd is one gated run from proposal to receipt (submit,
// approve, execute) on SQLite, through the webhook executor against the
// reference target on loopback, beside the same run through an in-process
// executor:
//
//	go test -run '^$' -bench EndToEnd -benchtime 2s ./executor/webhook
func BenchmarkEndToEnd(b *testing.B) {
	tg, srv := startTarget(b)
	execs := []struct {
		name string
		x    workflow.Executor
	}{
		{"in-process", &memTarget{ledger: map[string]record.Receipt{}}},
		{"webhook", newExec(b, webhookConfig(srv.URL))},
	}
	for _, ex := range execs {
		b.Run(ex.name, func(b *testing.B) {
			e := gatedEngine(b, ex.x)
			ctx := context.Background()
			before := len(tg.Ledger())
			b.ResetTimer()
			for b.Loop() {
				run, err := e.Submit(ctx, proposal())
				if err != nil || run.Status != record.StatusWaitingApproval {
					b.Fatalf("submit: %v %+v", err, run)
				}
				if _, err := e.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
					b.Fatal(err)
				}
				if run, err = e.Resume(ctx, run.ID); err != nil || run.Status != record.StatusDone {
					b.Fatalf("resume: %v %+v", err, run)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
			if ex.name == "webhook" && len(tg.Ledger())-before != b.N {
				b.Fatalf("%d effects for %d runs", len(tg.Ledger())-before, b.N)
			}
		})
	}
}

func webhookConfig(url string) webhook.Config {
	return webhook.Config{URL: url + "/execute", LookupURL: url + "/operations/{key}"}
}

// gatedEngine is newEngine with a rule that needs a team lead.
func gatedEngine(b *testing.B, x workflow.Executor) *workflow.Engine {
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "signoff.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	roles, err := policy.NewRoles([]policy.Role{
		{Name: "agent", Members: []string{"agent:deployer"}},
		{Name: "team_lead", Members: []string{"U0LEAD0001"}},
	})
	if err != nil {
		b.Fatal(err)
	}
	pol, err := policy.New("r1", []policy.Rule{{Name: "deploys", When: "true", Risk: "high",
		Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(3600)}}}, roles)
	if err != nil {
		b.Fatal(err)
	}
	spec, err := workflow.NewActionSpec("deploy_service", nil, x, []string{"token"})
	if err != nil {
		b.Fatal(err)
	}
	e, err := workflow.New(workflow.Config{Store: st, Policy: pol, Roles: roles, Actions: map[string]*workflow.ActionSpec{"deploy_service": spec}})
	if err != nil {
		b.Fatal(err)
	}
	return e
}
