package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// TestAForcedRunConformsToTheDocument: GET of a run whose approval was
// forced shows forced (who, why, the review due) as the document says.
func TestAForcedRunConformsToTheDocument(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	p := deployProposal("k-force", "1.2.3")
	p.Requester = record.Person{ID: "agent:resolver"}
	run, err := h.engine.Submit(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD"}, Verdict: record.VerdictApprove,
		Reason: "hotfix for an outage", Via: "cli", Force: true}); err != nil {
		t.Fatal(err)
	}
	a := h.do(http.MethodGet, "/v1/runs/"+run.ID, tokAll, "", nil, false)
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	var v workflow.RunView
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatal(err)
	}
	if v.Forced == nil || v.Forced.By != "U0LEAD" || v.Forced.Reason != "hotfix for an outage" || v.Forced.ReviewRole != "team_lead" {
		t.Fatalf("forced %+v", v.Forced)
	}
}
