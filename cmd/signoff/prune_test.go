package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/internal/clocktest"
)

// laterClock is the time 100 days from now: every run made now ended more
// than 90 days before it.
type laterClock struct{}

func (laterClock) Now() time.Time { return time.Now().Add(100 * 24 * time.Hour) }
func (laterClock) Sleep(ctx context.Context, d time.Duration) error {
	return ctx.Err()
}

// signoffLater runs one command in process as if 100 days had passed.
func signoffLater(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	c := &cli{ctx: t.Context(), getenv: noEnv, stdin: strings.NewReader(""), out: &out, errOut: &errb, clock: laterClock{}}
	code := c.execute(append([]string{"--db", dbPath(dir), "--shop", shopPath(dir)}, args...))
	return code, out.String(), errb.String()
}

// storeText is what a prune could change, as the read commands show it.
func storeText(t *testing.T, dir string, ids ...string) string {
	t.Helper()
	s := must(t, dir, 0, "runs", "--json") + must(t, dir, 0, "audit", "--json")
	for _, id := range ids {
		s += must(t, dir, 0, "history", id, "--json")
	}
	return s
}

// TestPruneCommand: bad ages are refused with exit 2 and change nothing; a
// dry run says what it would remove and changes nothing; the prune removes
// the ended runs' states, leaves the waiting run approvable, verify passes,
// and show (and show --json) of a pruned run says what was pruned and kept.
func TestPruneCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	done := runIDOf(t, must(t, dir, exitDone, "submit", fixture("small-refund.json")))
	rejected := runIDOf(t, must(t, dir, exitWaiting, "submit", fixture("reship-planter.json")))
	must(t, dir, exitEnded, "reject", rejected, "--as", lead1, "--reason", "not this one")
	waiting := runIDOf(t, must(t, dir, exitWaiting, "submit", fixture("refund-double-charge.json")))
	start := storeText(t, dir, done, rejected, waiting)

	for _, bad := range [][]string{
		{"prune", "--older-than", "banana"},
		{"prune", "--older-than", "-5d"},
		{"prune", "--older-than", "0"},
		{"prune", "--older-than", "0d"},
		{"prune"},
	} {
		code, out, errs := signoffLater(t, dir, bad...)
		if code != exitRefused || !strings.Contains(errs, "older-than") {
			t.Errorf("signoff %s: exit %d, want %d, saying what is wrong with --older-than\nstdout: %s\nstderr: %s",
				strings.Join(bad, " "), code, exitRefused, out, errs)
		}
	}
	if storeText(t, dir, done, rejected, waiting) != start {
		t.Fatal("a refused prune changed the store")
	}

	code, out, errs := signoffLater(t, dir, "prune", "--older-than", "90d", "--dry-run")
	if code != 0 || !strings.Contains(out, "would prune 2 run(s)") || !strings.Contains(out, "nothing was changed") {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errs)
	}
	if storeText(t, dir, done, rejected, waiting) != start {
		t.Fatal("the dry run changed the store")
	}

	code, out, errs = signoffLater(t, dir, "prune", "--older-than", "90d")
	if code != 0 || !strings.Contains(out, "pruned 2 run(s)") || !strings.Contains(out, "file: ") {
		t.Fatalf("prune: exit %d\n%s\n%s", code, out, errs)
	}
	t.Logf("prune said:\n%s", out)
	must(t, dir, 0, "verify")

	text := must(t, dir, exitEnded, "show", rejected)
	if !strings.Contains(text, "pruned ") || !strings.Contains(text, "kept: ") {
		t.Fatalf("show of a pruned run does not say it was pruned:\n%s", text)
	}
	v := show(t, dir, done)
	if v.Pruned == nil || v.Pruned.At.IsZero() || v.Problem != "" || len(v.Evidence) != 0 || len(v.Operations) != 1 {
		t.Fatalf("show --json of a pruned run: %+v", v)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(showRaw(t, dir, done)), &raw); err != nil || raw["pruned"] == nil {
		t.Fatalf("show --json has no pruned object: %v", err)
	}

	must(t, dir, exitDone, "approve", waiting, "--as", lead1)
	must(t, dir, 0, "verify")
	code, out, _ = signoffLater(t, dir, "prune", "--older-than", "90d")
	if code != 0 || !strings.Contains(out, "pruned 1 run(s)") {
		// The run approved just now ended too, 100 days before the clock.
		t.Fatalf("a second prune: exit %d\n%s", code, out)
	}
}

// TestServePrunesOnItsTicks: what serve runs for retention: prunes at start
// and at each tick, with the cutoff taken from its clock at that tick.
func TestServePrunesOnItsTicks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := runIDOf(t, must(t, dir, exitDone, "submit", fixture("small-refund.json")))
	o := options{db: dbPath(dir), shop: shopPath(dir), quietBuiltin: true}
	a, err := openApp(t.Context(), o, noEnv, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	now := make(chan time.Time, 1)
	clock := time.Now()
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		pruneLoop(a, 90*24*time.Hour, clocktest.Chan(now), tickPace(ticks)).Run(ctx)
	}()
	now <- clock // at start: nothing ended 90 days ago
	now <- clock.Add(100 * 24 * time.Hour)
	// The second clock read happens only after the first prune and a tick.
	ticks <- time.Time{}
	now <- clock.Add(100 * 24 * time.Hour) // a third prune: nothing left
	ticks <- time.Time{}
	cancel()
	<-done
	if v := show(t, dir, first); v.Pruned == nil {
		t.Fatalf("the run was not pruned at the tick: %+v", v)
	}
}

// tickPace paces a loop by the test's hand: its next round comes when the
// test sends on the channel.
type tickPace <-chan time.Time

func (p tickPace) Next() <-chan time.Time { return p }
func (tickPace) Stop()                    {}
