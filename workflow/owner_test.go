package workflow_test

import (
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// TestAWorkerTakesOverTheLeaseOfAGoneOwner: process A dies executing a run
// (after its intent), holding a lease of ten minutes. Worker B, whose
// liveness check says A is gone, takes the run over at once and finishes it
// with one effect; when it says A may still be there, B logs the lease once
// and leaves the run until the lease lapses.
func TestAWorkerTakesOverTheLeaseOfAGoneOwner(t *testing.T) {
	const ownerA, ttl = "host-a/boot-a/ns-a/4242", 10 * time.Minute
	for _, gone := range []bool{true, false} {
		t.Run("gone="+strconv.FormatBool(gone), func(t *testing.T) {
			h := newHarness(t, crashAt("after-intent"), func(c *workflow.Config) { c.Owner, c.LeaseTTL = ownerA, ttl })
			run := h.submit(refund("PAY-1", 119))
			if !survive(t, func() { _, _ = h.approve(run.ID, "U0LEAD0001") }) {
				t.Fatal("process A did not crash after its intent")
			}
			crashedAt := h.clock.Now().UTC().Truncate(time.Millisecond)
			b := newHarness(t)
			b.path, b.target, b.clock = h.path, h.target, h.clock
			b.store = nil
			var asked []string
			var log recorder
			b.open(testPolicy(t, "rev-1", h.roles), func(c *workflow.Config) {
				c.Owner, c.LeaseTTL, c.Logger = "worker-b", ttl, slog.New(&log)
				c.OwnerGone = func(owner string) bool { asked = append(asked, owner); return gone }
			})

			n, err := b.engine.Work(ctx, 20)
			if err != nil {
				t.Fatal(err)
			}
			if len(asked) != 1 || asked[0] != ownerA {
				t.Errorf("the liveness check was asked about %q, want [%s]", asked, ownerA)
			}
			v := b.get(run.ID)
			if gone {
				if n != 1 || v.Status != record.StatusDone || len(h.target.Effects()) != 1 {
					t.Fatalf("claimed %d; status %s (%s), effects %v; want the run finished at once, once", n, v.Status, v.Reason, h.target.Effects())
				}
				if l := log.lines("run taken over from an owner that is gone"); len(l) != 1 || l[0].attrs["run_id"] != run.ID || l[0].attrs["owner"] != ownerA {
					t.Errorf("logged %+v, want the takeover from %s", l, ownerA)
				}
				return
			}
			if n != 0 || v.Status != record.StatusExecuting || len(h.target.Effects()) != 0 {
				t.Fatalf("claimed %d; status %s, effects %v; want the run left to its owner", n, v.Status, h.target.Effects())
			}
			// Once per holder, not every round.
			if _, err := b.engine.Work(ctx, 20); err != nil {
				t.Fatal(err)
			}
			l := log.lines("run held by another owner")
			if until := crashedAt.Add(ttl).String(); len(l) != 1 || l[0].level != slog.LevelInfo || l[0].attrs["run_id"] != run.ID ||
				l[0].attrs["owner"] != ownerA || l[0].attrs["until"] != until {
				t.Errorf("logged %+v, want one info line for run %s held by %s until %s", l, run.ID, ownerA, until)
			}
			b.clock.Advance(ttl)
			if n, err := b.engine.Work(ctx, 20); err != nil || n != 1 {
				t.Fatalf("once the lease lapsed: claimed %d, %v", n, err)
			}
			if v := b.get(run.ID); v.Status != record.StatusDone || len(h.target.Effects()) != 1 {
				t.Fatalf("status %s, effects %v", v.Status, h.target.Effects())
			}
		})
	}
}

// TestLocalOwnerGone: only a process of this host, boot and pid namespace
// that no longer exists is gone; anything else the lease is waited out for.
func TestLocalOwnerGone(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the boot id and the pid namespace come from /proc")
	}
	parts := strings.Split(workflow.LocalOwner(), "/")
	if len(parts) != 4 || parts[3] != strconv.Itoa(os.Getpid()) || parts[1] == "-" || parts[2] == "-" {
		t.Fatalf("LocalOwner is %q, want host/boot id/pid namespace/%d", workflow.LocalOwner(), os.Getpid())
	}
	host, boot, ns := parts[0], parts[1], parts[2]
	// A process that ran and was waited for: its pid names no process now.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ended := exec.Command(self, "-test.run=^$")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	dead := strconv.Itoa(ended.Process.Pid)
	name := func(host, boot, ns, pid string) string { return strings.Join([]string{host, boot, ns, pid}, "/") }
	tests := []struct {
		what, owner string
		gone        bool
	}{
		{"a process of this host that ended", name(host, boot, ns, dead), true},
		{"this process", workflow.LocalOwner(), false},
		{"a process that exists (pid 1)", name(host, boot, ns, "1"), false},
		{"another host", name("other-"+host, boot, ns, dead), false},
		{"another boot", name(host, "00000000-0000-0000-0000-000000000000", ns, dead), false},
		{"another pid namespace", name(host, boot, "1", dead), false},
		{"a boot id not known", name(host, "-", ns, dead), false},
		{"a name of SIGNOFF_OWNER", "replica-a", false},
		{"a name of an older version", host + ":" + dead, false},
		{"no pid", name(host, boot, ns, "x"), false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		if got := workflow.LocalOwnerGone(tt.owner); got != tt.gone {
			t.Errorf("%s (%s): gone %v, want %v", tt.what, tt.owner, got, tt.gone)
		}
	}
}
