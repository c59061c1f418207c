package workflow_test

import (
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/workflow"
)

// TestButtonRefusalsSayWhatDecideFound: a decision that names its request
// and fingerprint (a Slack button) is refused with what the engine found,
// so that the clicker can be told why without the run being read again;
// CheckButton gives a form the same refusal from the run as shown.
func TestButtonRefusalsSayWhatDecideFound(t *testing.T) {
	type found struct {
		code       string
		button     record.ButtonProblem
		run        record.Status
		request    record.RequestStatus
		by         string
		currentFPs bool // the refusal carries the request's fingerprint
	}
	for _, tc := range []struct {
		name    string
		prepare func(h *harness, v *workflow.RunView) workflow.DecideInput
		want    found
	}{
		{"request of another run", func(h *harness, v *workflow.RunView) workflow.DecideInput {
			other := h.get(h.submit(refund("PAY-1", 118)).ID)
			return workflow.DecideInput{RequestID: other.Gate.RequestID, Fingerprint: other.Gate.Fingerprint}
		}, found{code: record.CodeStaleFingerprint, button: record.ButtonOtherRun, run: record.StatusWaitingApproval}},
		{"fingerprint of another proposal", func(h *harness, v *workflow.RunView) workflow.DecideInput {
			return workflow.DecideInput{RequestID: v.Gate.RequestID, Fingerprint: strings.Repeat("ab", 32)}
		}, found{code: record.CodeStaleFingerprint, button: record.ButtonFingerprint, run: record.StatusWaitingApproval,
			request: record.RequestPending, currentFPs: true}},
		{"decided by someone else", func(h *harness, v *workflow.RunView) workflow.DecideInput {
			if _, err := h.approve(v.ID, "U0LEAD0002"); err != nil {
				t.Fatal(err)
			}
			return workflow.DecideInput{RequestID: v.Gate.RequestID, Fingerprint: v.Gate.Fingerprint}
		}, found{code: record.CodeAlreadyDecided, run: record.StatusDone, request: record.RequestApproved, by: "U0LEAD0002", currentFPs: true}},
		{"cancelled", func(h *harness, v *workflow.RunView) workflow.DecideInput {
			if _, err := h.engine.Cancel(ctx, v.ID, record.Person{ID: "U0LEAD0002"}, "not needed"); err != nil {
				t.Fatal(err)
			}
			return workflow.DecideInput{RequestID: v.Gate.RequestID, Fingerprint: v.Gate.Fingerprint}
		}, found{code: record.CodeAlreadyDecided, run: record.StatusCancelled, request: record.RequestCancelled, by: "U0LEAD0002", currentFPs: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			v := h.get(h.submit(refund("PAY-1", 119)).ID)
			in := tc.prepare(h, v)
			in.RunID, in.Approver, in.Verdict, in.Via = v.ID, record.Person{ID: "U0LEAD0001"}, record.VerdictApprove, "slack"
			_, err := h.engine.Decide(ctx, in)
			r := wantRefused(t, err, tc.want.code)
			check := func(r *record.RefusedError) {
				t.Helper()
				if r.Button != tc.want.button || r.RequestStatus != tc.want.request || r.By != tc.want.by {
					t.Errorf("found button %q, request %q by %q; want %q, %q by %q",
						r.Button, r.RequestStatus, r.By, tc.want.button, tc.want.request, tc.want.by)
				}
				if r.RunStatus != tc.want.run {
					t.Errorf("found the run %s, want %s", r.RunStatus, tc.want.run)
				}
				if tc.want.currentFPs != (r.Fingerprint == v.Gate.Fingerprint) {
					t.Errorf("found fingerprint %q; the request's is %q", r.Fingerprint, v.Gate.Fingerprint)
				}
			}
			check(r)

			// The form's check, on the run as shown, agrees.
			err = workflow.CheckButton(h.get(v.ID), in.RequestID, in.Fingerprint)
			check(wantRefused(t, err, tc.want.code))
		})
	}
}
