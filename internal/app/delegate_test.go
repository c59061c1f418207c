package app

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
)

var quoted = regexp.MustCompile(`"([^"]+)"`)

// TestTheDelegateCommandsOfTheDocs: the commands of "Delegating", on each
// store, each with the exit code its comment gives and printing what its
// comment quotes. The date of the docs is moved to a week from now (a
// delegation must end in the future, within 90 days); RUN is a run waiting
// for a team lead, ID the delegation the first command made. show and
// history then say who decided on whose behalf, the run's JSON has
// on_behalf_of, and the audit log has the delegation's events.
func TestTheDelegateCommandsOfTheDocs(t *testing.T) {
	t.Parallel()
	shs := blocksOf(docSection(t, "docs/cli.md", "Delegating"), "sh")
	if len(shs) != 1 {
		t.Fatalf("want one block of commands, got %d", len(shs))
	}
	onEachStore(t, func(t *testing.T, newDir func(t *testing.T) string) {
		dir := newDir(t)
		id := submitWaiting(t, dir)
		day := time.Now().UTC().AddDate(0, 0, 7)
		dates := strings.NewReplacer("2026-12-24", day.Format(time.DateOnly), "2026-12-25", day.AddDate(0, 0, 1).Format(time.DateOnly))
		delegation := ""
		for _, l := range shLines(shs[0]) {
			words := shellWords(t, dates.Replace(l.cmd))
			for i, w := range words {
				switch w {
				case "RUN":
					words[i] = id
				case "ID":
					words[i] = delegation
				}
			}
			out := must(t, dir, l.exit, words[1:]...)
			if words[1] == "delegate" && delegation == "" {
				delegation, _, _ = strings.Cut(out, "\n")
			}
			for _, m := range quoted.FindAllStringSubmatch(dates.Replace(l.comment), -1) {
				if !strings.Contains(out, m[1]) {
					t.Errorf("%s prints no %q:\n%s", l.cmd, m[1], out)
				}
			}
		}
		if !strings.HasPrefix(delegation, "dlg_") {
			t.Fatalf("the delegation's id: %q", delegation)
		}
		v := showJSON(t, dir, id)
		if v.Status != record.StatusDone || len(v.Decisions) != 1 || v.Decisions[0].OnBehalfOf != lead1 || v.Decisions[0].By != "U0DEPUTY01" {
			t.Fatalf("status %s, decisions %+v", v.Status, v.Decisions)
		}
		if !strings.Contains(showRaw(t, dir, id), `"on_behalf_of": "U0LEAD0001"`) {
			t.Error("the run's JSON has no on_behalf_of")
		}
		if h := must(t, dir, exitDone, "history", id); !strings.Contains(h, "approved by U0DEPUTY01 on behalf of U0LEAD0001") {
			t.Errorf("history does not say on whose behalf:\n%s", h)
		}
		audit := must(t, dir, exitDone, "audit")
		for _, want := range []string{"delegated", "delegation_revoked"} {
			if !strings.Contains(audit, want) {
				t.Errorf("the audit log has no %s event:\n%s", want, audit)
			}
		}
		if out := must(t, dir, exitDone, "delegations"); !strings.Contains(out, "no delegation") {
			t.Errorf("after the revocation, delegations prints:\n%s", out)
		}
		if out := must(t, dir, exitDone, "delegations", "--all", "--json"); !strings.Contains(out, `"revoked_by": "U0LEAD0001"`) {
			t.Errorf("delegations --all --json:\n%s", out)
		}
		// Refused: changes nothing, says why.
		code, _, errs := signoff(t, dir, "delegate", "--from", lead1, "--to", lead1, "--until", day.Format(time.DateOnly))
		if code != exitRefused || !strings.Contains(errs, "cannot delegate to themselves") {
			t.Errorf("delegating to oneself: exit %d, %s", code, errs)
		}
		auditEvents(t, dir) // verify is clean
	})
}

// TestADelegationKilledAfterItsCommitIsRecordedOnce: the process that
// records a delegation is killed right after the commit, before it prints
// it; the delegation is there once, audited once, and lets its delegate in.
func TestADelegationKilledAfterItsCommitIsRecordedOnce(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(t *testing.T) string) {
		dir := newDir(t)
		id := submitWaiting(t, dir)
		until := time.Now().UTC().Add(48 * time.Hour).Format(time.RFC3339)
		crash(t, dir, "after-delegate", "delegate", "--from", lead1, "--to", "U0DEPUTY01", "--until", until)
		out := must(t, dir, exitDone, "delegations", "--json")
		if strings.Count(out, `"id": "dlg_`) != 1 || !strings.Contains(out, `"to": "U0DEPUTY01"`) {
			t.Fatalf("after the crash, delegations:\n%s", out)
		}
		if n := strings.Count(must(t, dir, exitDone, "audit"), "delegated"); n != 1 {
			t.Errorf("%d delegated events, want 1", n)
		}
		must(t, dir, exitDone, "approve", id, "--as", "U0DEPUTY01")
		auditEvents(t, dir)
	})
}
