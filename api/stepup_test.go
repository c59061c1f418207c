package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// TestTheAPICannotApproveAStepUpRule: on a rule whose approvals are
// confirmed on the web, the API's one way to approve (force) is refused,
// also with a body that claims the web; the run keeps waiting with no
// decision, and GET shows an approval given in Slack as unconfirmed.
func TestTheAPICannotApproveAStepUpRule(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOpts{stepUp: 300})
	s, err := h.client(tokAll).Submit(ctx, deployProposal("k-step", "5.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	path := "/v1/runs/" + s.Id
	for _, tc := range []struct {
		body   map[string]string
		status int
	}{
		{map[string]string{"fingerprint": *s.Fingerprint, "reason": "now"}, http.StatusConflict},
		{map[string]string{"fingerprint": *s.Fingerprint, "reason": "now", "via": "web"}, http.StatusBadRequest},
	} {
		a := h.do("POST", path+"/force", tokLead, "application/json", []byte(mustJSON(t, tc.body)), tc.body["via"] != "")
		if a.status != tc.status {
			t.Fatalf("force %v: %d %s, want %d", tc.body, a.status, a.body, tc.status)
		}
	}
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: s.Id, Approver: record.Person{ID: "U0LEAD"}, Verdict: record.VerdictApprove, Via: record.ViaSlack}); !record.IsRefused(err, record.CodeConfirmOnWeb) {
		t.Fatalf("a Slack approval: %v", err)
	}
	a := h.do("GET", path, tokRead, "", nil, false)
	var v workflow.RunView
	if err := json.Unmarshal(a.body, &v); a.status != http.StatusOK || err != nil {
		t.Fatalf("get: %d %s (%v)", a.status, a.body, err)
	}
	if v.Status != record.StatusWaitingApproval || len(v.Decisions) != 0 || len(v.Unconfirmed) != 1 || v.Unconfirmed[0].By != "U0LEAD" ||
		v.Gate == nil || v.Gate.Approval == nil || v.Gate.Approval.StepUp != 300 {
		t.Fatalf("the run: %s, decisions %+v, unconfirmed %+v, gate %+v", v.Status, v.Decisions, v.Unconfirmed, v.Gate)
	}
}
