package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/storage/sqlite"
)

// The store in fixtures/legacy was written by the version before the audit
// log was chained per run (signoff submit of the three example proposals, a
// refused and a granted approval; dumped with sqlite3 .dump), with its key
// file. That version's verify printed this head. Its waiting run's deadline
// passed on 2026-12-04.
const (
	legacyWaiting = "run_01a22f8512920001be36a6ee"
	legacyHead    = "13:a284b045d4100830a72103cecf70925768a1c1337d36d54f9047673cf9322801"
)

// legacyStore restores the fixture into a new folder and returns it.
func legacyStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"signoff", "shop"} {
		dump, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "legacy", name+".sql"))
		if err != nil {
			t.Fatal(err)
		}
		db, err := sqlite.OpenDB(filepath.Join(dir, name+".db"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(string(dump)); err != nil {
			t.Fatalf("restore %s: %v", name, err)
		}
		db.Close()
	}
	keys, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "legacy", "signoff.keys"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "signoff.keys"), keys, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAGlobalChainStoreKeepsVerifying: a store whose audit log is one global
// chain verifies, with the anchor its version printed; new events are chained
// per run after it and everything still verifies; and a change to an old
// event, or deleting the newest old ones, is still caught by the old rule.
func TestAGlobalChainStoreKeepsVerifying(t *testing.T) {
	t.Parallel()
	dir := legacyStore(t)
	must(t, dir, exitDone, "migrate")
	if out := must(t, dir, exitDone, "verify", "--anchor", legacyHead); !strings.Contains(out, "13 audit events verified") {
		t.Fatalf("verify of the old store:\n%s", out)
	}
	// A cancel, not an approval: the fixture's run has a deadline of the
	// day it was written, and a cancel needs none to hold.
	must(t, dir, exitEnded, "cancel", legacyWaiting, "--as", lead1, "--reason", "superseded")
	out := must(t, dir, exitDone, "anchor")
	m := auditHead.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("anchor printed:\n%s", out)
	}
	out = must(t, dir, exitDone, "verify", "--anchor", legacyHead, "--anchor", m[1])
	if !strings.Contains(out, "anchor "+legacyHead+": the log extends it") || !strings.Contains(out, "anchor "+m[1]+": the log extends it") {
		t.Fatalf("verify after new events:\n%s", out)
	}
	lines := readAuditLines(t, must(t, dir, exitDone, "audit", "--json"))
	if n := len(lines); n <= 13 || lines[12].Format != 1 || lines[n-1].Format != 2 || lines[n-1].RunID != legacyWaiting {
		t.Fatalf("the log after the approval: %d events, formats %+v", n, lines)
	}

	for _, tc := range []struct{ name, sql, want string }{
		{"an old event's actor changed", `UPDATE audit SET actor = 'U0MGR00001' WHERE seq = 8`, "audit chain broken at event 8"},
		{"the newest old events deleted, the rest of the log kept", `DELETE FROM audit WHERE seq IN (12, 13)`, "the newest events were deleted"},
		{"an old event moved after the new ones", `UPDATE audit SET seq = 1000 WHERE seq = 13`, "reordered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			for _, f := range []string{"signoff.db", "shop.db", "signoff.keys"} {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(d, f), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			db, err := sqlite.OpenDB(dbPath(d))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(tc.sql); err != nil {
				t.Fatal(err)
			}
			db.Close()
			code, out, _ := signoff(t, d, "verify")
			if code != exitFailed || !strings.Contains(out, tc.want) {
				t.Fatalf("verify after %s: exit %d, want %d saying %q\n%s", tc.name, code, exitFailed, tc.want, out)
			}
		})
	}
}

// TestAuditTailWaitsForGaps: the serve log's tail moves over what it logged,
// waits at a gap in the seqs (an event another transaction has not
// committed yet), and gives the gap up once the events after it are old
// enough that no transaction can still hold it.
func TestAuditTailWaitsForGaps(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		logged map[int64]time.Duration // seq → its time after t0
		after  int64
	}{
		{"no gap", map[int64]time.Duration{1: 0, 2: time.Second, 3: 2 * time.Second}, 3},
		{"a fresh gap", map[int64]time.Duration{1: 0, 3: time.Second, 4: 2 * time.Second}, 1},
		{"an old gap", map[int64]time.Duration{1: 0, 3: time.Second, 4: time.Second + auditGapGrace}, 4},
		{"a gap at the start", map[int64]time.Duration{2: 0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tail := &auditTail{logged: map[int64]time.Time{}}
			for seq, d := range tc.logged {
				tail.logged[seq] = t0.Add(d)
			}
			tail.settle()
			if tail.after != tc.after {
				t.Fatalf("after = %d, want %d", tail.after, tc.after)
			}
			for seq := range tail.logged {
				if seq <= tail.after {
					t.Errorf("seq %d is still held, though the tail moved past it", seq)
				}
			}
		})
	}
}
