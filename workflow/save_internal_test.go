package workflow

import (
	"context"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
)

// recordingTx keeps what save writes; save calls nothing else of a Tx.
type recordingTx struct {
	storage.Tx
	saved []*storage.RunWrite
}

func (t *recordingTx) SaveRun(_ context.Context, w *storage.RunWrite) error {
	t.saved = append(t.saved, w)
	w.Run.Version++
	return nil
}

func (t *recordingTx) AppendAudit(context.Context, *record.AuditEvent, func(*record.AuditEvent, *record.AuditRunHead) (record.Seal, record.Seal)) error {
	return nil
}

// A checkpoint staged before the write is stored when the run is as it was
// then, and made again when the run moved on in between: what is stored is
// always the run as saved, chained to the checkpoint before it.
func TestSaveStoresTheRunAsSaved(t *testing.T) {
	e := &Engine{clock: SystemClock{}, runs: &runs{clock: SystemClock{}, owner: "test", ttl: time.Minute}}
	newRun := func() *loaded {
		return &loaded{
			run: &record.Run{ID: "run-1", Workflow: "proposal", Status: record.StatusExecuting},
			st:  &record.State{SchemaVersion: record.SchemaVersion, RunID: "run-1", Workflow: "proposal", Summary: "refund"},
		}
	}
	for _, tt := range []struct {
		name  string
		after func(l *loaded, s *staged) // between staging and saving
	}{
		{"unchanged", func(*loaded, *staged) {}},
		{"status changed", func(l *loaded, _ *staged) { l.run.Status, l.run.Reason = record.StatusNeedsAttention, "stopped" }},
		{"another checkpoint first", func(l *loaded, s *staged) {
			if err := e.runs.save(t.Context(), &recordingTx{}, l, record.StatusExecuting, record.EventStep, "test", nil, nil); err != nil {
				t.Fatal(err)
			}
			l.staged = s // staged for the checkpoint just written
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newRun()
			s, err := e.runs.stage(l, e.now())
			if err != nil {
				t.Fatal(err)
			}
			l.staged = s
			tt.after(l, s)
			prev := l.lastHash
			tx := &recordingTx{}
			if err := e.runs.save(t.Context(), tx, l, record.StatusExecuting, record.EventStep, "test", nil, nil); err != nil {
				t.Fatal(err)
			}
			if len(tx.saved) != 1 {
				t.Fatalf("saved %d transitions, want 1", len(tx.saved))
			}
			cp := tx.saved[0].Checkpoint
			if cp.PrevHash != prev || cp.Seq != l.run.Seq || cp.Hash != record.CheckpointHash(cp) {
				t.Errorf("checkpoint %d (prev %q, hash %q) is not the next of the run (seq %d, prev %q)", cp.Seq, cp.PrevHash, cp.Hash, l.run.Seq, prev)
			}
			got, err := chain.Decode(l.state)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != l.run.Status || got.Reason != l.run.Reason {
				t.Errorf("stored state says %s (%q), the run %s (%q)", got.Status, got.Reason, l.run.Status, l.run.Reason)
			}
			if cp.BaseSeq == 0 && string(cp.State) != string(l.state) {
				t.Error("a whole checkpoint does not hold the state kept as stored")
			}
		})
	}
}
