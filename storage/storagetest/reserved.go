package storagetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// testSaveRunReserved: a transition written after a read that reserved the
// run's audit head (RunParts.Reserve, RunWrite.Reserved) is stored as any
// other, its events chained after that head and taking the seqs reserved.
// When the run or its audit head moved between the read and the write,
// nothing of the write is stored: a driver that reserves refuses it with
// ErrConflict, ErrHeadMoved when only the head moved; one that does not
// (Reserved nil) reads the head inside the transaction and chains the
// events after the one appended since.
func testSaveRunReserved(t *testing.T, s storage.Store) {
	t.Run("a head moved since", func(t *testing.T) {
		f := newReservedFixture(t, s, "run-rsv-1")
		run, req := f.run, f.req
		res := f.reserve(t)
		update(t, s, func(ctx context.Context, tx storage.Tx) error {
			return tx.AppendAudit(ctx, &record.AuditEvent{RunID: run.ID, Action: "refused", At: base}, nil)
		})
		before := *run
		err := f.decide(t, res, &record.Decision{RequestID: req.ID, RunID: run.ID, ApproverID: "U1", Role: "lead", Verdict: record.VerdictApprove, Via: "slack", At: base})
		es := f.events(t)
		checkChain(t, es)
		if res != nil {
			wantErr(t, "a write after a head that moved", err, storage.ErrHeadMoved)
			if len(es) != 2 {
				t.Errorf("audit of the run = %d events, want the 2 before the refused write", len(es))
			}
			f.checkRefused(t, stored(&before))
			return
		}
		if err != nil {
			t.Fatalf("a write without a reservation: %v", err)
		}
		if len(es) != 4 {
			t.Errorf("audit of the run = %d events, want 4", len(es))
		}
	})

	t.Run("a run written since", func(t *testing.T) {
		f := newReservedFixture(t, s, "run-rsv-2")
		run, req := f.run, f.req
		res := f.reserve(t)
		moved := *run
		moved.UpdatedAt = base.Add(time.Minute)
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.UpdateRun(ctx, &moved) })
		err := f.decide(t, res, &record.Decision{RequestID: req.ID, RunID: run.ID, ApproverID: "U1", Role: "lead", Verdict: record.VerdictApprove, Via: "slack", At: base})
		wantErr(t, "a write on a run written since", err, storage.ErrConflict)
		if errors.Is(err, storage.ErrHeadMoved) {
			t.Errorf("a write on a run written since: %v, want the run's conflict, not its head's", err)
		}
		if es := f.events(t); len(es) != 1 {
			t.Errorf("audit of the run = %d events, want the one before the refused write", len(es))
		}
		f.checkRefused(t, stored(&moved))
	})

	t.Run("stored", func(t *testing.T) {
		f := newReservedFixture(t, s, "run-rsv-3")
		run, req := f.run, f.req
		res := f.reserve(t)
		before := f.events(t)
		d := &record.Decision{RequestID: req.ID, RunID: run.ID, ApproverID: "U2", Role: "lead", Verdict: record.VerdictApprove, Via: "slack", At: base}
		if err := f.decide(t, res, d); err != nil {
			t.Fatalf("the write after its reservation: %v", err)
		}
		es := f.events(t)
		checkChain(t, es)
		if len(es) != len(before)+2 {
			t.Fatalf("audit of the run = %d events, want %d", len(es), len(before)+2)
		}
		added := es[len(before):]
		if res != nil && (added[0].Seq != res.Seq || added[1].Seq != res.Spare || added[0].PrevHash != res.Hash) {
			t.Errorf("events at seqs %d and %d after %q, want the reserved %d and %d after %q",
				added[0].Seq, added[1].Seq, added[0].PrevHash, res.Seq, res.Spare, res.Hash)
		}
		b := load(t, s, func(ctx context.Context, tx storage.Tx) (*storage.RunBundle, error) {
			return tx.LoadRun(ctx, run.ID, storage.RunParts{Checkpoints: true, Requests: true, Decisions: true, Audit: true})
		})
		checkSame(t, "run", stored(run), b.Run)
		checkSame(t, "request", stored(req), b.Requests[0])
		if len(b.Checkpoints) != int(run.Seq) || len(b.Decisions) != 1 || b.Decisions[0].ApproverID != "U2" {
			t.Errorf("after the write: %d checkpoints, decisions %+v; want %d and U2's", len(b.Checkpoints), b.Decisions, run.Seq)
		}
		if b.AuditHead == nil || b.AuditHead.Hash != added[1].Hash {
			t.Errorf("audit head = %+v, want the last event's hash %s", b.AuditHead, added[1].Hash)
		}
	})
}

// reservedFixture is a run waiting on its request, with one audit event.
type reservedFixture struct {
	s   storage.Store
	run *record.Run
	req *record.ApprovalRequest
}

func newReservedFixture(t *testing.T, s storage.Store, id string) *reservedFixture {
	t.Helper()
	f := &reservedFixture{s: s,
		run: &record.Run{ID: id, Workflow: "proposal", Status: record.StatusWaitingApproval, Seq: 1, CreatedAt: base, UpdatedAt: base},
		req: &record.ApprovalRequest{ID: "req-" + id, RunID: id, Role: "lead", Count: 1, Status: record.RequestPending, CreatedAt: base}}
	update(t, s, func(ctx context.Context, tx storage.Tx) error {
		if err := tx.SaveRun(ctx, &storage.RunWrite{Run: f.run, Checkpoint: alongCheckpoint(f.run), Request: f.req}); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, &record.AuditEvent{RunID: id, Action: "submitted", At: base}, nil)
	})
	return f
}

// reserve reads the run with its audit head reserved (nil: the driver
// reserves nothing).
func (f *reservedFixture) reserve(t *testing.T) *storage.AuditReservation {
	t.Helper()
	return load(t, f.s, func(ctx context.Context, tx storage.Tx) (*storage.AuditReservation, error) {
		b, err := tx.LoadRun(ctx, f.run.ID, storage.RunParts{Reserve: true})
		if err != nil {
			return nil, err
		}
		return b.Reserved, nil
	})
}

// decide writes decision d on the run as held, after res, with two events,
// and on success holds the run and request as written.
func (f *reservedFixture) decide(t *testing.T, res *storage.AuditReservation, d *record.Decision) error {
	return f.s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		r, q := *f.run, *f.req
		r.Status, r.Seq = record.StatusExecuting, f.run.Seq+1
		q.Status, q.DecidedBy, q.DecidedAt = record.RequestApproved, d.ApproverID, base
		w := &storage.RunWrite{Run: &r, Checkpoint: alongCheckpoint(&r), Decided: &q, Decision: d, Reserved: res}
		if err := tx.SaveRun(ctx, w); err != nil {
			return err
		}
		for _, a := range []record.Event{"decided", "scheduled"} {
			if err := tx.AppendAudit(ctx, &record.AuditEvent{RunID: f.run.ID, Action: a, At: base}, nil); err != nil {
				return err
			}
		}
		*f.run, *f.req = r, q
		return nil
	})
}

// events are the run's audit events, oldest first.
func (f *reservedFixture) events(t *testing.T) []*record.AuditEvent {
	t.Helper()
	return load(t, f.s, func(ctx context.Context, tx storage.Tx) ([]*record.AuditEvent, error) {
		return tx.AuditEvents(ctx, storage.AuditFilter{RunID: f.run.ID})
	})
}

// checkRefused checks that a refused decide stored nothing: the run is
// want, with its one checkpoint and no decision.
func (f *reservedFixture) checkRefused(t *testing.T, want *record.Run) {
	t.Helper()
	b := load(t, f.s, func(ctx context.Context, tx storage.Tx) (*storage.RunBundle, error) {
		return tx.LoadRun(ctx, f.run.ID, storage.RunParts{Checkpoints: true, Decisions: true})
	})
	checkSame(t, "run after the refused write", want, b.Run)
	if len(b.Checkpoints) != 1 || len(b.Decisions) != 0 {
		t.Errorf("after the refused write: %d checkpoints, %d decisions; want 1 and none", len(b.Checkpoints), len(b.Decisions))
	}
}

// testSaveRunFollowing: a transition that names the audit head its run's
// last write left (RunWrite.Follows) is stored as any other, its events
// chained after that head. When an event was appended since, nothing is
// lost and nothing forks: the write is refused with ErrHeadMoved (an
// ErrConflict) and stores nothing, or (a driver that reads the head in the transaction) chains its
// events after the one appended since.
func testSaveRunFollowing(t *testing.T, s storage.Store) {
	for _, moved := range []bool{false, true} {
		name := map[bool]string{false: "stored", true: "a head moved since"}[moved]
		t.Run(name, func(t *testing.T) {
			f := newReservedFixture(t, s, "run-fol-"+name[:1])
			evs := f.events(t)
			head := &record.AuditRunHead{RunID: f.run.ID, Seq: evs[0].Seq, Hash: evs[0].Hash}
			if moved {
				update(t, s, func(ctx context.Context, tx storage.Tx) error {
					return tx.AppendAudit(ctx, &record.AuditEvent{RunID: f.run.ID, Action: "refused", At: base}, nil)
				})
			}
			before, events := *f.run, len(f.events(t))
			err := f.s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				r := *f.run
				r.Status, r.Seq = record.StatusExecuting, f.run.Seq+1
				cp := alongCheckpoint(&r)
				var evs []*record.AuditEvent
				for _, a := range []record.Event{"decided", "scheduled"} {
					evs = append(evs, &record.AuditEvent{RunID: r.ID, Action: a, At: base, CheckpointSeq: cp.Seq, CheckpointHash: cp.Hash})
				}
				w := &storage.RunWrite{Run: &r, Checkpoint: cp, Follows: head, Events: evs}
				if err := tx.SaveRun(ctx, w); err != nil {
					return err
				}
				*f.run = r
				return nil
			})
			es := f.events(t)
			checkChain(t, es)
			if moved && err != nil {
				wantErr(t, "a write after a head that moved", err, storage.ErrHeadMoved)
				if len(es) != events {
					t.Errorf("audit of the run = %d events, want the %d before the refused write", len(es), events)
				}
				f.checkRefused(t, stored(&before))
				return
			}
			if err != nil {
				t.Fatalf("the write: %v", err)
			}
			if len(es) != events+2 {
				t.Fatalf("audit of the run = %d events, want %d", len(es), events+2)
			}
			if !moved && es[events].PrevHash != head.Hash {
				t.Errorf("the write's first event follows %q, want the head %q", es[events].PrevHash, head.Hash)
			}
			b := load(t, s, func(ctx context.Context, tx storage.Tx) (*storage.RunBundle, error) {
				return tx.LoadRun(ctx, f.run.ID, storage.RunParts{Checkpoints: true, Audit: true})
			})
			checkSame(t, "run", stored(f.run), b.Run)
			if len(b.Checkpoints) != 2 || b.AuditHead == nil || b.AuditHead.Hash != es[len(es)-1].Hash {
				t.Errorf("after the write: %d checkpoints, head %+v; want 2 and the last event's", len(b.Checkpoints), b.AuditHead)
			}
		})
	}
}
