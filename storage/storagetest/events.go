package storagetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// testSaveRunEvents: the events a transition carries (RunWrite.Events) are
// appended to its run's chain after its records, in order, as AppendAudit
// appends them, each sealed with RunWrite.Seal, and the run's head moves to
// the last; a refused write appends none of them.
func testSaveRunEvents(t *testing.T, s storage.Store) {
	run := &record.Run{ID: "run-events", Workflow: "proposal", Status: record.StatusWaitingApproval, Seq: 1, CreatedAt: base, UpdatedAt: base}
	var sealed []record.Event
	seal := func(e *record.AuditEvent, h *record.AuditRunHead) (record.Seal, record.Seal) {
		sealed = append(sealed, e.Action)
		return record.Seal{KeyID: "k1", MAC: "event:" + e.Hash}, record.Seal{KeyID: "k1", MAC: "head:" + h.Hash}
	}
	events := func(cp *record.Checkpoint, actions ...record.Event) []*record.AuditEvent {
		var evs []*record.AuditEvent
		for _, a := range actions {
			evs = append(evs, &record.AuditEvent{RunID: run.ID, Actor: "tester", Action: a, Detail: []byte(`{"n":1}`), At: base,
				CheckpointSeq: cp.Seq, CheckpointHash: cp.Hash})
		}
		return evs
	}
	var all []*record.AuditEvent
	cp1 := &record.Checkpoint{RunID: run.ID, Seq: 1, SchemaVersion: 2, State: []byte(`{"a":1}`), Hash: "h1", CreatedAt: base}
	first := events(cp1, "submitted")
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		return tx.SaveRun(ctx, &storage.RunWrite{Run: run, Checkpoint: cp1, Events: first, Seal: seal})
	})
	all = append(all, first...)
	// An event of another run between the two transitions.
	other := &record.AuditEvent{RunID: "run-events-other", Action: "refused", At: base}
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		return tx.AppendAudit(ctx, other, nil)
	})
	cp2 := &record.Checkpoint{RunID: run.ID, Seq: 2, SchemaVersion: 2, State: []byte(`{"a":2}`), PrevHash: "h1", Hash: "h2", CreatedAt: base}
	second := events(cp2, "receipt", "finished")
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		run.Status, run.Seq, run.UpdatedAt = record.StatusDone, 2, base.Add(time.Second)
		return tx.SaveRun(ctx, &storage.RunWrite{Run: run, Checkpoint: cp2, Events: second, Seal: seal})
	})
	all = append(all, second...)
	if got := len(sealed); got != 3 || sealed[0] != "submitted" || sealed[1] != "receipt" || sealed[2] != "finished" {
		t.Errorf("sealed %v, want submitted, receipt, finished in turn", sealed)
	}
	for _, e := range all {
		if e.Seq == 0 || e.Hash == "" || e.MAC != "event:"+e.Hash {
			t.Errorf("event %s after SaveRun: seq %d, hash %q, mac %q; want them set and sealed", e.Action, e.Seq, e.Hash, e.MAC)
		}
	}
	checkRunEvents(t, s, run.ID, all)
	log := []*record.AuditEvent{first[0], other, second[0], second[1]}
	t.Run("the log by seq", func(t *testing.T) { checkLogFilters(t, s, log) })

	// A refused write appends nothing.
	stale := *run
	stale.Version, stale.Seq = 1, 3
	cp3 := &record.Checkpoint{RunID: run.ID, Seq: 3, SchemaVersion: 2, PrevHash: "h2", Hash: "h3", CreatedAt: base}
	err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.SaveRun(ctx, &storage.RunWrite{Run: &stale, Checkpoint: cp3, Events: events(cp3, "edited"), Seal: seal})
	})
	wantErr(t, "SaveRun of a stale version", err, storage.ErrConflict)
	checkRunEvents(t, s, run.ID, all)
}

// checkRunEvents checks that the run's stored events are want, chained,
// and that its head is the last of them, with the head's seal.
func checkRunEvents(t *testing.T, s storage.Store, runID string, want []*record.AuditEvent) {
	t.Helper()
	b := load(t, s, func(ctx context.Context, tx storage.Tx) (*storage.RunBundle, error) {
		return tx.LoadRun(ctx, runID, storage.RunParts{Audit: true})
	})
	if len(b.Audit) != len(want) {
		t.Fatalf("run %s has %d events, want %d", runID, len(b.Audit), len(want))
	}
	for i, e := range b.Audit {
		checkSame(t, "event "+string(want[i].Action), want[i], e)
	}
	checkChain(t, b.Audit)
	last := want[len(want)-1]
	if h := b.AuditHead; h == nil || h.Seq != last.Seq || h.Hash != last.Hash || h.MAC != "head:"+last.Hash {
		t.Errorf("head = %+v, want the last event (seq %d), sealed", b.AuditHead, last.Seq)
	}
}

// checkLogFilters checks AuditEvents against log, every event of the store
// in seq order, whichever rows hold them: after each seq, the newest first,
// a page at a time, and one run's.
func checkLogFilters(t *testing.T, s storage.Store, log []*record.AuditEvent) {
	t.Helper()
	list := func(f storage.AuditFilter) []*record.AuditEvent {
		return load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.AuditEvent, error) { return tx.AuditEvents(ctx, f) })
	}
	same := func(what string, got, want []*record.AuditEvent) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
		}
		for i := range want {
			checkSame(t, fmt.Sprintf("%s, event %d", what, i), want[i], got[i])
		}
	}
	// Other tests' events may come before these: the log from the first.
	after := log[0].Seq - 1
	same("all", list(storage.AuditFilter{AfterSeq: after}), log)
	for i := range log {
		same(fmt.Sprintf("after %d", log[i].Seq), list(storage.AuditFilter{AfterSeq: log[i].Seq}), log[i+1:])
		same(fmt.Sprintf("the first %d", i+1), list(storage.AuditFilter{AfterSeq: after, Limit: i + 1}), log[:i+1])
	}
	newest := list(storage.AuditFilter{Newest: true, Limit: 3})
	same("the newest 3", newest, []*record.AuditEvent{log[3], log[2], log[1]})
	same("one run's", list(storage.AuditFilter{RunID: log[0].RunID}), []*record.AuditEvent{log[0], log[2], log[3]})
}
