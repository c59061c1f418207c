package sqlstore

import (
	"context"
	"fmt"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// Pipeliner is implemented by a Dialect whose every statement costs a round
// trip to a server: SaveRun then sends the statements of a transition, and
// the read of the run's audit head that its audit event needs next, together.
type Pipeliner interface {
	// Pipeline runs ws on c in order, in one round trip, and stops at the
	// first that fails: it returns its index (-1 when the failure is the
	// pipeline's own) and its error (mapped by Err). Nothing is guarded, and
	// the Writes after a compare-and-set that changed nothing have run: the
	// caller must not commit after an error (see Tx.Lost).
	Pipeline(ctx context.Context, c Conn, ws []Write) (failed int, err error)
	// CompareAndSetWrite is CompareAndSet as a Write: its Row returns
	// ErrConflict or ErrNotFound when update changed no row.
	CompareAndSetWrite(table, keyColumn string, key any, update string, args ...any) Write
	// AuditHeadWrites is AuditRunHead as Writes, which set seq and hash,
	// and spare to a second new seq, larger than seq: a second event the
	// transaction appends to the run takes it instead of reading the head
	// again (see Tx.AppendAudit). An unused spare is a gap in the seqs,
	// which are not gap-free.
	AuditHeadWrites(runID string, seq, spare *int64, hash *string) []Write
}

// Write is one statement of a pipeline, bound, and Row, which reads its one
// row (nil: it returns none). An error from Row fails the Write.
type Write struct {
	SQL  string
	Args []any
	Row  func(Row) error
}

// auditHead is the head of a run's audit chain as read ahead by SaveRun, in
// the same transaction and under the same lock as AuditRunHead, or as an
// event deferred in this transaction left it (see Tx.AppendAudit); spare is
// the second seq the read took (0: none).
type auditHead struct {
	runID string
	seq   int64
	hash  string
	spare int64
	// guarded says the head was read before the transaction (a
	// reservation, see Reserver): an event appended after it checks, on
	// the server, that the head is still hash.
	guarded bool
	// fresh says the run has no head yet (a new run's, see SeqPooler):
	// its first events make it.
	fresh bool
}

// Reserver is a Dialect that takes a run's next audit seqs in a read
// (storage.RunParts.Reserve) and sends a transition written after that
// read, events included, with its transaction's COMMIT
// (storage.RunWrite.Reserved): PostgreSQL, where each costs a round trip.
type Reserver interface {
	// ReserveQuery reads runID's audit head with two new seqs into into; ok
	// is false when c's transaction cannot take seqs (a View that began).
	ReserveQuery(c Conn, runID string, into *storage.AuditReservation) (q Query, ok bool)
	// GuardedUpdate is update (a compare-and-set) as one statement that
	// the server fails when update changes no row.
	GuardedUpdate(update string) string
	// DeferGuarded is Deferrer.Defer for a write sent with COMMIT whose
	// failure to change a row (a GuardedUpdate, a GuardedAuditMoveHead)
	// fails the Update with refused: storage.ErrConflict, or
	// storage.ErrHeadMoved for an event whose head moved.
	DeferGuarded(c Conn, what string, refused error, query string, args ...any)
	// GuardedAuditMoveHead is AuditMoveHead for a head read before the
	// transaction: it moves the head only while its hash is still the
	// argument after the MAC, and the server fails the events' insert
	// when it did not.
	GuardedAuditMoveHead(n int) string
}

// SeqPooler is a Reserver that keeps audit seqs taken ahead
// (PostgreSQL): a new run has no head to read, and a write that follows
// the head its run's last write left (RunWrite.Follows) knows it, so with
// two of them such a write, events included, needs no read and travels
// with COMMIT.
type SeqPooler interface {
	Reserver
	// PooledSeqs takes two seqs larger than after (the seq of the head the
	// events follow; 0 for a new run's), smaller first; ok is false when
	// none are at hand (or c's transaction cannot write).
	PooledSeqs(c Conn, after int64) (seq, spare int64, ok bool)
	// AuditMakeHead is GuardedAuditMoveHead for a new run's first
	// events: it makes the run's head at the last of them (or moves it
	// there from an empty one), and the server fails the events' insert
	// when the run has a head with events already.
	AuditMakeHead(n int) string
	// TopUp is a statement that takes seqs for the pool, for a write that
	// reads its head in a round trip anyway (a new run that found none
	// pooled); ok is false when the pool needs none.
	TopUp(c Conn) (w Write, ok bool)
}

// auditRunHead is the head SaveRun or an earlier event read ahead for the
// same run, once, or else Dialect.AuditRunHead; on a Pipeliner it is read
// with a spare seq (see AuditHeadWrites).
func (t *Tx) auditRunHead(ctx context.Context, runID string) (auditHead, error) {
	if h := t.head; h != nil && h.runID == runID {
		t.head = nil
		return *h, nil
	}
	h := auditHead{runID: runID}
	if p, ok := t.d.(Pipeliner); ok {
		_, err := p.Pipeline(ctx, t.c, p.AuditHeadWrites(runID, &h.seq, &h.spare, &h.hash))
		return h, err
	}
	var err error
	h.seq, h.hash, err = t.d.AuditRunHead(ctx, t.c, runID)
	return h, err
}

func (t *Tx) SaveRun(ctx context.Context, w *storage.RunWrite) error {
	if rh, ok := t.d.(RunHeads); ok && len(w.Events) > 0 {
		return t.saveRunWithHead(ctx, rh, w)
	}
	if err := t.saveRunRecords(ctx, w); err != nil {
		return err
	}
	for evs := w.Events; len(evs) > 0; {
		n, err := t.appendAudits(ctx, evs, w.Seal)
		if err != nil {
			return err
		}
		evs = evs[n:]
	}
	return nil
}

// RunHeads is a Dialect that keeps a run's audit head in its run row, and
// a transition's events in its checkpoint's row (SQLite): the run row a
// transition writes moves the head to the transition's last event in the
// same statement, and the checkpoint row holds the events (events.go).
// audit keeps the events of no checkpoint, and audit_heads the heads of
// events about no run or a run that does not exist.
type RunHeads interface {
	// RunAuditHead is AuditRunHead, and whether the head was read from
	// audit_heads (an event about runID written before its run row was).
	RunAuditHead(ctx context.Context, c Conn, runID string) (seq int64, hash string, inHeads bool, err error)
}

// saveRunWithHead is SaveRun where the run row holds its audit head
// (RunHeads): the head is read first, the events chained to it, and the
// run row written with the head they end at, then the checkpoint with the
// events, then the records beside them; each event takes the seq after the
// one before (the transaction is the one writer).
func (t *Tx) saveRunWithHead(ctx context.Context, rh RunHeads, w *storage.RunWrite) error {
	r := w.Run
	seq, prev, inHeads, err := rh.RunAuditHead(ctx, t.c, r.ID)
	if err != nil {
		return fmt.Errorf("save run %s: read its audit head: %w", r.ID, err)
	}
	evs, head := chainEvents(w.Events, seq, prev, w.Seal)
	if err := t.writeRunHead(ctx, r, head); err != nil {
		return err
	}
	if err := t.appendCheckpointEvents(ctx, w.Checkpoint, EncodeEvents(evs), lastSeq(evs)); err != nil {
		return err
	}
	rest := *w
	rest.Run, rest.Checkpoint = nil, nil
	if err := t.saveRunInTurn(ctx, &rest); err != nil {
		return err
	}
	for i, e := range evs {
		*w.Events[i] = *e
	}
	if inHeads {
		return t.dropHeadRow(ctx, r.ID)
	}
	return nil
}

// chainEvents is evs, events of one run, as appended after a head at
// prev, the first taking seq and each the next: each with its format, seq,
// link, hash and seal; and the head the last leaves.
func chainEvents(evs []*record.AuditEvent, seq int64, prev string, seal func(*record.AuditEvent, *record.AuditRunHead) (record.Seal, record.Seal)) ([]*record.AuditEvent, *record.AuditRunHead) {
	return chainEventsAt(evs, func(i int) int64 { return seq + int64(i) }, prev, seal)
}

// chainEventsAt is chainEvents where the i-th event takes seqAt(i).
func chainEventsAt(evs []*record.AuditEvent, seqAt func(i int) int64, prev string, seal func(*record.AuditEvent, *record.AuditRunHead) (record.Seal, record.Seal)) ([]*record.AuditEvent, *record.AuditRunHead) {
	out := make([]*record.AuditEvent, len(evs))
	var head record.AuditRunHead
	for i, e := range evs {
		next := *e
		next.Format, next.Seq, next.PrevHash, next.Seal = record.AuditPerRun, seqAt(i), prev, record.Seal{}
		next.Hash = record.AuditHash(&next)
		head = record.AuditRunHead{RunID: next.RunID, Seq: next.Seq, Hash: next.Hash}
		if seal != nil {
			next.Seal, head.Seal = seal(&next, &head)
		}
		out[i], prev = &next, next.Hash
	}
	return out, &head
}

// saveRunRecords writes w's records, its events aside.
func (t *Tx) saveRunRecords(ctx context.Context, w *storage.RunWrite) error {
	p, ok := t.d.(Pipeliner)
	if !ok {
		return t.saveRunInTurn(ctx, w)
	}
	if rv, ok := t.d.(Reserver); ok && w.Reserved != nil && w.Reserved.RunID == w.Run.ID && w.Run.Version != 0 {
		return t.saveRunReserved(ctx, rv, w)
	}
	sp, pools := t.d.(SeqPooler)
	follows := w.Follows != nil && w.Follows.RunID == w.Run.ID && w.Follows.Seq > 0 && w.Run.Version != 0
	if pools && (w.Run.Version == 0 && len(w.Events) > 0 || follows) {
		after := int64(0)
		if follows {
			after = w.Follows.Seq
		}
		if seq, spare, ok := sp.PooledSeqs(t.c, after); ok {
			if follows {
				return t.saveRunFollowing(ctx, sp, w, seq, spare)
			}
			return t.saveNewRunPooled(ctx, sp, w, seq, spare)
		}
	}
	r := w.Run
	ws, names := t.runWrites(w, p.CompareAndSetWrite)
	// The audit event that follows every transition reads the run's head:
	// read it now, in the same round trip.
	h := &auditHead{runID: r.ID}
	for _, hw := range p.AuditHeadWrites(r.ID, &h.seq, &h.spare, &h.hash) {
		ws = append(ws, hw)
		names = append(names, fmt.Sprintf("read the audit head of run %s", r.ID))
	}
	if pools && (r.Version == 0 || follows) {
		// A write that found no seqs pooled: the next ones will.
		if tw, ok := sp.TopUp(t.c); ok {
			ws = append(ws, tw)
			names = append(names, "take audit seqs ahead")
		}
	}
	if i, err := p.Pipeline(ctx, t.c, ws); err != nil {
		name := fmt.Sprintf("save run %s", r.ID)
		if i >= 0 {
			name = names[i]
		}
		err = fmt.Errorf("%s: %w", name, err)
		t.lost = err
		return err
	}
	if err := t.saved(ctx, w); err != nil {
		return err
	}
	t.head = h
	return nil
}

// saveRunReserved is SaveRun for a transition whose events follow a head
// reserved before the transaction: nothing is left to read, so its writes
// travel with COMMIT (or the transaction's next statement), each
// compare-and-set failing there when it changes nothing, and the events
// after them check the head. A conflict is the Update's ErrConflict.
func (t *Tx) saveRunReserved(ctx context.Context, rv Reserver, w *storage.RunWrite) error {
	guarded := func(_, _ string, _ any, update string, args ...any) Write {
		return Write{SQL: rv.GuardedUpdate(update), Args: args}
	}
	ws, names := t.runWrites(w, guarded)
	for i, x := range ws {
		rv.DeferGuarded(t.c, names[i], storage.ErrConflict, x.SQL, x.Args...)
	}
	if err := t.saved(ctx, w); err != nil {
		return err
	}
	res := w.Reserved
	t.head = &auditHead{runID: res.RunID, seq: res.Seq, spare: res.Spare, hash: res.Hash, guarded: true}
	return nil
}

// saveNewRunPooled is saveRunReserved for a new run whose first events
// take the pooled seqs seq and spare: its head, which it cannot have yet,
// is made by the statement that inserts them (AuditMakeHead), all with
// COMMIT.
func (t *Tx) saveNewRunPooled(ctx context.Context, sp SeqPooler, w *storage.RunWrite, seq, spare int64) error {
	reserved := *w
	reserved.Reserved = &storage.AuditReservation{RunID: w.Run.ID, Seq: seq, Spare: spare}
	if err := t.saveRunReserved(ctx, sp, &reserved); err != nil {
		return err
	}
	t.head.fresh = true
	return nil
}

// saveRunFollowing is saveRunReserved for a transition whose events follow
// the head the run's last write in this process left (RunWrite.Follows),
// with the pooled seqs seq and spare: nothing is left to read.
func (t *Tx) saveRunFollowing(ctx context.Context, sp SeqPooler, w *storage.RunWrite, seq, spare int64) error {
	reserved := *w
	reserved.Reserved = &storage.AuditReservation{RunID: w.Run.ID, Hash: w.Follows.Hash, Seq: seq, Spare: spare}
	return t.saveRunReserved(ctx, sp, &reserved)
}

// runWrites are w's statements as Writes, in order (the run, its
// checkpoint, a new request, then the records alongside), and what names
// each; cas makes a compare-and-set's Write.
func (t *Tx) runWrites(w *storage.RunWrite, cas func(table, keyColumn string, key any, update string, args ...any) Write) ([]Write, []string) {
	r, c := w.Run, w.Checkpoint
	var (
		ws    []Write
		names []string
	)
	add := func(x Write, name string) { ws, names = append(ws, x), append(names, name) }
	if r.Version == 0 {
		q, args := insertRun(r)
		add(Write{SQL: t.d.Bind(q), Args: args}, fmt.Sprintf("insert run %s", r.ID))
	} else {
		q, args := updateRun(r)
		add(cas("runs", "id", r.ID, t.d.Bind(q), args...), fmt.Sprintf("update run %s (version %d)", r.ID, r.Version))
	}
	q, args := appendCheckpoint(c)
	add(Write{SQL: t.d.Bind(q), Args: args}, fmt.Sprintf("append checkpoint %s/%d", c.RunID, c.Seq))
	if w.Request != nil {
		q, args := insertRequest(w.Request)
		add(Write{SQL: t.d.Bind(q), Args: args}, fmt.Sprintf("insert approval request %s", w.Request.ID))
	}
	if rq := w.Decided; rq != nil {
		q, args := updateRequest(rq)
		add(cas("approval_requests", "id", rq.ID, t.d.Bind(q), args...), updateRequestName(rq))
	}
	if d := w.Decision; d != nil {
		q, args := insertDecision(d)
		add(Write{SQL: t.d.Bind(q), Args: args, Row: func(r Row) error { return r.Scan(&d.ID) }}, insertDecisionName(d))
	}
	if op := w.Operation; op != nil && op.Version == 0 {
		q, args := insertOperation(op)
		add(Write{SQL: t.d.Bind(q), Args: args}, insertOperationName(op))
	} else if op != nil {
		q, args := updateOperation(op)
		add(cas("operations", "op_key", op.Key, t.d.Bind(q), args...), updateOperationName(op))
	}
	return ws, names
}

// saved notes w's writes as made: the run written (its notification) and
// the versions of what it carried moved on, as their own methods do.
func (t *Tx) saved(ctx context.Context, w *storage.RunWrite) error {
	if err := t.runWritten(ctx, w.Run, w.Run.Version == 0); err != nil {
		return err
	}
	if w.Request != nil {
		w.Request.Version = 1
	}
	written(w)
	return nil
}

// written moves the versions of the records w carried beside its run on,
// as their own methods do once their statements ran.
func written(w *storage.RunWrite) {
	if w.Decided != nil {
		w.Decided.Version++
	}
	if op := w.Operation; op != nil {
		op.Version++
	}
}

// Lost is the error of a SaveRun that sent its statements together and
// failed: some of them may have run, so the driver must roll back instead of
// committing, whatever fn returns (nil: none).
func (t *Tx) Lost() error { return t.lost }

// saveRunInTurn is SaveRun one statement after another, where a statement
// costs no round trip.
func (t *Tx) saveRunInTurn(ctx context.Context, w *storage.RunWrite) error {
	var err error
	switch {
	case w.Run == nil: // written already (saveRunWithHead)
	case w.Run.Version == 0:
		err = t.InsertRun(ctx, w.Run)
	default:
		err = t.UpdateRun(ctx, w.Run)
	}
	if err == nil && w.Checkpoint != nil {
		err = t.AppendCheckpoint(ctx, w.Checkpoint)
	}
	if err == nil && w.Request != nil {
		err = t.InsertRequest(ctx, w.Request)
	}
	if err == nil && w.Decided != nil {
		err = t.UpdateRequest(ctx, w.Decided)
	}
	if err == nil && w.Decision != nil {
		err = t.InsertDecision(ctx, w.Decision)
	}
	if op := w.Operation; err == nil && op != nil && op.Version == 0 {
		err = t.InsertOperation(ctx, op)
	} else if err == nil && op != nil {
		err = t.UpdateOperation(ctx, op)
	}
	return err
}
