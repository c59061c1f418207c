package app

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
)

// escalateConfig is the built-in config whose large refunds need a manager,
// escalating to team leads after 4h (and 4h more of the deadline), and to a
// user of no role after 8h, with a slack: section for the replies.
func escalateConfig(t *testing.T, dir string) string {
	t.Helper()
	const approval = "approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}"
	return writeConfig(t, dir, "signoff.yaml", approval,
		"approval: {role: manager, count: 1, expires: 72h, self_approval: false, edit: true}\n      escalate: [{after: 4h, to: {role: team_lead}, extend: 4h}, {after: 8h, to: {users: [U0OUT00001]}}]",
		"actions:", "slack:\n  channel: C0APPROVALS\n  app_id: A0SIGNOFF1\n  team_id: T0SHOP0001\nactions:")
}

// TestEscalationsDueDuringADowntimeAreAppliedOnce: a run submitted 9h ago
// (both steps fell due while nothing ran) gets them both in one escalation,
// the deadline moved once, even when the process that records it is killed
// right after the commit: the next one finds it done. A team lead, refused
// by the rule, may then decide. show, history, the outbox and the audit log
// say so.
func TestEscalationsDueDuringADowntimeAreAppliedOnce(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(t *testing.T) string) {
		dir := newDir(t)
		cfg := escalateConfig(t, dir)
		id := submitLongAgo(t, dir, cfg, 9*time.Hour)
		before := showJSON(t, dir, id)
		crash(t, dir, "after-escalate", "--config", cfg, "escalate")
		if out := must(t, dir, exitDone, "--config", cfg, "escalate"); !strings.Contains(out, "0 run(s) escalated") {
			t.Errorf("after the crash, escalate applied again:\n%s", out)
		}
		v := showJSON(t, dir, id)
		if len(v.Gate.Escalate) != 2 || len(v.Escalations) != 2 || v.Escalations[0].Role != "team_lead" || v.Escalations[1].Users[0] != "U0OUT00001" ||
			!v.Deadline.Equal(before.Deadline.Add(4*time.Hour)) {
			t.Fatalf("gate escalate %+v, escalations %+v, deadline %v (was %v)", v.Gate.Escalate, v.Escalations, v.Deadline, before.Deadline)
		}
		show := must(t, dir, exitWaiting, "--config", cfg, "show", id)
		for _, want := range []string{"escalation 0: 4h0m0s after the request, team_lead or above may decide too, the deadline 4h0m0s later",
			"escalated (step 0) at", "escalated (step 1) at", "U0OUT00001 may decide too"} {
			if !strings.Contains(show, want) {
				t.Errorf("show does not say %q:\n%s", want, show)
			}
		}
		history := must(t, dir, exitDone, "history", id)
		if want := "escalated (step 0,1): team_lead or above, U0OUT00001 may decide too"; strings.Count(history, want) != 1 {
			t.Errorf("history should say %q once:\n%s", want, history)
		}
		var rows []outboxRow
		if err := json.Unmarshal([]byte(must(t, dir, exitDone, "outbox", "--json")), &rows); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range rows {
			if r.Kind == bot.KindEscalation && r.RunID == id {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d escalation replies queued, want 1: %+v", n, rows)
		}
		must(t, dir, exitDone, "--config", cfg, "approve", id, "--as", lead1)
		auditEvents(t, dir) // verify is clean: the escalation has its audit event
	})
}
