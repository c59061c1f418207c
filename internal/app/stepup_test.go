package app

import (
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

// stepUpConfig is the built-in config whose large refunds need one team
// lead, confirmed on the web within 5m.
func stepUpConfig(t *testing.T, dir string) string {
	t.Helper()
	const approval = "approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}"
	return writeConfig(t, dir, "signoff.yaml", approval, approval+"\n      confirm: web")
}

// TestTheCLICannotApproveAStepUpRule: signoff approve on a rule with
// confirm: web records the approval as unconfirmed and refuses (exit 4),
// the run still waiting and nothing refunded; the CLI has no way to say
// the decision came from the web; a rejection from the CLI still works.
func TestTheCLICannotApproveAStepUpRule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := stepUpConfig(t, dir)
	id := submitWaiting(t, dir, "--config", cfg)
	code, _, errs := signoff(t, dir, "--config", cfg, "approve", id, "--as", lead1)
	if code != exitRefused || !strings.Contains(errs, "does not count until you confirm it on the run's page") {
		t.Fatalf("approve: exit %d, %s", code, errs)
	}
	v := showJSON(t, dir, id)
	if v.Status != record.StatusWaitingApproval || len(v.Decisions) != 0 || len(v.Unconfirmed) != 1 || v.Unconfirmed[0].Via != record.ViaCLI {
		t.Fatalf("after approve: %s, decisions %+v, unconfirmed %+v", v.Status, v.Decisions, v.Unconfirmed)
	}
	noChanges(t, dir)
	if h := must(t, dir, exitDone, "--config", cfg, "history", id); !strings.Contains(h, "approved by "+lead1+" via cli: not counted until confirmed on the web console (a sign-in within 5m)") {
		t.Errorf("history does not say the approval waits:\n%s", h)
	}
	if code, _, errs := signoff(t, dir, "--config", cfg, "approve", id, "--as", lead1, "--via", "web"); code == exitDone || code == exitWaiting || !strings.Contains(errs, "unknown flag") {
		t.Fatalf("approve --via web: exit %d, %s", code, errs)
	}
	if out := must(t, dir, exitWaiting, "--config", cfg, "show", id); !strings.Contains(out, "approvals count only from the web console, after a sign-in within 5m") || !strings.Contains(out, "approved by "+lead1+" via cli at ") {
		t.Errorf("show does not say the approval waits for the web:\n%s", out)
	}
	signoff(t, dir, "--config", cfg, "reject", id, "--as", lead1, "--reason", "not this one")
	if v := showJSON(t, dir, id); v.Status != record.StatusRejected {
		t.Fatalf("after reject: %s", v.Status)
	}
}

// TestAnUnconfirmedApprovalSurvivesACrash: killed right after an approval
// of a step-up rule was recorded as unconfirmed, the restarted process
// finds it recorded once, the run still waiting and nothing refunded; the
// same approval again records nothing more.
func TestAnUnconfirmedApprovalSurvivesACrash(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(t *testing.T) string) {
		dir := newDir(t)
		cfg := stepUpConfig(t, dir)
		id := submitWaiting(t, dir, "--config", cfg)
		crash(t, dir, "after-unconfirmed-commit", "--config", cfg, "approve", id, "--as", lead1)
		noChanges(t, dir)
		for range 2 {
			v := showJSON(t, dir, id)
			if v.Status != record.StatusWaitingApproval || len(v.Decisions) != 0 || len(v.Unconfirmed) != 1 {
				t.Fatalf("after the crash: %s, decisions %+v, unconfirmed %+v", v.Status, v.Decisions, v.Unconfirmed)
			}
			if code, _, errs := signoff(t, dir, "--config", cfg, "approve", id, "--as", lead1); code != exitRefused || !strings.Contains(errs, "confirm it on the run's page") {
				t.Fatalf("approve again: exit %d, %s", code, errs)
			}
		}
		must(t, dir, exitWaiting, "--config", cfg, "resume", id)
		noChanges(t, dir)
		if h := must(t, dir, exitDone, "--config", cfg, "history", id); strings.Count(h, "not counted until confirmed on the web console") != 1 {
			t.Errorf("history should say the unconfirmed approval once:\n%s", h)
		}
	})
}
