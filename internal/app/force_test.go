package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

// forceConfig is the built-in config whose large refunds need two team
// leads, or a manager's forced approval reviewed by a team lead within 24h.
func forceConfig(t *testing.T, dir string) string {
	t.Helper()
	const approval = "approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}"
	return writeConfig(t, dir, "signoff.yaml", approval,
		"approval: {role: team_lead, count: 2, expires: 72h, self_approval: false, edit: true}\n      break_glass: {role: manager, review: {role: team_lead, within: 24h}}")
}

const manager1 = "U0MGR00001"

// TestForcedApprovalSurvivesACrashAndIsReviewedOnce: a manager forces the
// approval with --force --reason and the process is killed right after the
// commit; on restart the run executes exactly once, a second force is
// refused, the review exists once and is listed until a team lead
// acknowledges it, which survives its own crash; show, history and the audit log say so.
func TestForcedApprovalSurvivesACrashAndIsReviewedOnce(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(t *testing.T) string) {
		dir := newDir(t)
		cfg := forceConfig(t, dir)
		id := submitWaiting(t, dir, "--config", cfg)
		if code, _, errs := signoff(t, dir, "--config", cfg, "approve", id, "--as", lead1, "--force"); code == exitDone || code == exitWaiting || !strings.Contains(errs, "--reason") {
			t.Fatalf("--force without --reason: exit %d, %s", code, errs)
		}
		if code, _, errs := signoff(t, dir, "--config", cfg, "approve", id, "--as", lead1, "--force", "--reason", "urgent"); code != exitRefused || !strings.Contains(errs, "forcing this needs manager or above") {
			t.Fatalf("a team lead's force: exit %d, %s", code, errs)
		}
		crash(t, dir, "after-force-commit", "--config", cfg, "approve", id, "--as", manager1, "--force", "--reason", "customer charged twice, payments on fire")
		noChanges(t, dir)
		if v := showJSON(t, dir, id); v.Status != record.StatusExecuting || v.Forced == nil || v.Forced.By != manager1 {
			t.Fatalf("after the crash: status %s, forced %+v", v.Status, v.Forced)
		}
		if code, _, errs := signoff(t, dir, "--config", cfg, "approve", id, "--as", manager1, "--force", "--reason", "again"); code != exitRefused || !strings.Contains(errs, "already approved") {
			t.Fatalf("a second force: exit %d, %s", code, errs)
		}
		must(t, dir, exitDone, "--config", cfg, "resume", id)
		must(t, dir, exitDone, "--config", cfg, "resume", id)
		oneRefund(t, dir, id+"/1", "119.00")

		show := must(t, dir, exitDone, "--config", cfg, "show", id)
		for _, want := range []string{"forced by " + manager1 + " (manager)", "customer charged twice, payments on fire", "review by team_lead or above due"} {
			if !strings.Contains(show, want) {
				t.Errorf("show does not say %q:\n%s", want, show)
			}
		}
		if history := must(t, dir, exitDone, "history", id); strings.Count(history, "approval forced by "+manager1+" (manager), bypassing the quorum") != 1 {
			t.Errorf("history should say the force once:\n%s", history)
		}
		var pending []record.Review
		if err := json.Unmarshal([]byte(must(t, dir, exitDone, "--config", cfg, "reviews", "--json")), &pending); err != nil || len(pending) != 1 || pending[0].RunID != id {
			t.Fatalf("reviews: %+v, %v", pending, err)
		}
		if code, _, errs := signoff(t, dir, "--config", cfg, "review", "ack", id, "--as", manager1); code != exitRefused || !strings.Contains(errs, "may not acknowledge") {
			t.Fatalf("the forcer's acknowledge: exit %d, %s", code, errs)
		}
		crash(t, dir, "after-acknowledge-commit", "--config", cfg, "review", "ack", id, "--as", lead1, "--note", "checked with payments")
		if out := must(t, dir, exitDone, "--config", cfg, "reviews"); !strings.Contains(out, "no review pending") {
			t.Errorf("reviews after the acknowledge:\n%s", out)
		}
		if code, _, errs := signoff(t, dir, "--config", cfg, "review", "ack", id, "--as", lead2); code != exitRefused || !strings.Contains(errs, "acknowledged by "+lead1) {
			t.Fatalf("a second acknowledge: exit %d, %s", code, errs)
		}
		if show := must(t, dir, exitDone, "--config", cfg, "show", id); !strings.Contains(show, "review acknowledged by "+lead1+" at ") || !strings.Contains(show, ": checked with payments") {
			t.Errorf("show does not say the review was acknowledged:\n%s", show)
		}
		if v := showJSON(t, dir, id); v.Review == nil || v.Review.Status != record.ReviewAcknowledged || v.Review.AcknowledgedBy != lead1 {
			t.Errorf("show --json review %+v", v.Review)
		}
		if audit := must(t, dir, exitDone, "audit", "--run", id); strings.Count(audit, "review_acknowledged") != 1 || strings.Count(audit, "policy_bypassed") != 1 {
			t.Errorf("the audit log should have one policy_bypassed and one review_acknowledged:\n%s", audit)
		}
		oneRefund(t, dir, id+"/1", "119.00")
		auditEvents(t, dir)
	})
}

// TestTheBreakGlassExampleOfTheDocsRuns: the config of docs/configuration.md,
// "Break-glass", loads; its commands force a run waiting for two team leads
// (it executes once), list its review and acknowledge it, each exiting as
// the comment says; a team lead's force is refused as the text says.
func TestTheBreakGlassExampleOfTheDocsRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	section := docSection(t, "docs/configuration.md", "Break-glass")
	yamls := blocksOf(section, "yaml")
	if len(yamls) != 1 {
		t.Fatalf("%d yaml blocks", len(yamls))
	}
	if err := os.WriteFile(filepath.Join(dir, "signoff.yaml"), []byte(yamls[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "signoff.yaml")
	id := submitWaiting(t, dir, "--config", cfg)
	if code, _, errs := signoff(t, dir, "--config", cfg, "approve", id, "--as", lead1, "--force", "--reason", "urgent"); code != exitRefused || !strings.Contains(errs, "forcing this needs incident_commander or above") {
		t.Fatalf("a team lead's force: exit %d, %s", code, errs)
	}
	var outs []string
	for _, l := range shLines(blocksOf(section, "sh")[0]) {
		words := shellWords(t, l.cmd)[1:]
		for i, w := range words {
			if w == "RUN" {
				words[i] = id
			}
			if w == "signoff.yaml" {
				words[i] = cfg
			}
		}
		outs = append(outs, must(t, dir, l.exit, words...))
	}
	oneRefund(t, dir, id+"/1", "119.00")
	if len(outs) != 3 || !strings.Contains(outs[1], id) || !strings.Contains(outs[1], "review by security or above, due in 24h0m0s") ||
		!strings.Contains(outs[2], "acknowledged by U0SEC00001") {
		t.Fatalf("printed %q", outs)
	}
	if out := must(t, dir, exitDone, "--config", cfg, "reviews"); !strings.Contains(out, "no review pending") {
		t.Fatalf("reviews after the acknowledge: %s", out)
	}
}
