package main

import (
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/workflow"
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
			v := show(t, dir, id)
			if v.Status != workflow.StatusDone || len(v.Resolutions) != 1 || v.Resolutions[0].By != manager || v.Resolutions[0].Via != "cli" {
				t.Fatalf("status %s, resolutions %+v", v.Status, v.Resolutions)
			}
			if op := v.Operations[0]; op.Status != workflow.OpCommitted || !strings.Contains(string(op.Receipt), "RF-by-hand") {
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
			if v := show(t, dir, id); v.Status != workflow.StatusFailed || !strings.Contains(v.Reason, "abandoned by "+manager) {
				t.Fatalf("status %s (%q)", v.Status, v.Reason)
			}
		})
		t.Run("a crash right after the resolution", func(t *testing.T) {
			for _, c := range []struct {
				flags []string
				want  workflow.Status
			}{
				{[]string{"--happened"}, workflow.StatusDone},
				{[]string{"--did-not-happen", "--abandon"}, workflow.StatusFailed},
			} {
				dir := newDir(t)
				id := needsAttention(t, dir)
				crash(t, dir, "after-resolve", append([]string{"resolve", id, "--as", manager, "--reason", "checked the shop"}, c.flags...)...)
				v := show(t, dir, id)
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
			if v := show(t, dir, id); v.Status != workflow.StatusDone || v.Operations[0].Attempts != 1 {
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
			if v := show(t, dir, id); v.Status != workflow.StatusDone {
				t.Fatalf("status %s (%s), want done once the shop can say", v.Status, v.Reason)
			}
			if ch := changes(t, dir); len(ch) != 1 {
				t.Errorf("the shop has %+v, want the one refund", ch)
			}
		})
	})
}
