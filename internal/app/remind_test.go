package app

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/fixtures"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// remindConfig is the built-in config whose large refunds remind 24h and
// 1h before their 72h deadline, with a slack: section for the replies.
func remindConfig(t *testing.T, dir string) string {
	t.Helper()
	const approval = "approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}"
	return writeConfig(t, dir, "signoff.yaml", approval, approval+"\n      remind: [24h, 1h]",
		"actions:", "slack:\n  channel: C0APPROVALS\n  app_id: A0SIGNOFF1\n  team_id: T0SHOP0001\nactions:")
}

// submitLongAgo submits the double-charge refund as if ago had passed since:
// a process on a clock set back, so that the real clock of the commands
// after it finds the deadline near.
func submitLongAgo(t *testing.T, dir, cfg string, ago time.Duration) string {
	t.Helper()
	o := options{db: dbPath(dir), shop: shopPath(dir), config: cfg}
	if _, ok := pgStores.Load(dir); ok {
		o.keys = filepath.Join(dir, "signoff.keys")
	}
	ctx := context.Background()
	a, err := openApp(ctx, o, noEnv, io.Discard, clocktest.New(time.Now().Add(-ago)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	body, err := fixtures.Proposal("refund-double-charge")
	if err != nil {
		t.Fatal(err)
	}
	p, err := workflow.ParseProposal(body)
	if err != nil {
		t.Fatal(err)
	}
	run, err := a.engine.Submit(ctx, p)
	if err != nil || run.Status != record.StatusWaitingApproval {
		t.Fatalf("submit: %v (%+v)", err, run)
	}
	return run.ID
}

// TestAReminderDueDuringADowntimeIsRecordedOnce: a run submitted 71h30m ago
// (its 24h and 1h reminders both fell due while nothing ran) gets one
// reminder, the 1h one, with the 24h one passed, even when the process that
// records it is killed right after the commit: the next one finds it done.
// show, history, the outbox and the audit log say so.
func TestAReminderDueDuringADowntimeIsRecordedOnce(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(t *testing.T) string) {
		dir := newDir(t)
		cfg := remindConfig(t, dir)
		id := submitLongAgo(t, dir, cfg, 71*time.Hour+30*time.Minute)
		crash(t, dir, "after-remind", "--config", cfg, "remind")
		if out := must(t, dir, exitDone, "--config", cfg, "remind"); !strings.Contains(out, "0 reminder(s) recorded") {
			t.Errorf("after the crash, remind recorded again:\n%s", out)
		}
		v := showJSON(t, dir, id)
		if !slices.Equal(v.Gate.Remind, []record.Seconds{24 * 3600, 3600}) || len(v.Reminders) != 2 ||
			!v.Reminders[0].Passed || v.Reminders[1].Passed || v.Reminders[1].Before != 3600 ||
			!slices.Equal(v.Reminders[1].Mention, []string{lead1, lead2, manager}) {
			t.Fatalf("gate remind %v, reminders %+v", v.Gate.Remind, v.Reminders)
		}
		show := must(t, dir, exitWaiting, "--config", cfg, "show", id)
		for _, want := range []string{"reminders 24h0m0s, 1h0m0s before the deadline", "reminder 24h0m0s before: passed", "reminded 1h0m0s before the deadline at"} {
			if !strings.Contains(show, want) {
				t.Errorf("show does not say %q:\n%s", want, show)
			}
		}
		history := must(t, dir, exitDone, "history", id)
		if want := "reminded 1h0m0s before the deadline, mentioning " + lead1 + ", " + lead2 + ", " + manager; strings.Count(history, want) != 1 {
			t.Errorf("history should say %q once:\n%s", want, history)
		}
		var rows []outboxRow
		if err := json.Unmarshal([]byte(must(t, dir, exitDone, "outbox", "--json")), &rows); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range rows {
			if r.Kind == bot.KindReminder && r.RunID == id {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d reminder replies queued, want 1: %+v", n, rows)
		}
		auditEvents(t, dir) // verify is clean: the reminder has its audit event
	})
}
