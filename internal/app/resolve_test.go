package app

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/examples/target"
	"github.com/signoff-dev/signoff/record"
)

// TestResolveARunThatNeedsAttention: a run whose outcome cannot be proven is
// no dead end. Only the highest role (the demo's manager) may resolve it, a
// resolution needs exactly one choice and a reason, and it is shown in show
// and history; the shop is never called again for what happened.
func TestResolveARunThatNeedsAttention(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, newDir func(t *testing.T) string) {
		t.Run("refusals change nothing", func(t *testing.T) {
			dir := newDir(t)
			id := needsAttention(t, dir)
			before := showRaw(t, dir, id)
			for _, args := range [][]string{
				{"--as", lead1, "--reason", "checked", "--happened"},
				{"--as", manager, "--reason", "checked"},
				{"--as", manager, "--reason", "checked", "--happened", "--did-not-happen", "--retry"},
				{"--as", manager, "--reason", "checked", "--did-not-happen"},
				{"--as", manager, "--reason", "checked", "--retry"},
				{"--as", manager, "--reason", "checked", "--did-not-happen", "--abandon", "--receipt", `{"id":"x"}`},
				{"--as", manager, "--reason", "checked", "--happened", "--receipt", `{"id":`},
				{"--as", manager, "--happened"},
			} {
				code, out, errs := signoff(t, dir, append([]string{"resolve", id}, args...)...)
				if code != exitRefused || errs == "" {
					t.Errorf("resolve %v: exit %d, want 2 with the reason\\n%s%s", args, code, out, errs)
				}
			}
			_, _, errs := signoff(t, dir, "resolve", id, "--as", lead1, "--reason", "checked", "--happened")
			if !strings.Contains(errs, "manager") {
				t.Errorf("a refusal for the role should name the role it takes: %s", errs)
			}
			if after := showRaw(t, dir, id); after != before {
				t.Errorf("a refused resolve changed the run:\\n%s\\n%s", before, after)
			}
		})
		t.Run("it happened", func(t *testing.T) {
			dir := newDir(t)
			id := needsAttention(t, dir)
			out := must(t, dir, exitDone, "resolve", id, "--as", manager, "--reason", "the shop's refunds list has it",
				"--happened", "--receipt", `{"id": "RF-by-hand"}`)
			if !strings.Contains(out, "resolved by "+manager) || !strings.Contains(out, "it happened") {
				t.Errorf("resolve's output does not say who resolved it and how:\\n%s", out)
			}
			v := showJSON(t, dir, id)
			if v.Status != record.StatusDone || len(v.Resolutions) != 1 || v.Resolutions[0].By != manager || v.Resolutions[0].Via != "cli" {
				t.Fatalf("status %s, resolutions %+v", v.Status, v.Resolutions)
			}
			if op := v.Operations[0]; op.Status != record.OpCommitted || !strings.Contains(string(op.Receipt), "RF-by-hand") {
				t.Fatalf("operation %+v", op)
			}
			if h := must(t, dir, exitDone, "history", id); !strings.Contains(h, "resolved by "+manager+": it happened") {
				t.Errorf("history does not show the resolution:\\n%s", h)
			}
			if ch := changes(t, dir); len(ch) != 1 {
				t.Errorf("the shop has %+v, want the one refund", ch)
			}
			auditEvents(t, dir) // verify is clean
		})
		t.Run("it did not happen: abandoned", func(t *testing.T) {
			dir := newDir(t)
			id := needsAttention(t, dir)
			must(t, dir, exitFailed, "resolve", id, "--as", manager, "--reason", "not in the shop", "--did-not-happen", "--abandon")
			if v := showJSON(t, dir, id); v.Status != record.StatusFailed || !strings.Contains(v.Reason, "abandoned by "+manager) {
				t.Fatalf("status %s (%q)", v.Status, v.Reason)
			}
		})
		t.Run("a crash right after the resolution", func(t *testing.T) {
			for _, c := range []struct {
				flags []string
				want  record.Status
			}{
				{[]string{"--happened"}, record.StatusDone},
				{[]string{"--did-not-happen", "--abandon"}, record.StatusFailed},
			} {
				dir := newDir(t)
				id := needsAttention(t, dir)
				crash(t, dir, "after-resolve", append([]string{"resolve", id, "--as", manager, "--reason", "checked the shop"}, c.flags...)...)
				v := showJSON(t, dir, id)
				if v.Status != c.want || len(v.Resolutions) != 1 {
					t.Fatalf("%v: after the crash, status %s and %d resolution(s); want %s, recorded once", c.flags, v.Status, len(v.Resolutions), c.want)
				}
				must(t, dir, exitFor(c.want), "resume", id)
				if ch := changes(t, dir); len(ch) != 1 {
					t.Errorf("%v: the shop has %+v, want the one refund", c.flags, ch)
				}
				auditEvents(t, dir)
			}
		})
		t.Run("a crash right after the shop was asked again", func(t *testing.T) {
			dir := newDir(t)
			id := needsAttention(t, dir)
			setShopKind(t, dir, id+"/1", "refund")
			crash(t, dir, "after-recheck", "resume", id)
			must(t, dir, exitDone, "resume", id)
			if v := showJSON(t, dir, id); v.Status != record.StatusDone || v.Operations[0].Attempts != 1 {
				t.Fatalf("status %s, operations %+v", v.Status, v.Operations)
			}
			if ch := changes(t, dir); len(ch) != 1 {
				t.Errorf("the shop has %+v, want the one refund", ch)
			}
			auditEvents(t, dir)
		})
		t.Run("resume asks the shop again", func(t *testing.T) {
			dir := newDir(t)
			id := needsAttention(t, dir)
			setShopKind(t, dir, id+"/1", "refund") // the register is put right
			must(t, dir, exitDone, "resume", id)
			if v := showJSON(t, dir, id); v.Status != record.StatusDone {
				t.Fatalf("status %s (%s), want done once the shop can say", v.Status, v.Reason)
			}
			if ch := changes(t, dir); len(ch) != 1 {
				t.Errorf("the shop has %+v, want the one refund", ch)
			}
		})
	})
}

// TestTheResolveCommandsOfTheDocs: the commands of "Resolving a run that
// needs attention", each with the exit code its comment gives, against the
// reference target. Each resolve is one choice, so each gets a deploy of its
// own that needs attention: one the target made (it committed, answered 500,
// and its register refuses to say) for --happened, one it never made (it
// answered 500 before committing, and refuses to say) for --did-not-happen.
// show and resume come first, on the first of them.
func TestTheResolveCommandsOfTheDocs(t *testing.T) {
	t.Parallel()
	shs := blocksOf(docSection(t, "docs/cli.md", "Resolving a run that needs attention"), "sh")
	if len(shs) != 1 {
		t.Fatalf("want one block of commands, got %d", len(shs))
	}
	o := newOwn(t) // skips without python3
	cfg, err := os.ReadFile(o.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "  - {name: team_lead, members: [U0LEAD0001]}\n",
		"  - {name: team_lead, members: [U0LEAD0001]}\n  - {name: manager, members: [U0MGR00001]}\n", 1))
	if err := os.WriteFile(o.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	n := 0
	needing := func(happened bool) string {
		t.Helper()
		n++
		if happened {
			o.target.Fail(target.FailAfterCommit)
		} else {
			o.target.Fail(target.FailBeforeCommit)
		}
		o.target.LookupRefuses(100)
		id := runIDOf(t, o.must(t, exitWaiting, deployProposal(fmt.Sprintf("docs-%d", n)), "submit", "-"))
		o.must(t, exitAttention, "", "approve", id, "--as", lead1)
		return id
	}
	ledgerHas := func(id string) bool {
		for _, e := range o.target.Ledger() {
			if e.Key == id+"/1" {
				return true
			}
		}
		return false
	}
	id, fresh := needing(true), true
	for _, l := range shLines(shs[0]) {
		words := shellWords(t, l.cmd)
		if words[0] != "signoff" {
			t.Fatalf("a line that is not signoff: %q", l.cmd)
		}
		happened := slices.Contains(words, "--happened")
		if words[1] == "resolve" {
			if !fresh {
				id = needing(happened)
			}
			fresh = false
			if ledgerHas(id) != happened {
				t.Fatalf("%s: the target's ledger has %s/1: %v", l.cmd, id, !happened)
			}
			o.target.LookupRefuses(0)
		}
		for i, w := range words {
			if w == "RUN" {
				words[i] = id
			}
		}
		if code, out, errs := o.run(t, nil, "", words[1:]...); code != l.exit {
			t.Fatalf("%s: exit %d, want %d\n%s%s", l.cmd, code, l.exit, out, errs)
		}
		v := o.view(t, id)
		switch {
		case words[1] != "resolve":
			if v.Status != record.StatusNeedsAttention {
				t.Fatalf("%s: status %s", l.cmd, v.Status)
			}
		case happened:
			if v.Status != record.StatusDone || !strings.Contains(string(v.Operations[0].Receipt), "D-123") {
				t.Errorf("%s: status %s, operations %+v", l.cmd, v.Status, v.Operations)
			}
		case slices.Contains(words, "--retry"):
			if v.Status != record.StatusDone || !ledgerHas(id) {
				t.Errorf("%s: status %s, in the target's ledger: %v", l.cmd, v.Status, ledgerHas(id))
			}
		default:
			if v.Status != record.StatusFailed || ledgerHas(id) {
				t.Errorf("%s: status %s, in the target's ledger: %v", l.cmd, v.Status, ledgerHas(id))
			}
		}
		if words[1] == "resolve" && (len(v.Resolutions) != 1 || v.Resolutions[0].By != "U0MGR00001") {
			t.Errorf("%s: resolutions %+v", l.cmd, v.Resolutions)
		}
	}
	if n != 3 {
		t.Fatalf("%d runs resolved, want one for each choice", n)
	}
}
