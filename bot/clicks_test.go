package bot

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/signoff-dev/signoff/workflow"
)

// readCounter is the engine, counting the runs read with Get.
type readCounter struct {
	*workflow.Engine
	gets atomic.Int64
}

func (e *readCounter) Get(ctx context.Context, id string) (*workflow.RunView, error) {
	e.gets.Add(1)
	return e.Engine.Get(ctx, id)
}

// TestApproveIsCheckedOnceByTheEngine: an Approve click goes straight to
// the engine's decision, accepted or refused, and the refusal is told in
// the words of a click without the run being read.
func TestApproveIsCheckedOnceByTheEngine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		prepare  func(h *slackHarness, v *workflow.RunView) (Ref, string)
		wantTold []string // nil: accepted, nothing told
	}{
		{"accepted", func(h *slackHarness, v *workflow.RunView) (Ref, string) { return refOf(v), leadGrace }, nil},
		{"already decided by another", func(h *slackHarness, v *workflow.RunView) (Ref, string) {
			h.click(fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil))
			return refOf(v), manager
		}, []string{"already approved by <@U0LEAD0001>"}},
		{"stale fingerprint", func(h *slackHarness, v *workflow.RunView) (Ref, string) {
			ref := refOf(v)
			ref.Fingerprint = strings.Repeat("cd", 32)
			return ref, leadGrace
		}, []string{"this button approves fingerprint", "cdcdcdcd", "the request is for"}},
		{"request of another run", func(h *slackHarness, v *workflow.RunView) (Ref, string) {
			ref := refOf(v)
			ref.RequestID = h.submit("refund-double-charge", "").Gate.RequestID
			return ref, leadGrace
		}, []string{"not from an approval request of run"}},
		{"run cancelled", func(h *slackHarness, v *workflow.RunView) (Ref, string) {
			if _, err := h.eng.Cancel(h.ctx, v.ID, record.Person{ID: leadOmar}, "not needed"); err != nil {
				t.Fatal(err)
			}
			return refOf(v), leadGrace
		}, []string{"already cancelled by <@" + leadOmar + ">"}},
		{"no role", func(h *slackHarness, v *workflow.RunView) (Ref, string) { return refOf(v), nobody }, []string{"holds no role"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSlackHarness(t)
			v := h.submit("refund-double-charge", "")
			ref, user := tc.prepare(h, v)
			eng := &readCounter{Engine: h.eng}
			srv := newServer(eng, ServerConfig{AppID: hAppID, TeamID: hTeamID, EnterpriseID: hEnterpriseID, Clock: h.clock, Slack: h.acts})
			told := len(h.acts.Ephemerals())
			if _, err := srv.HandleInteraction(h.ctx, fixture(t, "block_actions_approve.json", ref, user, nil)); err != nil {
				t.Fatal(err)
			}
			if n := eng.gets.Load(); n != 0 {
				t.Errorf("the click read the run %d times, want none", n)
			}
			eph := h.acts.Ephemerals()[told:]
			if tc.wantTold == nil {
				if len(eph) != 0 || h.get(v.ID).Status != record.StatusExecuting {
					t.Fatalf("accepted click: told %+v, run %s", eph, h.get(v.ID).Status)
				}
				return
			}
			if len(eph) != 1 {
				t.Fatalf("told %+v, want one message", eph)
			}
			for _, want := range tc.wantTold {
				if !strings.Contains(eph[0].Text, want) {
					t.Errorf("told %q; want it to contain %q", eph[0].Text, want)
				}
			}
		})
	}
}
