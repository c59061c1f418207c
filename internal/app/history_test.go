package app

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/sqlite"
)

// historyWhats is the WHAT column of `signoff history`, a line a checkpoint.
func historyWhats(t *testing.T, out string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	cols := regexp.MustCompile(`  +`)
	var whats []string
	for _, l := range lines[1:] {
		f := cols.Split(l, -1)
		if len(f) < 6 {
			t.Fatalf("history line %q has %d columns:\n%s", l, len(f), out)
		}
		whats = append(whats, f[4])
	}
	return whats
}

// TestHistoryLabelsComeFromTheAuditEvents: an agent's run reads as its
// start, its steps, its proposal gated, a reassignment, a deadline moved
// and a rejection, and its fork as a fork, each as the audit event of the
// checkpoint recorded it; a checkpoint no event names says so, whatever its
// state holds.
func TestHistoryLabelsComeFromTheAuditEvents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := runIDOf(t, must(t, dir, exitWaiting, "run", "T-65273"))
	must(t, dir, exitWaiting, "reassign", id, "--to", lead2, "--as", lead1)
	must(t, dir, exitWaiting, "extend", id, "24h", "--as", lead1)
	deadline := showJSON(t, dir, id).Deadline
	if deadline == nil {
		t.Fatal("the extended run shows no deadline")
	}
	must(t, dir, exitEnded, "reject", id, "--as", lead2, "--reason", "not this one")
	want := []string{"started", "step 1", "step 2", "step 3", "proposed; waiting_approval", "reassigned to " + lead2,
		"deadline moved to " + deadline.Format(time.RFC3339), "rejected by " + lead2 + "; rejected"}
	got := historyWhats(t, must(t, dir, exitDone, "history", id))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history says\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	fork := runIDOf(t, must(t, dir, exitWaiting, "fork", id, "--at", "4"))
	if got := historyWhats(t, must(t, dir, exitDone, "history", fork)); len(got) != 2 || got[0] != "forked from "+id+" at 4" || got[1] != "proposed; waiting_approval" {
		t.Fatalf("the fork's history says %q", got)
	}

	// The reassignment's event removed behind signoff's back: its
	// checkpoint's state still names the assignee, but nothing says what the
	// checkpoint recorded.
	db, err := sqlite.OpenDB(dbPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := sqlite.EditAuditEvents(t.Context(), db, func(e *record.AuditEvent) bool {
		return e.RunID != id || e.Action != record.EventReassigned
	}); err != nil {
		t.Fatal(err)
	}
	got = historyWhats(t, must(t, dir, exitDone, "history", id))
	if len(got) != len(want) || got[5] != "?" || got[6] != want[6] {
		t.Fatalf("history without the reassignment's event says %q, want ? for checkpoint 6", got)
	}
}
