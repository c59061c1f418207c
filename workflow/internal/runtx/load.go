package runtx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
)

// Loaded is a run as read in one transaction: its row, its verified latest state
// and the hash the next checkpoint links to.
type Loaded struct {
	Run      *record.Run
	State    *record.State
	LastHash string
	// encoded is the encoded state of the latest checkpoint, as loaded or as
	// Save wrote it, and committed says that the write holding it committed:
	// then the run is known as stored, and need not be verified again.
	encoded   []byte
	committed bool
	// spare is a state decoded and held by nobody else, for LoadHeld to hand
	// out once instead of decoding encoded again.
	spare *record.State
	// Chain is the checkpoints Load verified (nil from LoadHeld's shortcut).
	Chain []*record.Checkpoint
	// fps holds the fingerprints of state computed so far, by risk and policy
	// revision: a decision computes its run's before its write, and the write
	// transaction, which concurrent Updates share, takes it from here.
	fps map[fpKey]string
	// base is what the next checkpoint is written against: the latest
	// checkpoint that holds a whole state (nil: the next one holds its own).
	base *chain.Base
	// More is what was read with the run besides its checkpoints, in the
	// same transaction (see RunParts), or, for requests and decisions, held
	// from an earlier read of the same version (see LoadHeld); More.Run is
	// nil when nothing was.
	More storage.RunBundle
	Read storage.RunParts
	// partsAt is the run's version when More was read: once a write has
	// moved the run on, More is no longer what is stored.
	partsAt int64
	// staged is the checkpoint WriteCheckpoint encoded for the write under way.
	staged *staged
	// reservedAt is when More.Reserved, the run's audit head with seqs taken
	// for the write after the read, was read (see SaveWith).
	reservedAt time.Time
	// follows is the run's audit head as l's last write through Write
	// left it, once that write committed (nil: none, or it wrote no
	// events): the next write of l follows it when it has no reservation
	// (storage.RunWrite.Follows). written is that head while the write is
	// under way.
	follows, written *record.AuditRunHead
}

// reservationLife is how long after its read a reservation serves a write:
// well inside the minute the live audit tail waits for a seq taken before
// its commit (see the app's auditGapGrace). Older, the write reads the head
// itself.
const reservationLife = 10 * time.Second

type fpKey struct {
	risk     record.Risk
	revision string
}

// Fingerprint is the fingerprint of l's state under risk and a policy
// revision, computed once per state (LoadHeld hands the ones of a state it
// did not change on), and from the memo when this process fingerprinted the
// same proposal before.
func (rs *Runs) Fingerprint(l *Loaded, risk record.Risk, revision string) (string, error) {
	k := fpKey{risk, revision}
	if fp, ok := l.fps[k]; ok {
		return fp, nil
	}
	fp, err := rs.FingerprintOf(l.State, risk, revision)
	if err != nil {
		return "", err
	}
	if l.fps == nil {
		l.fps = map[fpKey]string{}
	}
	l.fps[k] = fp
	return fp, nil
}

// MarkStored says that l was read from the store as it stands, as good as
// a committed write: LoadHeld may take it as held, and hand out its state
// once without decoding it again.
func (l *Loaded) MarkStored() { l.committed, l.spare = true, l.State }

// Committed says whether the write that last saved l committed (or l was
// read as stored, see MarkStored): only then is l the run as stored.
func (l *Loaded) Committed() bool { return l.committed }

// baseOf is the base for the checkpoint after cps (verified): the latest
// one that holds a whole state.
func baseOf(cps []*record.Checkpoint) *chain.Base {
	c := cps[len(cps)-1]
	if c.BaseSeq != 0 {
		c = cps[c.BaseSeq-1]
	}
	if c.State == nil {
		return nil
	}
	return &chain.Base{Seq: c.Seq, State: c.State}
}

// LoadWith is Load that also reads the run's records extra asks for, in the
// same round trip (see Tx.LoadRun), for the caller to use from l.more.
func (rs *Runs) LoadWith(ctx context.Context, tx storage.Tx, id string, extra storage.RunParts) (*Loaded, error) {
	extra.Checkpoints = true
	b, err := tx.LoadRun(ctx, id, extra)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, record.UnknownRun(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, err)
	}
	run, cps := b.Run, b.Checkpoints
	// The chain first, so that accidental damage is named as such; then the
	// seals, which catch a chain someone recomputed.
	st, full, err := chain.Verify(id, cps)
	if err != nil {
		return &Loaded{Run: run}, err
	}
	if err := rs.in.CheckRun(ctx, tx, id, cps, nil, nil, nil); err != nil {
		return &Loaded{Run: run}, err
	}
	if int64(len(cps)) != run.Seq {
		return &Loaded{Run: run}, &record.IntegrityError{RunID: id, Problem: fmt.Sprintf("run row says checkpoint %d but the chain ends at %d", run.Seq, len(cps))}
	}
	if st.Status != run.Status && run.Status != record.StatusNeedsAttention {
		return &Loaded{Run: run}, &record.IntegrityError{RunID: id, Problem: fmt.Sprintf("run row says %s but its checkpoint says %s", run.Status, st.Status)}
	}
	if p := rs.rowProblem(run, st); p != "" {
		return &Loaded{Run: run}, &record.IntegrityError{RunID: id, Problem: p}
	}
	b.Checkpoints = nil
	extra.Checkpoints = false
	return &Loaded{Run: run, State: st, LastHash: cps[len(cps)-1].Hash, encoded: full, Chain: cps, base: baseOf(cps), More: *b, Read: extra, partsAt: run.Version, reservedAt: rs.reserved(b)}, nil
}

// LoadOnce is LoadWith for a View that reads nothing after it: when
// checking the seals needs no read of the store's head, LoadRun is the View's
// last read (storage.LastRead), which lets the store end the snapshot in the
// same round trip.
func (rs *Runs) LoadOnce(ctx context.Context, tx storage.Tx, id string, extra storage.RunParts) (*Loaded, error) {
	if rs.in.HeadKnown() {
		storage.LastRead(tx)
	}
	return rs.LoadWith(ctx, tx, id, extra)
}

// Load reads a run and verifies its checkpoint chain.
func (rs *Runs) Load(ctx context.Context, tx storage.Tx, id string) (*Loaded, error) {
	return rs.LoadWith(ctx, tx, id, storage.RunParts{})
}

// LoadHeld is Load for a run held from a committed write or an earlier read
// (held, or nil): when the run row still has the version, checkpoint and
// status held, nobody has written the run since (every write bumps the
// version), so the chain verified then is still the stored one and only the
// row is read (with what extra asks for, in the same round trip, but for the
// requests and decisions held from a read at that version). Anything else
// is loaded and verified afresh.
func (rs *Runs) LoadHeld(ctx context.Context, tx storage.Tx, id string, held *Loaded, extra storage.RunParts) (*Loaded, error) {
	if !usable(held) {
		return rs.LoadWith(ctx, tx, id, extra)
	}
	l, err := rs.loadAsHeld(ctx, tx, id, held, extra)
	if errors.Is(err, errMovedOn) {
		return rs.LoadWith(ctx, tx, id, extra)
	}
	return l, err
}

// errMovedOn is a run whose row is no longer the one held: someone wrote it.
var errMovedOn = errors.New("the run was written since it was held")

// loadAsHeld is LoadHeld's one read: the run row and what extra asks for,
// errMovedOn when the row is not the held one (usable(held) is given).
func (rs *Runs) loadAsHeld(ctx context.Context, tx storage.Tx, id string, held *Loaded, extra storage.RunParts) (*Loaded, error) {
	extra.Checkpoints = false
	// Requests and decisions are written only with their run (each such
	// write saves it, which bumps its version), so the ones held, read at
	// the version the run still has, are still the stored ones. Operations
	// are not: a failed attempt is recorded alone.
	ask, reuse := extra, storage.RunParts{}
	if held.partsAt == held.Run.Version {
		reuse.Requests, reuse.Decisions = extra.Requests && held.Read.Requests, extra.Decisions && held.Read.Decisions
		ask.Requests, ask.Decisions = extra.Requests && !reuse.Requests, extra.Decisions && !reuse.Decisions
	}
	b, err := tx.LoadRun(ctx, id, ask)
	if err != nil || b.Run.Version != held.Run.Version || b.Run.Seq != held.Run.Seq || b.Run.Status != held.Run.Status {
		return nil, errMovedOn
	}
	if reuse.Requests {
		b.Requests = held.More.Requests
	}
	if reuse.Decisions {
		b.Decisions = held.More.Decisions
	}
	run := b.Run
	// A state of its own (spare, or decoded from the bytes stored), so that
	// it is exactly what a Load would give and a caller's changes stay its own.
	st := held.spare
	held.spare = nil
	if st == nil {
		if st, err = chain.Decode(held.encoded); err != nil {
			return &Loaded{Run: run}, &record.IntegrityError{RunID: id, Seq: run.Seq, Problem: err.Error()}
		}
	}
	return &Loaded{Run: run, State: st, LastHash: held.LastHash, encoded: held.encoded, fps: held.fps, base: held.base, More: *b, Read: extra, partsAt: run.Version, reservedAt: rs.reserved(b)}, nil
}

// reserved is when b's reservation was read: now, or zero without one.
func (rs *Runs) reserved(b *storage.RunBundle) time.Time {
	if b.Reserved == nil {
		return time.Time{}
	}
	return rs.Now()
}

// Trust is LoadHeld without its read, for a transaction whose write
// compare-and-sets the run on its version (SaveRun does): a run written
// since held was read makes that write fail with storage.ErrConflict, and
// the caller decides again from a LoadHeld. It is nil when held cannot stand
// for the stored run so: not as stored, or extra asks for what was not read
// with it at its version (only requests and decisions are written with
// their run alone, see LoadHeld).
func (rs *Runs) Trust(held *Loaded, extra storage.RunParts) *Loaded {
	if !usable(held) || held.partsAt != held.Run.Version || extra.Operations || extra.Messages || extra.Audit || extra.Outbox ||
		extra.Requests && !held.Read.Requests || extra.Decisions && !held.Read.Decisions {
		return nil
	}
	st := held.spare
	held.spare = nil
	if st == nil {
		var err error
		if st, err = chain.Decode(held.encoded); err != nil {
			return nil
		}
	}
	run := *held.Run
	// The reservation, if any, serves this write alone.
	more := storage.RunBundle{Run: &run, Reserved: held.More.Reserved}
	held.More.Reserved = nil
	if extra.Requests {
		more.Requests = held.More.Requests
	}
	if extra.Decisions {
		more.Decisions = held.More.Decisions
	}
	extra.Checkpoints = false
	return &Loaded{Run: &run, State: st, LastHash: held.LastHash, encoded: held.encoded, fps: held.fps, base: held.base, More: more, Read: extra, partsAt: run.Version, reservedAt: held.reservedAt}
}

// usable says whether LoadHeld may start from held.
func usable(held *Loaded) bool { return held != nil && held.committed && held.encoded != nil }

// staged is the next checkpoint of a run, encoded (and its hash computed)
// before the write that stores it.
type staged struct {
	cp   *record.Checkpoint
	full []byte // the whole state, which cp stores or a delta of
	// status, step and reason are the run's as cp holds them: a run changed
	// after staging is staged again by Save.
	status record.Status
	step   int
	reason string
}

// stage encodes l's next checkpoint: l.State with the run's status, step and
// reason, written against l.base when that saves at least half of the state
// (see chain.Base.Delta), chained to l.LastHash.
func (rs *Runs) stage(l *Loaded, now time.Time) (*staged, error) {
	l.State.SchemaVersion = record.SchemaVersion
	l.State.Status = l.Run.Status
	l.State.Step = l.Run.Step
	l.State.Reason = l.Run.Reason
	b, err := chain.Encode(l.State)
	if err != nil {
		return nil, err
	}
	stored, baseSeq := b, int64(0)
	if l.base != nil {
		d, ok, err := l.base.Delta(b)
		if err != nil {
			return nil, fmt.Errorf("encode checkpoint %d of run %s: %w", l.Run.Seq+1, l.Run.ID, err)
		}
		if ok {
			stored, baseSeq = d, l.base.Seq
		}
	}
	cp := &record.Checkpoint{RunID: l.Run.ID, Seq: l.Run.Seq + 1, SchemaVersion: record.SchemaVersion, State: stored, BaseSeq: baseSeq, PrevHash: l.LastHash, CreatedAt: now}
	cp.Hash = record.CheckpointHash(cp)
	return &staged{cp: cp, full: b, status: l.Run.Status, step: l.Run.Step, reason: l.Run.Reason}, nil
}

// Save writes l's run row (compare-and-set), a new checkpoint of l.State, the
// approval request when it is new, and an audit event, all in tx, and tells
// the hooks. The checkpoint is the one WriteCheckpoint staged before the
// write when the run is still as it was then, and is staged here otherwise.
func (rs *Runs) Save(ctx context.Context, tx storage.Tx, l *Loaded, from record.Status, event record.Event, actor string, detail any, req *record.ApprovalRequest) error {
	return rs.SaveWith(ctx, tx, l, from, event, actor, detail, req, Also{})
}

// Also is what a transition writes beside its run, its checkpoint and a new
// request: they travel with it (storage.RunWrite), in one round trip where
// statements cost one each, and fail it as their own methods would
// (ErrDuplicate, ErrConflict).
type Also struct {
	// Decided is a request the transition decides or moves on (UpdateRequest).
	Decided *record.ApprovalRequest
	// Decision is a person's decision (InsertDecision).
	Decision *record.Decision
	// Operation is an intent (InsertOperation, Version 0) or an operation
	// moved on (UpdateOperation).
	Operation *record.Operation
	// Then are events of the same checkpoint after the transition's own
	// (its run scheduled for a window, its end).
	Then []Event
}

// Event is an audit event a transition records beside its own.
type Event struct {
	Actor  string
	Action record.Event
	Detail any
}

// WriteError is the store's refusal of a transition's own write (its run,
// its checkpoint and what travels with them), as Save returns it: what the
// audit or a hook after it failed on is not one, so that a caller reads a
// sentinel in it (ErrDuplicate, ErrConflict) as said of those records.
type WriteError struct{ err error }

func (e *WriteError) Error() string { return e.err.Error() }
func (e *WriteError) Unwrap() error { return e.err }

// SaveWith is Save with the records of also written in the same statements'
// round trip.
func (rs *Runs) SaveWith(ctx context.Context, tx storage.Tx, l *Loaded, from record.Status, event record.Event, actor string, detail any, req *record.ApprovalRequest, also Also) error {
	s := l.staged
	l.staged = nil
	if s == nil || s.cp.Seq != l.Run.Seq+1 || s.cp.PrevHash != l.LastHash || s.status != l.Run.Status || s.step != l.Run.Step || s.reason != l.Run.Reason {
		var err error
		if s, err = rs.stage(l, rs.Now()); err != nil {
			return err
		}
	}
	cp, now := s.cp, s.cp.CreatedAt
	l.encoded = s.full
	// The state saved may not be the one fingerprinted (an edit changes the
	// arguments): a fingerprint never outlives the state it was computed on,
	// nor travels on to a LoadHeld of this one.
	l.fps = nil
	l.Run.Seq = cp.Seq
	l.Run.UpdatedAt = now
	rs.Lease(l.Run, event, now)
	if l.Run.Status == record.StatusScheduled && l.State.ScheduledFor != nil {
		// Nobody holds a scheduled run; no worker claims it before it is due.
		l.Run.LeaseUntil = *l.State.ScheduledFor
	}
	if l.Run.Version == 0 {
		l.Run.CreatedAt = now
	}
	evs, err := rs.CheckpointEvents(cp, Event{Actor: actor, Action: event, Detail: detail}, also.Then...)
	if err != nil {
		return err
	}
	w := &storage.RunWrite{Run: l.Run, Checkpoint: cp, Decided: also.Decided, Decision: also.Decision, Operation: also.Operation, Events: evs}
	if req != nil && req.Version == 0 {
		w.Request = req
	}
	if res := l.More.Reserved; res != nil {
		// One write moves the head the reservation read.
		l.More.Reserved = nil
		if rs.Now().Sub(l.reservedAt) < reservationLife {
			w.Reserved = res
		}
	}
	w.Follows, l.follows, l.written = l.follows, nil, nil
	if err := tx.SaveRun(ctx, w); err != nil {
		return &WriteError{fmt.Errorf("save checkpoint %d of run %s: %w", cp.Seq, l.Run.ID, err)}
	}
	if n := len(evs); n > 0 {
		// Where the head is if this write commits (see Write).
		l.written = &record.AuditRunHead{RunID: l.Run.ID, Seq: evs[n-1].Seq, Hash: evs[n-1].Hash}
	}
	l.LastHash = cp.Hash
	if cp.BaseSeq == 0 {
		l.base = &chain.Base{Seq: cp.Seq, State: s.full}
	}
	return rs.notify(ctx, tx, Change{Run: l.Run, State: l.State, From: from, Event: event, Request: req})
}

// WriteCheckpoint is Write for an fn that saves l as it stands: the
// checkpoint is encoded before the write, so that the write, which
// concurrent Updates take turns in, only stores it. Nothing may change l.State
// inside fn before Save.
func (rs *Runs) WriteCheckpoint(ctx context.Context, l *Loaded, fn func(ctx context.Context, tx storage.Tx) error) error {
	s, err := rs.stage(l, rs.Now())
	if err != nil {
		return err
	}
	l.staged = s
	defer func() { l.staged = nil }()
	return rs.Write(ctx, l, fn)
}

// Write runs fn, which saves l, in one Update, and notes whether it
// committed: only then is l the run as stored.
func (rs *Runs) Write(ctx context.Context, l *Loaded, fn func(ctx context.Context, tx storage.Tx) error) error {
	l.committed, l.written = false, nil
	err := rs.store.Update(ctx, fn)
	l.committed = err == nil
	written := l.written
	l.follows, l.written = nil, nil
	if err == nil {
		l.follows = written
	}
	return err
}

// Lease keeps the lease of an active run with whoever makes progress on it, so
// that workers leave it alone, and frees it when the run stops being active. A
// valid lease of another owner is left in place: the compare-and-set on the
// version is what fences writers, the lease only spares duplicate work.
func (rs *Runs) Lease(r *record.Run, event record.Event, now time.Time) {
	// A decision (or a person's resolution) hands the run on: the decider
	// (a click handler) does not execute, so the lease is left free for
	// whichever worker comes first.
	if r.Status != record.StatusRunning && r.Status != record.StatusExecuting || event == record.EventDecided || event == record.EventEdited || event == record.EventResolved {
		r.LeaseOwner, r.LeaseUntil = "", time.Time{}
		return
	}
	if r.LeaseOwner == rs.owner || !now.Before(r.LeaseUntil) {
		r.LeaseOwner, r.LeaseUntil = rs.owner, now.Add(rs.ttl)
	}
}

// View loads a run in a read-only transaction; an integrity problem puts the run
// in needs_attention and is returned.
func (rs *Runs) View(ctx context.Context, id string) (*Loaded, error) {
	return rs.Reload(ctx, id, nil)
}

// Reload is View for a run this engine may hold from its own last write
// (held, or nil; see LoadHeld). Writes still compare-and-set the version, so
// a held run never wins a write it should not.
func (rs *Runs) Reload(ctx context.Context, id string, held *Loaded) (*Loaded, error) {
	// What executing the run will read next comes in the same round trip:
	// its operations, and with keys what is checked before a call.
	var extra storage.RunParts
	if held == nil || held.Run.Status == record.StatusExecuting {
		// Reserve: the intent's write follows at once (see SaveWith).
		extra.Operations, extra.Reserve = true, true
		extra.Requests, extra.Decisions, extra.Audit = rs.in.Keyed(), rs.in.Keyed(), rs.in.Keyed()
	}
	var l *Loaded
	err := errMovedOn
	if usable(held) {
		// The row and what extra asks for are the View's one read; a run
		// written since is read again, whole, in a View of its own (a
		// second read of this one would cost PostgreSQL a round trip to end
		// its snapshot every time, to save one only when the row moved on).
		err = rs.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
			storage.LastRead(tx)
			var err error
			l, err = rs.loadAsHeld(ctx, tx, id, held, extra)
			return err
		})
	}
	if errors.Is(err, errMovedOn) {
		err = rs.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
			var err error
			l, err = rs.LoadOnce(ctx, tx, id, extra)
			return err
		})
	}
	var ie *record.IntegrityError
	if errors.As(err, &ie) {
		if aerr := rs.Attention(ctx, id, ie.Error()); aerr != nil {
			return nil, errors.Join(err, aerr)
		}
		return nil, err
	}
	return l, err
}

func (rs *Runs) GetRun(ctx context.Context, id string) (*record.Run, error) {
	var run *record.Run
	err := rs.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		run, err = tx.Run(ctx, id)
		return err
	})
	if errors.Is(err, storage.ErrNotFound) {
		return nil, record.UnknownRun(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, err)
	}
	return run, nil
}
