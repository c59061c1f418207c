package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// `signoff show` says who hears a run's outcome, and says nothing of it for
// a rule that notifies nobody.
func TestShowSaysWhoHearsTheOutcome(t *testing.T) {
	roles := config.Default().Roles
	for _, tt := range []struct {
		notify []string
		want   string
	}{
		{[]string{"C0ONCALL01", "U0MGR00001"}, "  the outcome goes to C0ONCALL01, U0MGR00001 (notify)\n"},
		{nil, ""},
	} {
		var b bytes.Buffer
		g := &record.Gate{Rule: "large-refund", Risk: record.RiskHigh, PolicyRevision: "r1", Fingerprint: "ab", Notify: tt.notify}
		renderGate(&b, &workflow.RunView{Status: record.StatusDone}, g, roles)
		has := strings.Contains(b.String(), "the outcome goes to")
		if tt.want != "" && !strings.Contains(b.String(), tt.want) || tt.want == "" && has {
			t.Errorf("notify %q: shown\n%s\nwant %q", tt.notify, b.String(), tt.want)
		}
	}
}
