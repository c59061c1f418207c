package api_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// TestACompositeApprovalShowsItsProgress: a run under a composite approval
// shows, as the document says, its requirement in the gate and which leaf
// is filled by whom while it waits.
func TestACompositeApprovalShowsItsProgress(t *testing.T) {
	req := &record.Requirement{AllOf: []record.Requirement{{Role: "team_lead", Count: 1}, {Users: []string{"U0AUDIT"}, Count: 1}}}
	h := newHarness(t, harnessOpts{requirement: req})
	ctx := context.Background()
	p := deployProposal("", "1.2.3")
	p.Requester = record.Person{ID: "agent:resolver"}
	run, err := h.engine.Submit(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD"},
		Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	a := h.do("GET", "/v1/runs/"+run.ID, tokAll, "", nil, false)
	var v workflow.RunView
	if err := json.Unmarshal(a.body, &v); a.status != 200 || err != nil {
		t.Fatalf("GET = %d %s (%v)", a.status, a.body, err)
	}
	if v.Gate.Approval.Requirement == nil || v.Progress == nil || v.Progress.Met || len(v.Progress.Leaves) != 2 ||
		v.Progress.Remaining != 1 || len(v.Progress.Leaves[0].By) != 1 || v.Progress.Leaves[0].By[0] != "U0LEAD" || len(v.Progress.Leaves[1].By) != 0 {
		t.Fatalf("gate %+v progress %+v", v.Gate.Approval, v.Progress)
	}
}
