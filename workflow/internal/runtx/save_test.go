package runtx

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
)

// wallClock is the time of day.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// recordingTx keeps what Save writes; Save calls nothing else of a Tx.
type recordingTx struct {
	storage.Tx
	saved []*storage.RunWrite
}

func (t *recordingTx) SaveRun(_ context.Context, w *storage.RunWrite) error {
	t.saved = append(t.saved, w)
	w.Run.Version++
	return nil
}

// A transition's events travel with its write, each naming its checkpoint:
// its own first, then the ones it records beside it, in order.
func TestATransitionsEventsTravelWithItsWrite(t *testing.T) {
	rs := &Runs{clock: wallClock{}, owner: "test", ttl: time.Minute}
	l := &Loaded{
		Run:   &record.Run{ID: "run-1", Workflow: "proposal", Status: record.StatusExecuting},
		State: &record.State{SchemaVersion: record.SchemaVersion, RunID: "run-1", Workflow: "proposal", Summary: "refund"},
	}
	tx := &recordingTx{}
	then := []Event{{Actor: "signoff", Action: record.EventFinished, Detail: map[string]int{"operations": 1}}}
	if err := rs.SaveWith(t.Context(), tx, l, record.StatusExecuting, record.EventExecuted, "U1", map[string]string{"key": "k"}, nil, Also{Then: then}); err != nil {
		t.Fatal(err)
	}
	w := tx.saved[0]
	want := []struct {
		actor, action, detail string
	}{{"U1", string(record.EventExecuted), `{"key":"k"}`}, {"signoff", string(record.EventFinished), `{"operations":1}`}}
	if len(w.Events) != len(want) {
		t.Fatalf("the write carries %d events, want %d", len(w.Events), len(want))
	}
	for i, e := range w.Events {
		if e.RunID != "run-1" || e.Actor != want[i].actor || string(e.Action) != want[i].action || string(e.Detail) != want[i].detail ||
			e.CheckpointSeq != w.Checkpoint.Seq || e.CheckpointHash != w.Checkpoint.Hash || e.At.IsZero() {
			t.Errorf("event %d = %+v, want %+v naming checkpoint %d", i, e, want[i], w.Checkpoint.Seq)
		}
	}
}

// A checkpoint staged before the write is stored when the run is as it was
// then, and made again when the run moved on in between: what is stored is
// always the run as saved, chained to the checkpoint before it.
func TestSaveStoresTheRunAsSaved(t *testing.T) {
	rs := &Runs{clock: wallClock{}, owner: "test", ttl: time.Minute}
	newRun := func() *Loaded {
		return &Loaded{
			Run:   &record.Run{ID: "run-1", Workflow: "proposal", Status: record.StatusExecuting},
			State: &record.State{SchemaVersion: record.SchemaVersion, RunID: "run-1", Workflow: "proposal", Summary: "refund"},
		}
	}
	for _, tt := range []struct {
		name  string
		after func(l *Loaded, s *staged) // between staging and saving
	}{
		{"unchanged", func(*Loaded, *staged) {}},
		{"status changed", func(l *Loaded, _ *staged) { l.Run.Status, l.Run.Reason = record.StatusNeedsAttention, "stopped" }},
		{"another checkpoint first", func(l *Loaded, s *staged) {
			if err := rs.Save(t.Context(), &recordingTx{}, l, record.StatusExecuting, record.EventStep, "test", nil, nil); err != nil {
				t.Fatal(err)
			}
			l.staged = s // staged for the checkpoint just written
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newRun()
			s, err := rs.stage(l, rs.Now())
			if err != nil {
				t.Fatal(err)
			}
			l.staged = s
			tt.after(l, s)
			prev := l.LastHash
			tx := &recordingTx{}
			if err := rs.Save(t.Context(), tx, l, record.StatusExecuting, record.EventStep, "test", nil, nil); err != nil {
				t.Fatal(err)
			}
			if len(tx.saved) != 1 {
				t.Fatalf("saved %d transitions, want 1", len(tx.saved))
			}
			cp := tx.saved[0].Checkpoint
			if cp.PrevHash != prev || cp.Seq != l.Run.Seq || cp.Hash != record.CheckpointHash(cp) {
				t.Errorf("checkpoint %d (prev %q, hash %q) is not the next of the run (seq %d, prev %q)", cp.Seq, cp.PrevHash, cp.Hash, l.Run.Seq, prev)
			}
			got, err := chain.Decode(l.encoded)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != l.Run.Status || got.Reason != l.Run.Reason {
				t.Errorf("stored state says %s (%q), the run %s (%q)", got.Status, got.Reason, l.Run.Status, l.Run.Reason)
			}
			if cp.BaseSeq == 0 && string(cp.State) != string(l.encoded) {
				t.Error("a whole checkpoint does not hold the state kept as stored")
			}
		})
	}
}

// A fingerprint is computed once per state, and never handed out for a
// state saved since: edited arguments are fingerprinted again.
func TestFingerprintIsNotKeptAcrossASave(t *testing.T) {
	rs := &Runs{clock: wallClock{}, owner: "test", ttl: time.Minute}
	l := &Loaded{
		Run: &record.Run{ID: "run-1", Workflow: "proposal", Status: record.StatusWaitingApproval},
		State: &record.State{SchemaVersion: record.SchemaVersion, RunID: "run-1", Workflow: "proposal",
			Actions: []record.Action{{Name: "request_refund", Args: []byte(`{"amount":10}`)}}},
	}
	before, err := rs.Fingerprint(l, record.RiskHigh, "rev-1")
	if err != nil {
		t.Fatal(err)
	}
	l.State.Actions[0].Args = []byte(`{"amount":1000}`)
	if again, _ := rs.Fingerprint(l, record.RiskHigh, "rev-1"); again != before {
		t.Fatalf("the same state, not saved, fingerprinted again: %s, then %s", before, again)
	}
	if err := rs.Save(t.Context(), &recordingTx{}, l, record.StatusWaitingApproval, record.EventStep, "test", nil, nil); err != nil {
		t.Fatal(err)
	}
	want, err := FingerprintOf(l.State, record.RiskHigh, "rev-1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := rs.Fingerprint(l, record.RiskHigh, "rev-1")
	if err != nil {
		t.Fatal(err)
	}
	if got != want || got == before {
		t.Errorf("after saving edited arguments the fingerprint is %s, want %s (the edited arguments'), not %s", got, want, before)
	}
}

// A reservation read with the run serves the first write after it, and
// only while it is fresh: a write long after its read, or a second write,
// reads the audit head itself (RunWrite.Reserved nil).
func TestAReservationServesOneFreshWrite(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	rs := &Runs{clock: clock, owner: "test", ttl: time.Minute}
	res := &storage.AuditReservation{RunID: "run-1", Hash: "h", Seq: 7, Spare: 8}
	for _, tt := range []struct {
		name  string
		after time.Duration
		want  []bool // per write: whether it carried the reservation
	}{
		{"fresh", time.Second, []bool{true, false}},
		{"stale", reservationLife, []bool{false, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := &Loaded{
				Run:        &record.Run{ID: "run-1", Workflow: "proposal", Status: record.StatusExecuting},
				State:      &record.State{SchemaVersion: record.SchemaVersion, RunID: "run-1", Workflow: "proposal", Summary: "refund"},
				More:       storage.RunBundle{Reserved: res},
				reservedAt: clock.Now(),
			}
			clock.Advance(tt.after)
			tx := &recordingTx{}
			for range tt.want {
				if err := rs.Save(t.Context(), tx, l, record.StatusExecuting, record.EventStep, "test", nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			for i, w := range tx.saved {
				if got := w.Reserved != nil; got != tt.want[i] {
					t.Errorf("write %d carried the reservation: %v, want %v", i+1, got, tt.want[i])
				}
			}
		})
	}
}

// headTx is recordingTx that gives each write's events the seqs and
// hashes a store would.
type headTx struct {
	recordingTx
	seq int64
}

func (t *headTx) SaveRun(ctx context.Context, w *storage.RunWrite) error {
	for _, e := range w.Events {
		t.seq++
		e.Seq, e.Hash = t.seq, fmt.Sprintf("h%d", t.seq)
	}
	return t.recordingTx.SaveRun(ctx, w)
}

// updateStore runs each Update's fn on tx and then fails it with fail.
type updateStore struct {
	storage.Store
	tx   *headTx
	fail error
}

func (s *updateStore) Update(ctx context.Context, fn func(context.Context, storage.Tx) error) error {
	if err := fn(ctx, s.tx); err != nil {
		return err
	}
	return s.fail
}

// A write through Write that committed leaves the head its last event is,
// and the next write of the run follows it (RunWrite.Follows); a write that
// did not commit, or one made in an Update of the caller's own, leaves
// none; and a head serves one write.
func TestAWriteFollowsTheHeadItsLastCommittedWriteLeft(t *testing.T) {
	for _, tt := range []struct {
		name  string
		first string // how the first write is made: "write", "failed write", "update"
		want  string // the second write's Follows hash ("": none)
	}{
		{"committed", "write", "h2"},
		{"not committed", "failed write", ""},
		{"in the caller's update", "update", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tx := &headTx{}
			st := &updateStore{tx: tx}
			rs := &Runs{store: st, clock: wallClock{}, owner: "test", ttl: time.Minute}
			l := &Loaded{
				Run:   &record.Run{ID: "run-1", Workflow: "proposal", Status: record.StatusExecuting},
				State: &record.State{SchemaVersion: record.SchemaVersion, RunID: "run-1", Workflow: "proposal", Summary: "refund"},
			}
			save := func(ctx context.Context, tx storage.Tx) error {
				then := []Event{{Actor: "signoff", Action: record.EventFinished}}
				return rs.SaveWith(ctx, tx, l, record.StatusExecuting, record.EventExecuted, "U1", nil, nil, Also{Then: then})
			}
			switch tt.first {
			case "write":
				if err := rs.Write(t.Context(), l, save); err != nil {
					t.Fatal(err)
				}
			case "failed write":
				st.fail = storage.ErrConflict
				if err := rs.Write(t.Context(), l, save); err == nil {
					t.Fatal("the failing write succeeded")
				}
				st.fail = nil
			case "update":
				if err := st.Update(t.Context(), save); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				if err := rs.Write(t.Context(), l, save); err != nil {
					t.Fatal(err)
				}
			}
			second, third := tx.saved[1], tx.saved[2]
			got := ""
			if second.Follows != nil {
				got = second.Follows.Hash
				if second.Follows.RunID != "run-1" || second.Follows.Seq != 2 {
					t.Errorf("the second write follows %+v, want run-1 at seq 2", second.Follows)
				}
			}
			if got != tt.want {
				t.Errorf("the second write follows %q, want %q", got, tt.want)
			}
			if third.Follows == nil || third.Follows.Hash != "h4" {
				t.Errorf("the third write follows %+v, want the second's last event h4", third.Follows)
			}
		})
	}
}
