// Package seal is what the engine's integrity keys do to the store: every
// record the engine writes through Sealer.Store is sealed (an HMAC under the
// ring's sealing key, see package keyring), and what the engine reads back
// is checked against its seal before it acts on it, against the store's
// sealed head, which says since when the store is keyed.
//
// It exists apart from the engine so that the one place that knows what each
// kind of record's MAC covers is small enough to review, and so that the
// engine's transactions and its store-wide verification check seals the one
// same way.
package seal

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/signoff-dev/signoff/keyring"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// What each kind of record's MAC covers. A MAC covers everything that says
// what happened, and nothing that says which write came last (version).
// Where a message was posted is a record of its own (MessageLocation),
// unsealed: see there why.

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func checkpointParts(c *record.Checkpoint) []string {
	return []string{c.RunID, strconv.FormatInt(c.Seq, 10), c.Hash}
}

func requestParts(r *record.ApprovalRequest) []string {
	return []string{r.ID, r.RunID, r.Fingerprint, r.Rule, r.PolicyRevision, string(r.Risk), r.Role,
		strconv.Itoa(r.Count), strconv.FormatBool(r.SelfApproval), strconv.FormatBool(r.Edit),
		r.RequesterID, ms(r.Deadline), string(r.Status), r.DecidedBy, ms(r.DecidedAt), ms(r.CreatedAt)}
}

func decisionParts(d *record.Decision) []string {
	parts := []string{d.RequestID, d.RunID, d.ApproverID, d.ApproverName, d.Role, string(d.Verdict),
		d.Reason, string(d.EditedArgs), string(d.Via), d.PayloadDigest, ms(d.At)}
	if d.OnBehalfOf != "" {
		// Only decisions made on someone's behalf seal it, so that every
		// older decision keeps its seal.
		parts = append(parts, "on_behalf_of", d.OnBehalfOf)
	}
	return parts
}

func operationParts(op *record.Operation) []string {
	return []string{op.Key, op.RunID, strconv.Itoa(op.Index), op.Action, op.ArgsDigest, string(op.Status),
		strconv.Itoa(op.Attempts), string(op.Receipt), op.Error, ms(op.CreatedAt), ms(op.UpdatedAt)}
}

func auditParts(e *record.AuditEvent) []string {
	return []string{strconv.FormatInt(e.Seq, 10), e.PrevHash, e.Hash, e.RunID,
		strconv.FormatInt(e.CheckpointSeq, 10), e.CheckpointHash}
}

func headParts(h *record.IntegrityHead) []string {
	parts := []string{ms(h.KeyedSince), strconv.FormatInt(h.Seq, 10), h.Hash}
	if h.AnchorID != 0 || h.AnchorHash != "" {
		// Only heads written since anchors name one seal it, so that every
		// older head keeps its seal.
		parts = append(parts, strconv.FormatInt(h.AnchorID, 10), h.AnchorHash)
	}
	return parts
}

func runHeadParts(h *record.AuditRunHead) []string {
	return []string{h.RunID, strconv.FormatInt(h.Seq, 10), h.Hash}
}

func anchorParts(a *record.AuditAnchor) []string {
	return []string{strconv.FormatInt(a.ID, 10), ms(a.At), a.Hash}
}

// sealWith seals parts under the ring's active key, or returns no seal.
func sealWith(r *keyring.Ring, kind string, parts []string) record.Seal {
	id, mac := r.Seal(kind, parts...)
	return record.Seal{KeyID: id, MAC: mac}
}

// Sealer is what the engine knows about the keys and the store's head.
type Sealer struct {
	keys *keyring.Ring
	mu   sync.Mutex
	// since is when the store was first keyed, once read from its head: it
	// never changes after that.
	since time.Time
}

// New is the sealer of keys (nil: nothing is sealed or checked).
func New(keys *keyring.Ring) *Sealer {
	return &Sealer{keys: keys}
}

// Keyed says whether the sealer has keys: without, it seals nothing and
// checks nothing.
func (in *Sealer) Keyed() bool { return in.keys != nil }

// Store is st with every record the engine writes through it sealed.
func (in *Sealer) Store(st storage.Store) storage.Store {
	return &sealedStore{Store: st, in: in}
}

// sealedStore seals every record the engine writes through it. Reads are
// checked where the engine uses them (see Sealer.CheckRun), so that a damaged
// row stops its own run and not the read of every other.
type sealedStore struct {
	storage.Store
	in *Sealer
}

func (s *sealedStore) Update(ctx context.Context, fn func(ctx context.Context, tx storage.Tx) error) error {
	if s.in.keys == nil {
		return s.Store.Update(ctx, fn)
	}
	return s.Store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		return fn(ctx, &sealingTx{Tx: tx, in: s.in})
	})
}

// sealingTx seals what it writes and keeps the store's sealed audit head
// on the last event.
type sealingTx struct {
	storage.Tx
	in *Sealer
}

// sealCheckpoint and sealRequest seal a record the same way whichever
// method writes it.
func (t *sealingTx) sealCheckpoint(c *record.Checkpoint) {
	c.Seal = sealWith(t.in.keys, "checkpoint", checkpointParts(c))
}

func (t *sealingTx) sealRequest(r *record.ApprovalRequest) {
	r.Seal = sealWith(t.in.keys, "request", requestParts(r))
}

func (t *sealingTx) AppendCheckpoint(ctx context.Context, c *record.Checkpoint) error {
	t.sealCheckpoint(c)
	return t.Tx.AppendCheckpoint(ctx, c)
}

func (t *sealingTx) SaveRun(ctx context.Context, w *storage.RunWrite) error {
	t.sealCheckpoint(w.Checkpoint)
	if w.Request != nil {
		t.sealRequest(w.Request)
	}
	if w.Decided != nil {
		t.sealRequest(w.Decided)
	}
	if d := w.Decision; d != nil {
		t.sealDecision(d)
	}
	if op := w.Operation; op != nil {
		t.sealOperation(op)
	}
	if len(w.Events) == 0 {
		return t.Tx.SaveRun(ctx, w)
	}
	w.Seal = t.sealEvent
	if err := t.Tx.SaveRun(ctx, w); err != nil {
		return err
	}
	return t.keyed(ctx, w.Events[0].At)
}

// sealEvent seals an audit event and its run's head as the store appends it.
func (t *sealingTx) sealEvent(e *record.AuditEvent, h *record.AuditRunHead) (record.Seal, record.Seal) {
	return sealWith(t.in.keys, "audit", auditParts(e)), sealWith(t.in.keys, "audit-head", runHeadParts(h))
}

func (t *sealingTx) sealDecision(d *record.Decision) {
	d.Seal = sealWith(t.in.keys, "decision", decisionParts(d))
}

func (t *sealingTx) sealOperation(op *record.Operation) {
	op.Seal = sealWith(t.in.keys, "operation", operationParts(op))
}

func (t *sealingTx) InsertRequest(ctx context.Context, r *record.ApprovalRequest) error {
	t.sealRequest(r)
	return t.Tx.InsertRequest(ctx, r)
}

func (t *sealingTx) UpdateRequest(ctx context.Context, r *record.ApprovalRequest) error {
	t.sealRequest(r)
	return t.Tx.UpdateRequest(ctx, r)
}

func (t *sealingTx) InsertDecision(ctx context.Context, d *record.Decision) error {
	t.sealDecision(d)
	return t.Tx.InsertDecision(ctx, d)
}

func (t *sealingTx) InsertDelegation(ctx context.Context, d *record.Delegation) error {
	d.Seal = sealWith(t.in.keys, "delegation", delegationParts(d))
	return t.Tx.InsertDelegation(ctx, d)
}

func (t *sealingTx) UpdateDelegation(ctx context.Context, d *record.Delegation) error {
	d.Seal = sealWith(t.in.keys, "delegation", delegationParts(d))
	return t.Tx.UpdateDelegation(ctx, d)
}

func (t *sealingTx) InsertOperation(ctx context.Context, op *record.Operation) error {
	t.sealOperation(op)
	return t.Tx.InsertOperation(ctx, op)
}

func (t *sealingTx) UpdateOperation(ctx context.Context, op *record.Operation) error {
	t.sealOperation(op)
	return t.Tx.UpdateOperation(ctx, op)
}

func (t *sealingTx) AppendAudit(ctx context.Context, e *record.AuditEvent, _ func(*record.AuditEvent, *record.AuditRunHead) (record.Seal, record.Seal)) error {
	if err := t.Tx.AppendAudit(ctx, e, t.sealEvent); err != nil {
		return err
	}
	return t.keyed(ctx, e.At)
}

// keyed writes the store's head after an audit event appended at at, when
// it is the first keyed write. The head says since when the store is
// keyed: written by the first keyed write, and then left alone (anchors
// move it), so that appends do not all write one row.
func (t *sealingTx) keyed(ctx context.Context, at time.Time) error {
	old, err := t.in.keyedHead(ctx, t.Tx)
	var ie *record.IntegrityError
	switch {
	case errors.As(err, &ie):
		// A damaged head is left as it is, for verify to report: sealing it
		// again would bless what someone wrote into it.
		return nil
	case err != nil:
		return err
	case old != nil:
		return nil
	}
	h := &record.IntegrityHead{KeyedSince: at}
	h.Seal = sealWith(t.in.keys, "head", headParts(h))
	return t.Tx.PutIntegrityHead(ctx, h)
}

// Head reads and checks the store's sealed head: nil for a store never keyed.
func (in *Sealer) Head(ctx context.Context, tx storage.Tx) (*record.IntegrityHead, error) {
	h, err := in.ReadHead(ctx, tx)
	if err == nil && h != nil && in.keys != nil {
		in.mu.Lock()
		in.since = h.KeyedSince
		in.mu.Unlock()
	}
	return h, err
}

// keyedHead is what checking a row's seal needs of the head, its keyed-since
// time, without reading it again once this engine has read it sealed: that
// time never changes. Verify reads the head afresh every time.
func (in *Sealer) keyedHead(ctx context.Context, tx storage.Tx) (*record.IntegrityHead, error) {
	in.mu.Lock()
	since := in.since
	in.mu.Unlock()
	if !since.IsZero() {
		return &record.IntegrityHead{KeyedSince: since}, nil
	}
	return in.Head(ctx, tx)
}

// HeadKnown says whether checking a seal needs no read of the head: there
// are no keys, or this engine has read the head already. Then a check may
// run without a transaction (a nil Tx).
func (in *Sealer) HeadKnown() bool {
	if in.keys == nil {
		return true
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return !in.since.IsZero()
}

// ReadHead reads the store's head and, with keys, checks its seal; unlike
// Head it does not remember since when the store is keyed.
func (in *Sealer) ReadHead(ctx context.Context, tx storage.Tx) (*record.IntegrityHead, error) {
	h, err := tx.IntegrityHead(ctx)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if in.keys == nil {
		return h, nil // nothing to check it with: verify says the seals were not checked
	}
	if err := in.keys.Check("head", h.KeyID, h.MAC, headParts(h)...); err != nil {
		return nil, &record.IntegrityError{Problem: "the store's integrity head: " + err.Error()}
	}
	return h, nil
}

// sealProblem says what is wrong with one row's seal, or "". A row without a
// seal is fine in a store never keyed and when it was written before the
// store was keyed; after that, every row must be sealed.
func (in *Sealer) sealProblem(h *record.IntegrityHead, kind string, s record.Seal, written time.Time, parts []string) string {
	err := in.keys.Check(kind, s.KeyID, s.MAC, parts...)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, keyring.ErrUnkeyed) && (h == nil || written.Before(h.KeyedSince)):
		return ""
	case errors.Is(err, keyring.ErrUnkeyed):
		return fmt.Sprintf("not sealed, though written %s, after the store was keyed (%s)",
			written.UTC().Format(time.RFC3339), h.KeyedSince.UTC().Format(time.RFC3339))
	}
	return err.Error()
}

// CheckRun checks the seals of what the engine is about to act on for one
// run: its checkpoints, requests, decisions and operations (any may be nil).
// It returns a *record.IntegrityError naming the first row at fault. Without
// keys nothing is checked: a process without the key cannot tell.
func (in *Sealer) CheckRun(ctx context.Context, tx storage.Tx, runID string, cps []*record.Checkpoint, reqs []*record.ApprovalRequest, decs []*record.Decision, ops []*record.Operation) error {
	if in.keys == nil {
		return nil
	}
	h, err := in.runHead(ctx, tx, runID)
	if err != nil {
		return err
	}
	if sealed, _ := Counts(cps, reqs, decs, ops); h == nil && sealed > 0 {
		// Sealed rows are only written once the head exists: it was deleted.
		return &record.IntegrityError{RunID: runID, Problem: "the store's integrity head is missing, though this run's rows are sealed"}
	}
	for _, c := range cps {
		if p := in.sealProblem(h, "checkpoint", c.Seal, c.CreatedAt, checkpointParts(c)); p != "" {
			return &record.IntegrityError{RunID: runID, Seq: c.Seq, Problem: p}
		}
	}
	for _, r := range reqs {
		if p := in.sealProblem(h, "request", r.Seal, r.CreatedAt, requestParts(r)); p != "" {
			return &record.IntegrityError{RunID: runID, Problem: fmt.Sprintf("approval request %s: %s", r.ID, p)}
		}
	}
	for _, d := range decs {
		if p := in.sealProblem(h, "decision", d.Seal, d.At, decisionParts(d)); p != "" {
			return &record.IntegrityError{RunID: runID, Problem: fmt.Sprintf("decision %d (%s by %s): %s", d.ID, d.Verdict, d.ApproverID, p)}
		}
	}
	for _, op := range ops {
		if p := in.sealProblem(h, "operation", op.Seal, op.CreatedAt, operationParts(op)); p != "" {
			return &record.IntegrityError{RunID: runID, Problem: fmt.Sprintf("operation %s: %s", op.Key, p)}
		}
	}
	return nil
}

// runHead is keyedHead for checking one run: a damaged head names the run.
func (in *Sealer) runHead(ctx context.Context, tx storage.Tx, runID string) (*record.IntegrityHead, error) {
	h, err := in.keyedHead(ctx, tx)
	var ie *record.IntegrityError
	if errors.As(err, &ie) {
		ie.RunID = runID
	}
	return h, err
}

// Counts counts the sealed and the unsealed rows among a run's records.
func Counts(cps []*record.Checkpoint, reqs []*record.ApprovalRequest, decs []*record.Decision, ops []*record.Operation) (sealed, unsealed int) {
	count := func(s record.Seal) {
		if s.MAC != "" {
			sealed++
		} else {
			unsealed++
		}
	}
	for _, c := range cps {
		count(c.Seal)
	}
	for _, r := range reqs {
		count(r.Seal)
	}
	for _, d := range decs {
		count(d.Seal)
	}
	for _, op := range ops {
		count(op.Seal)
	}
	return sealed, unsealed
}

// CheckAudit checks one run's audit events as read, and its audit head:
// each event's hash and seal, the run's chain and that it ends where its
// sealed head says (RunAuditProblem). Without keys nothing is checked.
func (in *Sealer) CheckAudit(ctx context.Context, tx storage.Tx, runID string, evs []*record.AuditEvent, rh *record.AuditRunHead) error {
	if in.keys == nil {
		return nil
	}
	h, err := in.runHead(ctx, tx, runID)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if record.AuditHash(ev) != ev.Hash {
			return &record.IntegrityError{RunID: runID, Problem: fmt.Sprintf("audit event %d does not match its hash", ev.Seq)}
		}
		if p := in.sealProblem(h, "audit", ev.Seal, ev.At, auditParts(ev)); p != "" {
			return &record.IntegrityError{RunID: runID, Problem: fmt.Sprintf("audit event %d: %s", ev.Seq, p)}
		}
		if h == nil && ev.MAC != "" {
			return &record.IntegrityError{RunID: runID, Problem: "the store's integrity head is missing, though this run's audit events are sealed"}
		}
	}
	if p := in.RunAuditProblem(h, runID, evs, rh); p != "" {
		return &record.IntegrityError{RunID: runID, Problem: p}
	}
	return nil
}

// RunAuditProblem checks one run's per-run chain (its events by seq, of
// either format; only per-run ones link to each other) against its head and
// the head's seal, and describes the first problem, or returns "".
func (in *Sealer) RunAuditProblem(h *record.IntegrityHead, runID string, evs []*record.AuditEvent, head *record.AuditRunHead) string {
	prev := ""
	var last *record.AuditEvent
	for _, ev := range evs {
		if ev.Format != record.AuditPerRun {
			continue
		}
		if ev.PrevHash != prev || record.AuditHash(ev) != ev.Hash {
			return fmt.Sprintf("the audit chain of the run is broken at event %d", ev.Seq)
		}
		prev, last = ev.Hash, ev
	}
	switch {
	case head == nil && last == nil:
		return ""
	case head == nil:
		return fmt.Sprintf("the run's audit events have no head (its last is event %d): the head was deleted", last.Seq)
	case last == nil || last.Seq < head.Seq:
		n := int64(0)
		if last != nil {
			n = last.Seq
		}
		return fmt.Sprintf("the run's audit log ends at event %d, but its head is at event %d: the newest events were deleted", n, head.Seq)
	case last.Seq != head.Seq || last.Hash != head.Hash:
		return fmt.Sprintf("the run's audit head names event %d, not its last event %d", head.Seq, last.Seq)
	}
	if in.keys != nil {
		if p := in.sealProblem(h, "audit-head", head.Seal, last.At, runHeadParts(head)); p != "" {
			return "the run's audit head: " + p
		}
	}
	return ""
}

// EventProblem says what is wrong with an audit event's seal, or "" (see
// sealProblem): verify checks every event of the log, not one run's.
func (in *Sealer) EventProblem(h *record.IntegrityHead, ev *record.AuditEvent) string {
	return in.sealProblem(h, "audit", ev.Seal, ev.At, auditParts(ev))
}

// ForeignHeadKey is the key the store's head is sealed with when keys are
// configured and do not include it, or "".
func (in *Sealer) ForeignHeadKey(ctx context.Context, tx storage.Tx) (string, error) {
	if in.keys == nil {
		return "", nil
	}
	h, err := tx.IntegrityHead(ctx)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read the store's integrity head: %w", err)
	case h.KeyID != "" && !in.keys.Has(h.KeyID):
		return h.KeyID, nil
	}
	return "", nil
}
