package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
)

// loaded is a run as read in one transaction: its row, its verified latest state
// and the hash the next checkpoint links to.
type loaded struct {
	run      *record.Run
	st       *record.State
	lastHash string
	// state is the encoded state of the latest checkpoint, as loaded or as
	// save wrote it, and committed says that the write holding it committed:
	// then the run is known as stored, and need not be verified again.
	state     []byte
	committed bool
	// spare is state decoded and held by nobody else, for loadHeld to hand
	// out once instead of decoding state again.
	spare *record.State
	// chain is the checkpoints load verified (nil from loadHeld's shortcut).
	chain []*record.Checkpoint
	// fps holds the fingerprints of state computed so far, by risk and policy
	// revision: a decision computes its run's before its write, and the write
	// transaction, which concurrent Updates share, takes it from here.
	fps map[fpKey]string
	// base is what the next checkpoint is written against: the latest
	// checkpoint that holds a whole state (nil: the next one holds its own).
	base *chain.Base
	// more is what was read with the run besides its checkpoints, in the
	// same transaction (see RunParts), or, for requests and decisions, held
	// from an earlier read of the same version (see loadHeld); more.Run is
	// nil when nothing was.
	more storage.RunBundle
	read storage.RunParts
	// partsAt is the run's version when more was read: once a write has
	// moved the run on, more is no longer what is stored.
	partsAt int64
	// staged is the checkpoint writeCheckpoint encoded for the write under way.
	staged *staged
}

type fpKey struct {
	risk     record.Risk
	revision string
}

// fingerprint is fingerprintOf(l.st, risk, revision), computed once per
// state: loadHeld hands the ones of a state it did not change on.
func (l *loaded) fingerprint(risk record.Risk, revision string) (string, error) {
	k := fpKey{risk, revision}
	if fp, ok := l.fps[k]; ok {
		return fp, nil
	}
	fp, err := fingerprintOf(l.st, risk, revision)
	if err != nil {
		return "", err
	}
	if l.fps == nil {
		l.fps = map[fpKey]string{}
	}
	l.fps[k] = fp
	return fp, nil
}

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

// loadWith is load that also reads the run's records extra asks for, in the
// same round trip (see Tx.LoadRun), for the caller to use from l.more.
func (rs *runs) loadWith(ctx context.Context, tx storage.Tx, id string, extra storage.RunParts) (*loaded, error) {
	extra.Checkpoints = true
	b, err := tx.LoadRun(ctx, id, extra)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, UnknownRun(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, err)
	}
	run, cps := b.Run, b.Checkpoints
	// The chain first, so that accidental damage is named as such; then the
	// seals, which catch a chain someone recomputed.
	st, full, err := chain.Verify(id, cps)
	if err != nil {
		return &loaded{run: run}, err
	}
	if err := rs.in.CheckRun(ctx, tx, id, cps, nil, nil, nil); err != nil {
		return &loaded{run: run}, err
	}
	if int64(len(cps)) != run.Seq {
		return &loaded{run: run}, &IntegrityError{RunID: id, Problem: fmt.Sprintf("run row says checkpoint %d but the chain ends at %d", run.Seq, len(cps))}
	}
	if st.Status != run.Status && run.Status != record.StatusNeedsAttention {
		return &loaded{run: run}, &IntegrityError{RunID: id, Problem: fmt.Sprintf("run row says %s but its checkpoint says %s", run.Status, st.Status)}
	}
	if p := rowProblem(run, st); p != "" {
		return &loaded{run: run}, &IntegrityError{RunID: id, Problem: p}
	}
	b.Checkpoints = nil
	extra.Checkpoints = false
	return &loaded{run: run, st: st, lastHash: cps[len(cps)-1].Hash, state: full, chain: cps, base: baseOf(cps), more: *b, read: extra, partsAt: run.Version}, nil
}

// load reads a run and verifies its checkpoint chain.
func (rs *runs) load(ctx context.Context, tx storage.Tx, id string) (*loaded, error) {
	return rs.loadWith(ctx, tx, id, storage.RunParts{})
}

// loadHeld is load for a run held from a committed write or an earlier read
// (held, or nil): when the run row still has the version, checkpoint and
// status held, nobody has written the run since (every write bumps the
// version), so the chain verified then is still the stored one and only the
// row is read (with what extra asks for, in the same round trip, but for the
// requests and decisions held from a read at that version). Anything else
// is loaded and verified afresh.
func (rs *runs) loadHeld(ctx context.Context, tx storage.Tx, id string, held *loaded, extra storage.RunParts) (*loaded, error) {
	if held == nil || !held.committed || held.state == nil {
		return rs.loadWith(ctx, tx, id, extra)
	}
	extra.Checkpoints = false
	// Requests and decisions are written only with their run (each such
	// write saves it, which bumps its version), so the ones held, read at
	// the version the run still has, are still the stored ones. Operations
	// are not: a failed attempt is recorded alone.
	ask, reuse := extra, storage.RunParts{}
	if held.partsAt == held.run.Version {
		reuse.Requests, reuse.Decisions = extra.Requests && held.read.Requests, extra.Decisions && held.read.Decisions
		ask.Requests, ask.Decisions = extra.Requests && !reuse.Requests, extra.Decisions && !reuse.Decisions
	}
	b, err := tx.LoadRun(ctx, id, ask)
	if err != nil || b.Run.Version != held.run.Version || b.Run.Seq != held.run.Seq || b.Run.Status != held.run.Status {
		return rs.loadWith(ctx, tx, id, extra)
	}
	if reuse.Requests {
		b.Requests = held.more.Requests
	}
	if reuse.Decisions {
		b.Decisions = held.more.Decisions
	}
	run := b.Run
	// A state of its own (spare, or decoded from the bytes stored), so that
	// it is exactly what a load would give and a caller's changes stay its own.
	st := held.spare
	held.spare = nil
	if st == nil {
		if st, err = chain.Decode(held.state); err != nil {
			return &loaded{run: run}, &IntegrityError{RunID: id, Seq: run.Seq, Problem: err.Error()}
		}
	}
	return &loaded{run: run, st: st, lastHash: held.lastHash, state: held.state, fps: held.fps, base: held.base, more: *b, read: extra, partsAt: run.Version}, nil
}

// staged is the next checkpoint of a run, encoded (and its hash computed)
// before the write that stores it.
type staged struct {
	cp   *record.Checkpoint
	full []byte // the whole state, which cp stores or a delta of
	// status, step and reason are the run's as cp holds them: a run changed
	// after staging is staged again by save.
	status record.Status
	step   int
	reason string
}

// stage encodes l's next checkpoint: l.st with the run's status, step and
// reason, written against l.base when that saves at least half of the state
// (see chain.Base.Delta), chained to l.lastHash.
func (rs *runs) stage(l *loaded, now time.Time) (*staged, error) {
	l.st.SchemaVersion = record.SchemaVersion
	l.st.Status = l.run.Status
	l.st.Step = l.run.Step
	l.st.Reason = l.run.Reason
	b, err := chain.Encode(l.st)
	if err != nil {
		return nil, err
	}
	stored, baseSeq := b, int64(0)
	if l.base != nil {
		d, ok, err := l.base.Delta(b)
		if err != nil {
			return nil, fmt.Errorf("encode checkpoint %d of run %s: %w", l.run.Seq+1, l.run.ID, err)
		}
		if ok {
			stored, baseSeq = d, l.base.Seq
		}
	}
	cp := &record.Checkpoint{RunID: l.run.ID, Seq: l.run.Seq + 1, SchemaVersion: record.SchemaVersion, State: stored, BaseSeq: baseSeq, PrevHash: l.lastHash, CreatedAt: now}
	cp.Hash = record.CheckpointHash(cp)
	return &staged{cp: cp, full: b, status: l.run.Status, step: l.run.Step, reason: l.run.Reason}, nil
}

// save writes l's run row (compare-and-set), a new checkpoint of l.st, the
// approval request when it is new, and an audit event, all in tx, and tells
// the hooks. The checkpoint is the one writeCheckpoint staged before the
// write when the run is still as it was then, and is staged here otherwise.
func (rs *runs) save(ctx context.Context, tx storage.Tx, l *loaded, from record.Status, event record.Event, actor string, detail any, req *record.ApprovalRequest) error {
	s := l.staged
	l.staged = nil
	if s == nil || s.cp.Seq != l.run.Seq+1 || s.cp.PrevHash != l.lastHash || s.status != l.run.Status || s.step != l.run.Step || s.reason != l.run.Reason {
		var err error
		if s, err = rs.stage(l, rs.now()); err != nil {
			return err
		}
	}
	cp, now := s.cp, s.cp.CreatedAt
	l.state = s.full
	l.run.Seq = cp.Seq
	l.run.UpdatedAt = now
	rs.lease(l.run, event, now)
	if l.run.Version == 0 {
		l.run.CreatedAt = now
	}
	w := &storage.RunWrite{Run: l.run, Checkpoint: cp}
	if req != nil && req.Version == 0 {
		w.Request = req
	}
	if err := tx.SaveRun(ctx, w); err != nil {
		return fmt.Errorf("save checkpoint %d of run %s: %w", cp.Seq, l.run.ID, err)
	}
	l.lastHash = cp.Hash
	if cp.BaseSeq == 0 {
		l.base = &chain.Base{Seq: cp.Seq, State: s.full}
	}
	if err := rs.auditCheckpoint(ctx, tx, cp, actor, event, detail); err != nil {
		return err
	}
	return rs.notify(ctx, tx, &Transition{Run: l.run, State: l.st, From: from, Event: event, Request: req})
}

// writeCheckpoint is write for an fn that saves l as it stands: the
// checkpoint is encoded before the write, so that the write, which
// concurrent Updates take turns in, only stores it. Nothing may change l.st
// inside fn before save.
func (rs *runs) writeCheckpoint(ctx context.Context, l *loaded, fn func(ctx context.Context, tx storage.Tx) error) error {
	s, err := rs.stage(l, rs.now())
	if err != nil {
		return err
	}
	l.staged = s
	defer func() { l.staged = nil }()
	return rs.write(ctx, l, fn)
}

// write runs fn, which saves l, in one Update, and notes whether it
// committed: only then is l the run as stored.
func (rs *runs) write(ctx context.Context, l *loaded, fn func(ctx context.Context, tx storage.Tx) error) error {
	l.committed = false
	err := rs.store.Update(ctx, fn)
	l.committed = err == nil
	return err
}

// lease keeps the lease of an active run with whoever makes progress on it, so
// that workers leave it alone, and frees it when the run stops being active. A
// valid lease of another owner is left in place: the compare-and-set on the
// version is what fences writers, the lease only spares duplicate work.
func (rs *runs) lease(r *record.Run, event record.Event, now time.Time) {
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

// view loads a run in a read-only transaction; an integrity problem puts the run
// in needs_attention and is returned.
func (rs *runs) view(ctx context.Context, id string) (*loaded, error) {
	return rs.reload(ctx, id, nil)
}

// reload is view for a run this engine may hold from its own last write
// (held, or nil; see loadHeld). Writes still compare-and-set the version, so
// a held run never wins a write it should not.
func (rs *runs) reload(ctx context.Context, id string, held *loaded) (*loaded, error) {
	// What executing the run will read next comes in the same round trip:
	// its operations, and with keys what is checked before a call.
	var extra storage.RunParts
	if held == nil || held.run.Status == record.StatusExecuting {
		extra.Operations = true
		extra.Requests, extra.Decisions, extra.Audit = rs.in.Keyed(), rs.in.Keyed(), rs.in.Keyed()
	}
	var l *loaded
	err := rs.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		l, err = rs.loadHeld(ctx, tx, id, held, extra)
		return err
	})
	var ie *IntegrityError
	if errors.As(err, &ie) {
		if aerr := rs.attention(ctx, id, ie.Error()); aerr != nil {
			return nil, errors.Join(err, aerr)
		}
		return nil, err
	}
	return l, err
}

func (rs *runs) getRun(ctx context.Context, id string) (*record.Run, error) {
	var run *record.Run
	err := rs.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		run, err = tx.Run(ctx, id)
		return err
	})
	if errors.Is(err, storage.ErrNotFound) {
		return nil, UnknownRun(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, err)
	}
	return run, nil
}
