package bot

import (
	"net/http"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
)

// stepUpDefault is the built-in config whose approvals are confirmed on
// the web within 5m, with the console at signoff.example.com/ui.
func stepUpDefault(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	rules := cfg.Policy.Rules()
	for i := range rules {
		if rules[i].Approval != nil {
			rules[i].Approval.StepUp = 300
		}
	}
	p, err := policy.New(cfg.Policy.Revision(), rules, cfg.Roles)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Policy = p
	cfg.UI.BaseURL = "https://signoff.example.com/ui"
	return cfg
}

// TestASlackApprovalOfAStepUpRuleAsksForTheWeb: a signed approve click on
// a rule with confirm: web leaves the run waiting with no decision, records
// the unconfirmed approval, and tells the clicker to confirm on the run's
// page at ui.base_url.
func TestASlackApprovalOfAStepUpRuleAsksForTheWeb(t *testing.T) {
	cfg := stepUpDefault(t)
	h := newSlackHarnessWith(t, cfg, func(c *ServerConfig) { c.ConsoleURL = cfg.UI.BaseURL })
	v := h.submit("refund-double-charge", "")
	status, resp := h.click(fixture(t, "block_actions_approve.json", refOf(v), leadGrace, nil))
	if status != http.StatusOK || resp != "" {
		t.Fatalf("click: %d %q", status, resp)
	}
	after := h.get(v.ID)
	if after.Status != record.StatusWaitingApproval || len(after.Decisions) != 0 {
		t.Fatalf("after the click: %s with decisions %+v; want waiting with none", after.Status, after.Decisions)
	}
	if len(after.Unconfirmed) != 1 || after.Unconfirmed[0].By != leadGrace || after.Unconfirmed[0].Via != record.ViaSlack {
		t.Fatalf("unconfirmed: %+v", after.Unconfirmed)
	}
	e := h.acts.Ephemerals()
	link := "<https://signoff.example.com/ui/runs/" + v.ID + "|confirm it on the run's page>"
	if len(e) != 1 || !strings.Contains(e[0].Text, "does not count yet") || !strings.Contains(e[0].Text, link) {
		t.Fatalf("the clicker was told %+v; want the link %s", e, link)
	}
}
