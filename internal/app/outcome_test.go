package app

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/bot"
)

// TestACLIDecisionQueuesTheOutcome: the process that ends a run (here the
// CLI) queues its outcome with the change, for whichever server delivers
// Slack's outbox: a direct message to the requester's Slack user and a
// message to each of the rule's notify recipients, which `signoff outbox`
// lists with where they go. Without a slack: section nothing is queued.
func TestACLIDecisionQueuesTheOutcome(t *testing.T) {
	t.Parallel()
	const slackSection = "\nslack:\n  channel: C0APPROVALS\n  app_id: A0SIGNOFF1\n  team_id: T0SHOP0001\n"
	notify := []string{
		"approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}",
		"approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}\n      notify: [C0ONCALL01]",
	}
	for _, tt := range []struct {
		name  string
		extra string
		want  []string // kind → to
	}{
		{"with Slack", slackSection + "requesters:\n  slack_users:\n    agent:resolver: U0OWNER001\n",
			[]string{"slack.outcome_dm U0OWNER001", "slack.outcome_notify C0ONCALL01"}},
		{"without Slack", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := writeConfig(t, dir, "signoff.yaml", append(notify, "actions:", strings.TrimPrefix(tt.extra, "\n")+"actions:")...)
			code, out, errs := cliWith(t, dir, cfg, nil, "submit", fixture("refund-double-charge.json"))
			if code != exitWaiting {
				t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
			}
			id := runIDOf(t, out)
			if code, out, errs := cliWith(t, dir, cfg, nil, "reject", id, "--as", lead1, "--reason", "store credit instead"); code != exitEnded {
				t.Fatalf("reject: exit %d\n%s%s", code, out, errs)
			}
			code, out, errs = cliWith(t, dir, cfg, nil, "outbox", "--json")
			var rows []outboxRow
			if err := json.Unmarshal([]byte(out), &rows); code != exitDone || err != nil {
				t.Fatalf("outbox --json: exit %d, %v\n%s%s", code, err, out, errs)
			}
			var got []string
			for _, r := range rows {
				if r.Kind == bot.KindOutcomeDM || r.Kind == bot.KindOutcomeNotify {
					got = append(got, string(r.Kind)+" "+r.To)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("outcome rows %q, want %q", got, tt.want)
			}
			if tt.want != nil {
				code, out, _ = cliWith(t, dir, cfg, nil, "outbox")
				if code != exitDone || !strings.Contains(out, "slack.outcome_dm") || !strings.Contains(out, "U0OWNER001") {
					t.Errorf("outbox does not show the direct message and where it goes:\n%s", out)
				}
			}
		})
	}
}
