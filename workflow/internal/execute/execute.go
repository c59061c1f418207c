// Package execute carries out the approved operations of a run, as River's
// job executor does a job, and holds the executor contract the engine
// calls targets through (Executor, Call, the classes of error). It is a
// package of its own so that what may reach a target is decided in one
// place, over the run transaction (runtx), with nothing else of the engine
// in reach.
package execute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
	"github.com/signoff-dev/signoff/workflow/internal/seal"
	"github.com/signoff-dev/signoff/workflow/internal/verify"
)

// Runner carries out an approved run's operations, as River's job
// executor does a job: intent before effect, the call under its idempotency
// key, the lookup that reconciles an unknown outcome, the receipt after the
// effect, and parking a run whose target asks to wait. Its dependencies are
// explicit; it holds no run between calls.
type Runner struct {
	runs      *runtx.Runs
	store     storage.Store
	in        *seal.Sealer
	actions   map[string]*ActionSpec
	log       *slog.Logger
	fail      func(string)
	execN     int
	backoff   func(int) time.Duration
	owner     string
	ttl       time.Duration
	published func() (verify.Anchor, bool)
	hide      func(actions []record.Action, text string) string
}

// Config is what a Runner is built from.
type Config struct {
	Runs    *runtx.Runs
	Store   storage.Store // sealed and notifying
	Sealer  *seal.Sealer
	Actions map[string]*ActionSpec
	Logger  *slog.Logger
	// Failpoint is called at each write boundary with its name.
	Failpoint func(string)
	// Attempts bounds the attempts at a call that fails transiently, and
	// Backoff is the wait before retry n (1-based).
	Attempts int
	Backoff  func(n int) time.Duration
	// Owner names the engine in leases; a call ends within half of TTL.
	Owner string
	TTL   time.Duration
	// Published, when set, says the newest audit anchor published outside
	// the store (see checkPublished).
	Published func() (verify.Anchor, bool)
	// Hide is text (a target's error, for the log) with what the actions'
	// redacted fields hold hidden.
	Hide func(actions []record.Action, text string) string
}

// New builds a Runner over c.
func New(c Config) *Runner {
	return &Runner{runs: c.Runs, store: c.Store, in: c.Sealer, actions: c.Actions, log: c.Logger, fail: c.Failpoint,
		execN: c.Attempts, backoff: c.Backoff, owner: c.Owner, ttl: c.TTL, published: c.Published, hide: c.Hide}
}

// ExecuteNext advances an executing run by one write boundary; the caller loads
// the run again to see where it stands.
func (x *Runner) ExecuteNext(ctx context.Context, l *runtx.Loaded) error {
	id := l.Run.ID
	// Why the run was parked (see park) is over: the next write says what
	// became of it.
	l.Run.Reason = ""
	// Re-hash the stored arguments and compare them with the approved fingerprint
	// right before any call: what runs is exactly what was approved.
	if l.State.Gate == nil {
		return x.runs.Attention(ctx, id, "the run is executing without a policy decision")
	}
	fp, err := x.runs.FingerprintOf(l.State, l.State.Gate.Risk, l.State.Gate.PolicyRevision)
	if err != nil || fp != l.State.Gate.Fingerprint || fp != l.Run.Fingerprint {
		return x.runs.Attention(ctx, id, "the stored arguments no longer match the approved fingerprint; nothing was run")
	}
	ops := l.More.Operations
	if l.Read.Operations && x.in.HeadKnown() {
		err = x.in.CheckRun(ctx, nil, id, nil, nil, nil, ops)
	} else {
		ops, err = x.Operations(ctx, id)
	}
	var ie *record.IntegrityError
	if errors.As(err, &ie) {
		return x.runs.Attention(ctx, id, ie.Error()+"; nothing was sent")
	}
	if err != nil {
		return fmt.Errorf("load operations of run %s: %w", id, err)
	}
	ops = WithIntents(ops, id, l.State)
	byIndex := map[int]*record.Operation{}
	for _, op := range ops {
		byIndex[op.Index] = op
	}
	for i, a := range l.State.Actions {
		op := byIndex[i]
		switch {
		case op == nil:
			spec, ok := x.actions[a.Name]
			if !ok {
				return x.runs.Attention(ctx, id, fmt.Sprintf("no executor for action %q in this build", a.Name))
			}
			if err := x.checkApproval(ctx, l); err != nil {
				return err
			}
			return x.intend(ctx, l, i, a, spec)
		case op.Status == record.OpCommitted:
			continue
		case op.Status == record.OpPending:
			if problem := intentMismatch(op, i, a); problem != "" {
				return x.runs.Attention(ctx, id, problem)
			}
			if err := x.checkApproval(ctx, l); err != nil {
				return err
			}
			return x.perform(ctx, l, op, a)
		default:
			return x.runs.Attention(ctx, id, fmt.Sprintf("operation %s is %s: %s", op.Key, op.Status, op.Error))
		}
	}
	// Every action has its receipt but the run did not end with the last one:
	// a store written by an older build, which ended a run in a commit of its own.
	l.Run.Status, l.Run.Reason = record.StatusDone, ""
	err = x.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
		return x.runs.Save(ctx, tx, l, record.StatusExecuting, record.EventFinished, "signoff", finishedDetail(l.State), nil)
	})
	if err != nil && !errors.Is(err, storage.ErrConflict) {
		return fmt.Errorf("finish run %s: %w", id, err)
	}
	if err == nil {
		x.log.Info("run finished", "run_id", id, "status", string(record.StatusDone), "operations", len(l.State.Actions))
	}
	return nil
}

// Operations reads a run's operations and checks their seals.
func (x *Runner) Operations(ctx context.Context, id string) ([]*record.Operation, error) {
	var ops []*record.Operation
	err := x.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		if ops, err = tx.Operations(ctx, id); err != nil {
			return err
		}
		return x.in.CheckRun(ctx, tx, id, nil, nil, nil, ops)
	})
	return ops, err
}

// checkApproval checks, right before anything is sent, the seals of what was
// approved and by whom (the requests and decisions) and of the run's audit
// events: a change behind the engine's back hands the run to a person. It
// uses what was loaded with the run, in the same transaction, when it was.
func (x *Runner) checkApproval(ctx context.Context, l *runtx.Loaded) error {
	// The anchor published is read before the store is: it was published
	// after it committed, so the store read next holds it.
	var pub *verify.Anchor
	if x.published != nil {
		if a, ok := x.published(); ok && !a.Event && a.Seq > 0 {
			pub = &a
		}
	}
	if !x.in.Keyed() && pub == nil {
		return nil
	}
	id := l.Run.ID
	check := func(ctx context.Context, tx storage.Tx) error {
		b := l.More
		if tx != nil {
			var err error
			if b.Requests, err = tx.RequestsForRun(ctx, id); err != nil {
				return err
			}
			if b.Decisions, err = tx.Decisions(ctx, id); err != nil {
				return err
			}
			if b.Audit, err = tx.AuditEvents(ctx, storage.AuditFilter{RunID: id}); err != nil {
				return err
			}
			b.AuditHead, err = tx.AuditRunHead(ctx, id)
			if errors.Is(err, storage.ErrNotFound) {
				b.AuditHead, err = nil, nil
			}
			if err != nil {
				return err
			}
		}
		if err := x.in.CheckRun(ctx, tx, id, nil, b.Requests, b.Decisions, nil); err != nil {
			return err
		}
		if err := x.in.CheckAudit(ctx, tx, id, b.Audit, b.AuditHead); err != nil {
			return err
		}
		return x.checkPublished(ctx, tx, id, b.Audit, pub)
	}
	var err error
	if l.Read.Requests && l.Read.Decisions && l.Read.Audit && x.in.HeadKnown() && pub == nil {
		err = check(ctx, nil)
	} else {
		err = x.store.View(ctx, check)
	}
	var ie *record.IntegrityError
	if errors.As(err, &ie) {
		return x.runs.Attention(ctx, id, ie.Error()+"; nothing was sent")
	}
	if err != nil {
		return fmt.Errorf("check the approval of run %s: %w", id, err)
	}
	return nil
}

// checkPublished checks, when an anchor pub was published outside the store
// (read before tx began),
// that the store still holds it as published (its hash, which covers the
// run heads it recorded) and that the run's audit events it recorded are
// unchanged: a rewrite of what the anchor covers is caught before the run
// sends anything. Runs whose events came after the newest anchor are
// covered by the seals alone until the next anchor.
func (x *Runner) checkPublished(ctx context.Context, tx storage.Tx, runID string, evs []*record.AuditEvent, pub *verify.Anchor) error {
	if pub == nil || tx == nil || pub.Event || pub.Seq == 0 {
		return nil
	}
	a := *pub
	rec, err := anchorByID(ctx, tx, a.Seq)
	if err != nil {
		return err
	}
	problem := func(format string, args ...any) error {
		return &record.IntegrityError{RunID: runID, Problem: fmt.Sprintf("the audit log no longer extends anchor %s, published outside the store: ", a) + fmt.Sprintf(format, args...)}
	}
	switch {
	case rec == nil:
		return problem("the store has no anchor %d", a.Seq)
	case record.AnchorHash(rec) != a.Hash || rec.Hash != a.Hash:
		return problem("the store's anchor %d is another one", a.Seq)
	}
	for _, h := range rec.Heads {
		if h.RunID != runID {
			continue
		}
		for _, ev := range evs {
			if ev.Seq == h.Seq {
				if ev.Hash != h.Hash {
					return problem("the run's audit event %d was changed since", h.Seq)
				}
				return nil
			}
		}
		return problem("the run's audit event %d is missing", h.Seq)
	}
	return nil
}

// anchorByID loads anchor id, or nil when the store has none of that id:
// the newest one is read first, as it is the one published last.
func anchorByID(ctx context.Context, tx storage.Tx, id int64) (*record.AuditAnchor, error) {
	latest, err := tx.LatestAnchor(ctx)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load the newest anchor: %w", err)
	}
	if latest.ID == id {
		return latest, nil
	}
	if latest.ID < id {
		return nil, nil
	}
	all, err := tx.AuditAnchors(ctx)
	if err != nil {
		return nil, fmt.Errorf("load anchors: %w", err)
	}
	for _, an := range all {
		if an.ID == id {
			return an, nil
		}
	}
	return nil, nil
}

// intentMismatch says how a pending operation's recorded intent differs from
// the approved action it is about to send or reconcile, or returns "". The
// arguments were just checked against the approved fingerprint; the intent
// recorded their digest before any call, so a difference means one of the
// two was changed behind the engine's back, and neither is to be trusted.
func intentMismatch(op *record.Operation, i int, a record.Action) string {
	digest, err := jsonvalue.Digest(a.Args)
	switch {
	case err != nil:
		return fmt.Sprintf("operation %s: the approved arguments cannot be digested (%v); nothing was sent", op.Key, err)
	case op.Index != i || op.Action != a.Name:
		return fmt.Sprintf("operation %s records action %d %q, but the approved action %d is %q; nothing was sent", op.Key, op.Index+1, op.Action, i+1, a.Name)
	case op.ArgsDigest != digest:
		return fmt.Sprintf("operation %s recorded arguments %s at intent, but the approved arguments are %s; nothing was sent", op.Key, short(op.ArgsDigest), short(digest))
	}
	return ""
}

func short(digest string) string {
	if len(digest) > 16 {
		return digest[:16]
	}
	return digest
}

// intend records the intent to run action i together with its first attempt,
// in one commit before any call, and then makes the call. The commit also
// renews the run's lease (compare-and-set on its version): a worker that lost
// the run cannot start the call. A crash after it leaves a pending operation
// whose attempt has no outcome, so the next worker asks the target first.
// The intent is kept in the commit's checkpoint (see WithIntents): the
// operation's row is written with what comes of the call.
func (x *Runner) intend(ctx context.Context, l *runtx.Loaded, i int, a record.Action, spec *ActionSpec) error {
	digest, err := jsonvalue.Digest(a.Args)
	if err != nil {
		return fmt.Errorf("digest arguments of action %d: %w", i+1, err)
	}
	now := x.runs.Now()
	op := &record.Operation{
		Key: OperationKey(l.Run.ID, i), RunID: l.Run.ID, Index: i, Action: a.Name, ArgsDigest: digest,
		Status: record.OpPending, Attempts: 1, CreatedAt: now, UpdatedAt: now,
	}
	SetOpRecord(l.State, op)
	heldIntent(l.State, op, now)
	err = x.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
		err := x.runs.SaveWith(ctx, tx, l, record.StatusExecuting, record.EventIntent, "signoff", map[string]string{"key": op.Key, "action": a.Name, "args_digest": digest}, nil, runtx.Also{})
		if err != nil {
			return fmt.Errorf("record intent %s: %w", op.Key, err)
		}
		return nil
	})
	if refusedWrite(err) {
		return nil // another worker got there first; the caller reloads
	}
	if err != nil {
		return err
	}
	x.fail("after-intent")
	return x.call(ctx, l, op, a, spec)
}

// perform runs (or reconciles) a pending operation. A pending operation may have
// reached the target before a crash, so the target is asked first whenever an
// attempt was already made; only a proven "did not happen" sends it again, and
// always with the same key.
func (x *Runner) perform(ctx context.Context, l *runtx.Loaded, op *record.Operation, a record.Action) error {
	spec, ok := x.actions[a.Name]
	if !ok {
		return x.runs.Attention(ctx, l.Run.ID, fmt.Sprintf("no executor for action %q in this build", a.Name))
	}
	if op.Attempts > 0 {
		rc, found, err := x.Lookup(ctx, spec.Executor, op.Key)
		if err := ctx.Err(); err != nil {
			return err // stopping, not unprovable: the next worker asks again
		}
		if err != nil {
			return x.unanswered(ctx, l, op, spec, err)
		}
		if found {
			return x.receipt(ctx, l, op, rc, record.EventReconciled)
		}
		// An attempt whose failure came back (op.Error) counts against the
		// budget. One with no outcome recorded was cut short by a crash
		// before anything came back, and the target says it did not happen:
		// it is made again under its own number, so that attempts count what
		// may have reached the target.
		if op.Error != "" {
			if op.Attempts >= x.execN {
				return x.failOp(ctx, l, op, fmt.Sprintf("%s did not happen after %d attempts", op.Key, op.Attempts))
			}
			op.Attempts++
		}
	} else {
		op.Attempts = 1 // an intent recorded without its attempt, by an older build
	}
	op.Error = ""
	now := x.runs.Now()
	op.UpdatedAt = now
	// Counting the attempt also writes the run (compare-and-set on its version,
	// lease renewed): a worker that lost the run to another cannot start a call.
	// It is no event of its own.
	x.runs.Lease(l.Run, "", now)
	l.Run.UpdatedAt = now
	err := x.runs.Write(ctx, l, func(ctx context.Context, tx storage.Tx) error {
		if err := tx.UpdateRun(ctx, l.Run); err != nil {
			return err
		}
		return WriteOperation(ctx, tx, op)
	})
	if errors.Is(err, storage.ErrConflict) {
		return nil // another worker is on it; the caller reloads
	}
	if err != nil {
		return fmt.Errorf("count attempt of %s: %w", op.Key, err)
	}
	return x.call(ctx, l, op, a, spec)
}

// call makes the attempt that op's last commit counted, and records what came
// of it.
func (x *Runner) call(ctx context.Context, l *runtx.Loaded, op *record.Operation, a record.Action, spec *ActionSpec) error {
	// The call must end inside the lease, or another worker may reconcile while
	// it is still in flight. A call cut short has an unknown outcome and is
	// reconciled like any other.
	callCtx, cancel := context.WithTimeout(ctx, x.ttl/2)
	defer cancel()
	var rc record.Receipt
	var err error
	if ce, ok := spec.Executor.(CallExecutor); ok {
		rc, err = ce.ExecuteCall(callCtx, Call{
			Key: op.Key, RunID: l.Run.ID, Action: a, Fingerprint: l.Run.Fingerprint,
			ApprovedBy: approvers(l.State), Attempt: op.Attempts,
		})
	} else {
		rc, err = spec.Executor.Execute(callCtx, op.Key, a)
	}
	if err == nil {
		x.fail("after-effect")
		return x.receipt(ctx, l, op, rc, record.EventExecuted)
	}
	switch Classify(err) {
	case ClassPermanent:
		return x.failOp(ctx, l, op, "refused by the target: "+err.Error())
	case ClassTransient:
		if op.Attempts >= x.execN {
			return x.failOp(ctx, l, op, fmt.Sprintf("the target kept failing after %d attempts: %v", op.Attempts, err))
		}
		x.log.Warn("transient failure, retrying with the same key", "run_id", l.Run.ID, "key", op.Key, "attempt", op.Attempts, "error", x.hide(l.State.Actions, err.Error()))
		if err := x.attemptFailed(ctx, op, "the target failed: "+err.Error()); err != nil {
			return err
		}
		// The wait is spent parked, not here: the worker goes on to other runs.
		at := x.runs.Now().Add(max(x.backoff(op.Attempts), retryAfterOf(err)))
		return x.park(ctx, l, at, fmt.Sprintf("%s failed (attempt %d of %d): %v", op.Key, op.Attempts, x.execN, err))
	default:
		// Outcome unknown: the next round asks the target before anything else.
		x.log.Warn("outcome unknown, reconciling", "run_id", l.Run.ID, "key", op.Key, "error", x.hide(l.State.Actions, err.Error()))
		return x.attemptFailed(ctx, op, "outcome unknown: "+err.Error())
	}
}

// attemptFailed records that op's attempt came back without a receipt, so
// that the next round, after asking the target, counts it against the budget.
// A conflict means another worker moved the operation on; the caller reloads.
func (x *Runner) attemptFailed(ctx context.Context, op *record.Operation, problem string) error {
	op.Error, op.UpdatedAt = problem, x.runs.Now()
	err := x.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return WriteOperation(ctx, tx, op) })
	if err != nil && !errors.Is(err, storage.ErrConflict) {
		return fmt.Errorf("record the failed attempt of %s: %w", op.Key, err)
	}
	return nil
}

// Lookup asks the target once whether key happened. Asking only reads, so
// repeating it is harmless.
func (x *Runner) Lookup(ctx context.Context, ex Executor, key string) (record.Receipt, bool, error) {
	lookupCtx, cancel := context.WithTimeout(ctx, x.ttl/2)
	defer cancel()
	return ex.Lookup(lookupCtx, key)
}

// maxLookupWait bounds the wait between two lookups that set none.
const maxLookupWait = time.Minute

// unanswered handles a lookup that could not say whether op happened: a
// slow action still in progress (a 503 or 409 with Retry-After), or a
// register that is down for a while. Until the action's reconcile budget,
// counted from op's last recorded attempt, is spent, the run is parked and
// asked again later (at the wait the target asked for, or a backoff that
// grows with the time spent); then, or at once for an answer the target
// calls final, the outcome is unprovable and a person must look.
func (x *Runner) unanswered(ctx context.Context, l *runtx.Loaded, op *record.Operation, spec *ActionSpec, err error) error {
	now, since, within := x.runs.Now(), op.UpdatedAt, spec.reconcileWithin()
	if Classify(err) == ClassPermanent {
		return x.unprovable(ctx, l, op, fmt.Sprintf("the outcome of %s cannot be proven: %v", op.Key, err))
	}
	end := since.Add(within)
	if !now.Before(end) {
		return x.unprovable(ctx, l, op, fmt.Sprintf("the outcome of %s cannot be proven: the target did not say within %s: %v", op.Key, within, err))
	}
	wait := retryAfterOf(err)
	if wait == 0 {
		wait = min(max(x.backoff(1), now.Sub(since)/2), maxLookupWait)
	}
	// The last ask is made when the budget ends, not after.
	at := now.Add(wait)
	if at.After(end) {
		at = end
	}
	x.log.Warn("the target cannot say yet whether the operation happened; asking again later", "run_id", l.Run.ID, "key", op.Key, "at", at, "error", x.hide(l.State.Actions, err.Error()))
	return x.park(ctx, l, at, fmt.Sprintf("the target cannot say yet whether %s happened (%v)", op.Key, err))
}

// park frees the run until at: nobody holds its lease, and no worker claims
// it before then (ClaimRuns skips a lease that has not lapsed), so that a
// target asking for time holds up no other run and no worker. The run's
// reason says why and when meanwhile (see ParkedUntil); the next write that
// moves the run on clears it.
func (x *Runner) park(ctx context.Context, l *runtx.Loaded, at time.Time, why string) error {
	l.Run.LeaseOwner, l.Run.LeaseUntil = "", at
	l.Run.Reason = fmt.Sprintf("%s; asking the target again at %s", why, at.UTC().Format(time.RFC3339))
	l.Run.UpdatedAt = x.runs.Now()
	err := x.runs.Write(ctx, l, func(ctx context.Context, tx storage.Tx) error { return tx.UpdateRun(ctx, l.Run) })
	if errors.Is(err, storage.ErrConflict) {
		return nil // another moved the run on; the caller reloads
	}
	if err != nil {
		return fmt.Errorf("park run %s until %s: %w", l.Run.ID, at.UTC().Format(time.RFC3339), err)
	}
	x.fail("after-park")
	return nil
}

// ParkedUntil says until when an executing run waits for its target (a
// Retry-After, a backoff, an action still in progress), or zero when it
// does not.
func ParkedUntil(r *record.Run, now time.Time) time.Time {
	if at := RetryAt(r); now.Before(at) {
		return at
	}
	return time.Time{}
}

// RetryAt is when a parked run asks its target again (past once it is due),
// or zero for a run nobody parked.
func RetryAt(r *record.Run) time.Time {
	if r.Status == record.StatusExecuting && r.LeaseOwner == "" {
		return r.LeaseUntil
	}
	return time.Time{}
}

// approvers lists who approved the run, each once, in the order they first did.
func approvers(st *record.State) []string {
	var out []string
	for _, d := range st.Decisions {
		// An approval with an edit is recorded on the old request and on the
		// edited one, and an edit asks again those who approved before: each
		// person is named once, where they first approved.
		if d.Verdict == record.VerdictApprove && !slices.Contains(out, d.By) {
			out = append(out, d.By)
		}
	}
	return out
}

// receipt records the proof of an operation. The run is advanced by the next
// round, so that a crash between the two leaves a receipt and nothing to redo.
func (x *Runner) receipt(ctx context.Context, l *runtx.Loaded, op *record.Operation, rc record.Receipt, how record.Event) error {
	body, err := json.Marshal(rc)
	if err != nil {
		return fmt.Errorf("encode receipt of %s: %w", op.Key, err)
	}
	err = x.afterCall(ctx, l, op, func() error { return x.writeReceipt(ctx, l, op, body, rc, how) })
	if refusedWrite(err) {
		// Another worker moved the run on (our lease ran out while we were
		// away; or wrote the operation's row, which only a held intent
		// inserts): our write is refused, and the reload shows what it did.
		x.log.Warn("late write refused: the run moved on without us", "run_id", l.Run.ID, "key", op.Key, "owner", x.owner)
		return nil
	}
	if err != nil {
		return err
	}
	x.log.Info("action executed", "run_id", l.Run.ID, "key", op.Key, "action", op.Action, "receipt", rc.ID, "how", how)
	if l.Run.Status == record.StatusDone {
		x.log.Info("run finished", "run_id", l.Run.ID, "status", string(record.StatusDone), "operations", len(l.State.Actions))
	}
	x.fail("after-receipt")
	return nil
}

// refusedWrite says whether err is the store's refusal of a write on a
// run or operation that moved on.
func refusedWrite(err error) bool {
	return errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrDuplicate)
}

// afterCall runs write, which saves l with what op's call came to, and
// once more, on the run read again, when only the run's audit head moved
// since the intent's commit and nothing else did (a click refused while
// the call was out): such an event never costs the call's outcome, which
// the next round could only learn by asking the target, or not at all.
// write works from l and op as they stand when it runs.
func (x *Runner) afterCall(ctx context.Context, l *runtx.Loaded, op *record.Operation, write func() error) error {
	version, was := l.Run.Version, *op
	err := write()
	if !errors.Is(err, storage.ErrHeadMoved) {
		return err
	}
	again, rerr := x.unmoved(ctx, l.Run.ID, version, &was)
	if rerr != nil {
		return rerr
	}
	if again == nil {
		return err
	}
	*l, *op = *again, was
	return write()
}

// unmoved reads run id again and returns it when it is as the refused
// write found it: at version, executing, with op (as was) still pending
// at the same attempt and row version. Otherwise it returns nil: the run
// did move on.
func (x *Runner) unmoved(ctx context.Context, id string, version int64, was *record.Operation) (*runtx.Loaded, error) {
	l, err := x.runs.View(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read run %s again after the write of its call's outcome was refused: %w", id, err)
	}
	if l.Run.Version != version || l.Run.Status != record.StatusExecuting {
		return nil, nil
	}
	i := slices.IndexFunc(WithIntents(l.More.Operations, id, l.State), func(op *record.Operation) bool {
		return op.Key == was.Key && op.Status == record.OpPending && op.Attempts == was.Attempts &&
			op.Version == was.Version && op.ArgsDigest == was.ArgsDigest
	})
	if i < 0 {
		return nil, nil
	}
	return l, nil
}

// writeReceipt records op's receipt (body, from rc) in l's next
// checkpoint, and ends the run with the last one.
func (x *Runner) writeReceipt(ctx context.Context, l *runtx.Loaded, op *record.Operation, body []byte, rc record.Receipt, how record.Event) error {
	op.Status, op.Receipt, op.Error, op.UpdatedAt = record.OpCommitted, body, "", x.runs.Now()
	SetOpRecord(l.State, op)
	// The last receipt ends the run in the same commit.
	last := AllCommitted(l.State)
	if last {
		l.Run.Status, l.Run.Reason = record.StatusDone, ""
	}
	also := runtx.Also{Operation: op}
	if last {
		also.Then = []runtx.Event{{Actor: "signoff", Action: record.EventFinished, Detail: finishedDetail(l.State)}}
	}
	return x.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
		err := x.runs.SaveWith(ctx, tx, l, record.StatusExecuting, how, "signoff", map[string]string{"key": op.Key, "receipt": rc.ID, "owner": x.owner}, nil, also)
		if err != nil {
			return fmt.Errorf("record receipt of %s: %w", op.Key, err)
		}
		return nil
	})
}

// AllCommitted says whether every action of st has its receipt.
func AllCommitted(st *record.State) bool {
	done := 0
	for _, r := range st.Operations {
		if r.Status == record.OpCommitted {
			done++
		}
	}
	return done == len(st.Actions)
}

func finishedDetail(st *record.State) map[string]int {
	return map[string]int{"operations": len(st.Actions)}
}

// failOp records that an operation did not happen and hands the run to a person.
func (x *Runner) failOp(ctx context.Context, l *runtx.Loaded, op *record.Operation, reason string) error {
	return x.stopOp(ctx, l, op, record.OpFailed, reason)
}

// unprovable records that nobody can tell whether an operation happened. The
// run is never called cancelled or failed: a person must look at the target.
func (x *Runner) unprovable(ctx context.Context, l *runtx.Loaded, op *record.Operation, reason string) error {
	return x.stopOp(ctx, l, op, record.OpUnknown, reason)
}

func (x *Runner) stopOp(ctx context.Context, l *runtx.Loaded, op *record.Operation, status record.OpStatus, reason string) error {
	err := x.afterCall(ctx, l, op, func() error {
		op.Status, op.Error, op.UpdatedAt = status, reason, x.runs.Now()
		SetOpRecord(l.State, op)
		l.Run.Status, l.Run.Reason = record.StatusNeedsAttention, reason
		return x.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
			err := x.runs.SaveWith(ctx, tx, l, record.StatusExecuting, record.EventNeedsAttention, "signoff", map[string]string{"key": op.Key, "operation": string(status), "reason": reason}, nil, runtx.Also{Operation: op})
			if err != nil {
				return fmt.Errorf("record %s of %s: %w", status, op.Key, err)
			}
			return nil
		})
	})
	if refusedWrite(err) {
		return nil
	}
	if err == nil {
		x.log.Warn("run needs attention", "run_id", l.Run.ID, "key", op.Key, "reason", x.hide(l.State.Actions, reason))
	}
	return err
}

// heldIntent marks op's record in st as an intent this checkpoint alone
// holds, made at (see WithIntents).
func heldIntent(st *record.State, op *record.Operation, at time.Time) {
	for i := range st.Operations {
		if st.Operations[i].Key == op.Key {
			st.Operations[i].Intended, st.Operations[i].ArgsDigest = &at, op.ArgsDigest
		}
	}
}

// SetOpRecord records op in st, in place of the record of its key.
func SetOpRecord(st *record.State, op *record.Operation) {
	rec := record.OperationRecord{Key: op.Key, Index: op.Index, Action: op.Action, Status: op.Status, Attempts: op.Attempts, Receipt: op.Receipt, Error: op.Error}
	for i := range st.Operations {
		if st.Operations[i].Key == op.Key {
			st.Operations[i] = rec
			return
		}
	}
	st.Operations = append(st.Operations, rec)
}
