package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// TestADecisionOnSomeonesBehalfConforms: a run decided under a delegation
// is answered with on_behalf_of on its decision, as the document says.
func TestADecisionOnSomeonesBehalfConforms(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	s, err := h.client(tokAll).Submit(ctx, deployProposal("", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Delegate(ctx, record.Delegation{From: "U0LEAD", To: "U0DEPUTY", Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: s.Id, Approver: record.Person{ID: "U0DEPUTY"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	a := h.do("GET", "/v1/runs/"+s.Id, tokAll, "", nil, false)
	req, _ := http.NewRequest("GET", h.srv.URL+"/v1/runs/"+s.Id, nil)
	if _, errs := h.conf.check(req, nil, a.status, a.header, a.body, true); len(errs) != 0 {
		t.Fatalf("the answer fails the document: %v", errs)
	}
	var run struct {
		Decisions []struct {
			By         string `json:"by"`
			OnBehalfOf string `json:"on_behalf_of"`
		} `json:"decisions"`
	}
	if err := json.Unmarshal(a.body, &run); err != nil || len(run.Decisions) != 1 || run.Decisions[0].By != "U0DEPUTY" || run.Decisions[0].OnBehalfOf != "U0LEAD" {
		t.Fatalf("decisions %+v, %v", run.Decisions, err)
	}
}
