package storagetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// testListRunsByRuleAndText holds ListRuns's and ListRunHeads's Rule and
// Text to what they say: a rule is any of a run's requests', text is
// found in the id, task, requester or a request's rule in any case, the
// characters LIKE treats specially match themselves, and the keyset pages
// and the other filters still apply.
func testListRunsByRuleAndText(t *testing.T, s storage.Store) {
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		for i, r := range []struct{ id, task, requester, status string }{
			{"s00", "T-100", "agent:Billing", "waiting_approval"},
			{"s01", "T_1", "agent:ops", "waiting_approval"},
			{"s02", "T%1", "agent:ops", "waiting_approval"},
			{"s03", "T-200", "U0LEAD", "needs_attention"},
			{"s04", "", "agent:ops", "waiting_approval"},
		} {
			if err := tx.InsertRun(ctx, &record.Run{ID: r.id, TaskID: r.task, RequesterID: r.requester, Status: record.Status(r.status),
				CreatedAt: odd.Add(time.Duration(i) * time.Minute), UpdatedAt: odd}); err != nil {
				return err
			}
		}
		for i, q := range []struct{ run, rule string }{{"s00", "refunds"}, {"s01", "Deploys"}, {"s03", "refunds"}, {"s03", "notes"}, {"s04", "refunds!x"}} {
			if err := tx.InsertRequest(ctx, &record.ApprovalRequest{ID: fmt.Sprintf("q%d", i), RunID: q.run, Rule: q.rule,
				Status: record.RequestPending, CreatedAt: odd}); err != nil {
				return err
			}
		}
		return nil
	})
	waiting := []record.Status{record.StatusWaitingApproval}
	for _, tc := range []struct {
		name string
		f    storage.RunFilter
		want []string
	}{
		{"a rule", storage.RunFilter{Rule: "refunds"}, []string{"s00", "s03"}},
		{"a rule of an earlier request", storage.RunFilter{Rule: "notes"}, []string{"s03"}},
		{"a rule nobody has", storage.RunFilter{Rule: "refund"}, nil},
		{"a rule and a status", storage.RunFilter{Rule: "refunds", Statuses: waiting}, []string{"s00"}},
		{"text in the id", storage.RunFilter{Text: "S02"}, []string{"s02"}},
		{"text in the requester, any case", storage.RunFilter{Text: "billing"}, []string{"s00"}},
		{"text in a rule", storage.RunFilter{Text: "deploy"}, []string{"s01"}},
		{"text in the task", storage.RunFilter{Text: "t-"}, []string{"s00", "s03"}},
		{"an underscore is itself", storage.RunFilter{Text: "t_"}, []string{"s01"}},
		{"a percent sign is itself", storage.RunFilter{Text: "t%"}, []string{"s02"}},
		{"the escape character is itself", storage.RunFilter{Text: "s!x"}, []string{"s04"}},
		{"text, status, cursor and limit", storage.RunFilter{Text: "agent:ops", Statuses: waiting, AfterCreated: odd.Add(time.Minute), AfterID: "s01", Limit: 1},
			[]string{"s02"}},
		{"text and rule", storage.RunFilter{Text: "ops", Rule: "Deploys"}, []string{"s01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Run, error) { return tx.ListRuns(ctx, tc.f) })
			if ids := runIDs(got); !slices.Equal(ids, tc.want) {
				t.Errorf("ListRuns(%+v) = %v, want %v", tc.f, ids, tc.want)
			}
			heads := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*storage.RunHead, error) {
				return tx.ListRunHeads(ctx, tc.f)
			})
			var ids []string
			for _, h := range heads {
				ids = append(ids, h.Run.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("ListRunHeads(%+v) = %v, want %v", tc.f, ids, tc.want)
			}
		})
	}
}
