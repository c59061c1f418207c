package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
	"github.com/signoff-dev/signoff/workflow/internal/execute"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// workStatuses are the statuses of the runs a worker executes.
// A scheduled run is claimed once its window opens (its lease_until).
var workStatuses = []record.Status{record.StatusExecuting, record.StatusRunning, record.StatusScheduled}

// Work claims active runs whose lease is free (a crashed process's, or approved
// runs nobody is executing) and resumes them, one claim at a time so that a
// lease is never left ticking while the runs claimed before it are worked on.
// When none is free, it takes over the runs whose lease another owner holds
// that OwnerGone says is gone (a restarted server's own runs), and logs the
// others once. It stops after limit runs or when none is left, and returns
// how many it claimed. Servers call it in a loop; several replicas may share
// one store.
func (e *Engine) Work(ctx context.Context, limit int) (int, error) {
	var errs []error
	n := 0
	for ; n < limit; n++ {
		var runs []*record.Run
		err := e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
			now := e.now()
			var err error
			runs, err = tx.ClaimRuns(ctx, e.owner, workStatuses, now, now.Add(e.ttl), 1)
			return err
		})
		if err != nil {
			return n, errors.Join(append(errs, fmt.Errorf("claim runs: %w", err))...)
		}
		if len(runs) == 0 {
			break
		}
		if _, err := e.resume(ctx, runs[0].ID, asWorker); err != nil && !errors.Is(err, storage.ErrConflict) {
			errs = append(errs, err)
		}
	}
	if n == limit {
		return n, errors.Join(errs...) // more may be free: the next round looks
	}
	gone, err := e.goneOwners(ctx, limit-n)
	if err != nil {
		return n, errors.Join(append(errs, err)...)
	}
	for _, r := range gone {
		ok, err := e.takeOver(ctx, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue // another moved the run on first
		}
		n++
		if _, err := e.resume(ctx, r.ID, asWorker); err != nil && !errors.Is(err, storage.ErrConflict) {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// goneOwners lists up to limit active runs whose valid lease another owner
// holds that OwnerGone says is gone, and logs each run held by an owner
// that is not, once for as long as that owner holds it.
func (e *Engine) goneOwners(ctx context.Context, limit int) ([]*record.Run, error) {
	var rs []*record.Run
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		rs, err = tx.ListRuns(ctx, storage.RunFilter{Statuses: workStatuses})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list held runs: %w", err)
	}
	now := e.now()
	held := map[string]string{}
	var gone []*record.Run
	e.heldMu.Lock()
	defer e.heldMu.Unlock()
	for _, r := range rs {
		// A parked run (no owner) is claimed when its wait is over.
		if r.LeaseOwner == "" || r.LeaseOwner == e.owner || !now.Before(r.LeaseUntil) {
			continue
		}
		if len(gone) < limit && e.ownerGone(r.LeaseOwner) {
			gone = append(gone, r)
			continue
		}
		held[r.ID] = r.LeaseOwner
		if e.held[r.ID] != r.LeaseOwner {
			e.log.Info("run held by another owner", "run_id", r.ID, "owner", r.LeaseOwner, "until", r.LeaseUntil)
		}
	}
	e.held = held
	return gone, nil
}

// takeOver leases r to this engine as a claim would, unless the run moved
// on since it was listed: the compare-and-set on its version makes sure its
// lease is still the gone owner's, so that two workers that both find the
// owner gone never both take the run. ok says whether this one did.
func (e *Engine) takeOver(ctx context.Context, r *record.Run) (ok bool, err error) {
	gone := r.LeaseOwner
	now := e.now()
	r.LeaseOwner, r.LeaseUntil, r.Fence = e.owner, now.Add(e.ttl), r.Fence+1
	err = e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return tx.UpdateRun(ctx, r) })
	if errors.Is(err, storage.ErrConflict) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("take over run %s from %s: %w", r.ID, gone, err)
	}
	e.log.Info("run taken over from an owner that is gone", "run_id", r.ID, "owner", gone)
	return true, nil
}

// Start starts an agent workflow on a task. Its steps run until it proposes.
func (e *Engine) Start(ctx context.Context, workflow, taskID string, requester record.Person) (*record.Run, error) {
	if _, ok := e.agents[workflow]; !ok {
		return nil, refused(record.CodeInvalidInput, "", "unknown workflow %q", workflow)
	}
	if requester.ID == "" {
		return nil, refused(record.CodeInvalidInput, "", "a requester id is required")
	}
	if bad := checkLines([]lineField{{"requester id", requester.ID, true}, {"requester name", requester.Name, false}, {"task id", taskID, true}}); bad != nil {
		return nil, bad
	}
	if err := e.checkRequester(ctx, requester.ID); err != nil {
		return nil, err
	}
	id := e.runs.NewID("run_")
	l := &runtx.Loaded{
		Run:   &record.Run{ID: id, Workflow: workflow, TaskID: taskID, Status: record.StatusRunning, RequesterID: requester.ID},
		State: &record.State{SchemaVersion: record.SchemaVersion, RunID: id, Workflow: workflow, TaskID: taskID, Requester: requester},
	}
	err := e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		return e.runs.Save(ctx, tx, l, "", record.EventStarted, requester.ID, map[string]string{"workflow": workflow, "task_id": taskID}, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("start run: %w", err)
	}
	return e.Resume(ctx, id)
}

// Resume continues whatever the run was doing: the next steps, the proposal, an
// expiry that is due, or the execution of approved actions (reconciling any
// operation whose outcome a crash left unknown). It returns the run as it stands.
func (e *Engine) Resume(ctx context.Context, id string) (*record.Run, error) {
	return e.resume(ctx, id, asOperator)
}

// Follow is Resume for the one who just moved the run on (a decision that
// completed the quorum): it executes the run unless a worker took it first.
// While another holds the run's lease it calls nothing, so that the two never
// attempt the same operation at once; it looks again every lookEvery and
// carries on when the run ends, stops executing, or the lease lapses (its
// holder died). Resume, by contrast, is an operator's "do it now".
func (e *Engine) Follow(ctx context.Context, id string) (*record.Run, error) {
	return e.resume(ctx, id, asFollower)
}

// lookEvery is how often Follow reads a run that another holds.
const lookEvery = 20 * time.Millisecond

// resumeMode is who resumes a run, which decides what it does while another
// executes it.
type resumeMode int

const (
	// asOperator: a person's "do it now" (Resume). It takes over a run whose
	// lease another process holds, which may have died.
	asOperator resumeMode = iota
	// asFollower: whoever just moved the run on (Follow). It waits while
	// another executes the run, then carries on.
	asFollower
	// asWorker: a worker, or a retried submit. It leaves a run another
	// executes to that one and returns it as it stands.
	asWorker
)

// resume drives a run on as far as it goes without a person: through its
// steps, its proposal, an expired deadline, its operations, and (for an
// operator) a recheck of an unproven outcome. It returns the run as it
// stands when nothing more can be done now.
func (e *Engine) resume(ctx context.Context, id string, mode resumeMode) (*record.Run, error) {
	r := &resumption{e: e, id: id, mode: mode, held: e.runs.Resumable(id)}
	for {
		run, again, err := r.next(ctx)
		if err != nil || !again {
			return run, err
		}
	}
}

// resumption is one call of resume: the run it drives, who drives it, the
// run as last read (held, see runtx.Runs.LoadHeld) and whether the target
// was asked again (once per resume).
type resumption struct {
	e     *Engine
	id    string
	mode  resumeMode
	held  *runtx.Loaded
	asked bool
}

// next reads the run and takes the step its status calls for; again says
// whether there may be more to do.
func (r *resumption) next(ctx context.Context) (_ *record.Run, again bool, err error) {
	e := r.e
	l, err := e.runs.Reload(ctx, r.id, r.held)
	if err != nil {
		if record.IsRefused(err) {
			return nil, false, err
		}
		var ie *IntegrityError
		if errors.As(err, &ie) {
			run, err := e.runs.GetRun(ctx, r.id)
			return run, false, err
		}
		return nil, false, err
	}
	r.held = l
	switch l.Run.Status {
	case record.StatusRunning:
		return r.running(ctx, l)
	case record.StatusWaitingApproval:
		if !l.Run.Deadline.IsZero() && !e.now().Before(l.Run.Deadline) {
			if err := e.decisions.expire(ctx, r.id, "signoff"); err != nil && !errors.Is(err, storage.ErrConflict) {
				return nil, false, err
			}
			return nil, true, nil
		}
		return l.Run, false, nil
	case record.StatusExecuting:
		return r.executing(ctx, l)
	case record.StatusScheduled:
		moved, err := e.windows.release(ctx, l)
		if err != nil || moved {
			return nil, err == nil, err
		}
		return l.Run, false, nil
	case record.StatusNeedsAttention:
		return r.needsAttention(ctx, l)
	}
	return l.Run, false, nil
}

// running takes a running run's next step, or gates its proposal.
func (r *resumption) running(ctx context.Context, l *runtx.Loaded) (*record.Run, bool, error) {
	if l.State.Proposed {
		if err := r.e.gates.propose(ctx, l, record.StatusRunning, "signoff"); err != nil {
			return nil, false, err
		}
		return nil, true, nil
	}
	if err := r.e.step(ctx, l); err != nil {
		return nil, false, err
	}
	return nil, true, nil
}

// executing runs an executing run's operations, unless another may be
// executing it: a process holding its lease (a worker whose own lapsed
// while it waited out a backoff finds it here after another claimed the
// run), which only an operator overrides, or another goroutine of this
// engine (they share one lease owner), which nobody does.
func (r *resumption) executing(ctx context.Context, l *runtx.Loaded) (*record.Run, bool, error) {
	e := r.e
	now, wait := e.now(), lookEvery
	if at := ParkedUntil(l.Run, now); !at.IsZero() {
		// The run waits for its target, and no worker holds it
		// meanwhile. Only an operator's own command waits here; a
		// worker, a follower or a submit leaves it to the worker
		// that claims it when it is due.
		if r.mode != asOperator {
			return l.Run, false, nil
		}
		if err := e.clock.Sleep(ctx, at.Sub(now)); err != nil {
			return nil, false, err
		}
		return nil, true, nil
	}
	lease := l.Run.LeaseOwner != "" && l.Run.LeaseOwner != e.owner && now.Before(l.Run.LeaseUntil)
	if !lease || r.mode == asOperator {
		// The window is checked before any intent is written.
		if held, err := e.windows.hold(ctx, l); err != nil || held {
			return nil, err == nil, err
		}
		ran, err := e.executeAlone(ctx, l)
		if err != nil {
			return nil, false, err
		}
		if ran && l.Committed() && l.Run.Status.Terminal() {
			// The write that ended the run committed, so l is the
			// run as stored and nothing is left to run: reading it
			// back would only say so again.
			return l.Run, false, nil
		}
		if ran {
			return nil, true, nil
		}
	} else {
		wait = min(wait, l.Run.LeaseUntil.Sub(now))
	}
	if r.mode != asFollower {
		return l.Run, false, nil // left to whoever executes it
	}
	if err := e.clock.Sleep(ctx, wait); err != nil {
		return nil, false, err
	}
	return nil, true, nil
}

// needsAttention: an operator's resume asks the target again about an
// outcome that could not be proven (once): it may know by now.
func (r *resumption) needsAttention(ctx context.Context, l *runtx.Loaded) (*record.Run, bool, error) {
	if r.mode != asOperator || r.asked {
		return l.Run, false, nil
	}
	r.asked = true
	moved, err := r.e.recheck(ctx, l)
	if err != nil {
		return nil, false, err
	}
	return l.Run, moved, nil
}

// recheck asks the target once more whether the operation whose outcome
// could not be proven happened, for a run that needs attention for that
// reason alone. If the target now says, the run carries on: with the
// receipt, or, when it did not happen, executing to send it again under
// its key. If it still cannot say, nothing changes. moved says whether the
// run did.
func (e *Engine) recheck(ctx context.Context, l *runtx.Loaded) (moved bool, err error) {
	id := l.Run.ID
	if l.State.Status != record.StatusNeedsAttention {
		return false, nil // stopped without a checkpoint: not over an outcome
	}
	ops, err := e.exec.Operations(ctx, id)
	var ie *IntegrityError
	if errors.As(err, &ie) {
		return false, e.runs.Attention(ctx, id, ie.Error()+"; nothing was asked")
	}
	if err != nil {
		return false, fmt.Errorf("load operations of run %s: %w", id, err)
	}
	op := inQuestion(execute.WithIntents(ops, id, l.State))
	if op == nil || op.Status != record.OpUnknown {
		return false, nil
	}
	spec, ok := e.actions[op.Action]
	if !ok {
		return false, nil
	}
	rc, found, err := e.exec.Lookup(ctx, spec.Executor, op.Key)
	if err != nil {
		e.log.Info("the outcome still cannot be proven", "run_id", id, "key", op.Key, "error", err)
		return false, nil
	}
	detail := map[string]string{"key": op.Key, "owner": e.owner}
	op.UpdatedAt = e.now()
	l.Run.Status, l.Run.Reason = record.StatusExecuting, ""
	if found {
		body, err := json.Marshal(rc)
		if err != nil {
			return false, fmt.Errorf("encode receipt of %s: %w", op.Key, err)
		}
		op.Status, op.Receipt, op.Error = record.OpCommitted, body, ""
		detail["receipt"] = rc.ID
	} else {
		// Proven not to have happened: pending again, its failed attempt
		// still counted, so the next round sends it under the same key.
		op.Status = record.OpPending
		detail["outcome"] = "did not happen"
	}
	execute.SetOpRecord(l.State, op)
	if execute.AllCommitted(l.State) {
		l.Run.Status = record.StatusDone
	}
	err = e.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
		if err := execute.WriteOperation(ctx, tx, op); err != nil {
			return fmt.Errorf("record what the target now says of %s: %w", op.Key, err)
		}
		return e.runs.Save(ctx, tx, l, record.StatusNeedsAttention, record.EventReconciled, "signoff", detail, nil)
	})
	if errors.Is(err, storage.ErrConflict) {
		return true, nil // another moved it on; the caller reloads
	}
	if err != nil {
		return false, err
	}
	e.log.Info("the target now says what became of the operation", "run_id", id, "key", op.Key, "happened", found)
	e.fail("after-recheck")
	return true, nil
}

// step runs one agent step and checkpoints it.
func (e *Engine) step(ctx context.Context, l *runtx.Loaded) error {
	agent, ok := e.agents[l.Run.Workflow]
	if !ok {
		return e.runs.Attention(ctx, l.Run.ID, fmt.Sprintf("unknown workflow %q: this build cannot continue it", l.Run.Workflow))
	}
	before, err := chain.Encode(l.State)
	if err != nil {
		return err
	}
	done, err := agent.Step(ctx, l.State)
	if err != nil {
		// A failed step leaves nothing behind: whatever it wrote into the state is
		// dropped, so that a retry starts from the same checkpoint.
		st, derr := chain.Decode(before)
		if derr != nil {
			return fmt.Errorf("restore state of run %s: %w", l.Run.ID, derr)
		}
		l.State = st
	}
	if err != nil && isCtxErr(err) {
		return fmt.Errorf("run %s step %d: %w", l.Run.ID, l.Run.Step+1, err) // stopping, not failing
	}
	if err != nil && Classify(err) != ClassPermanent {
		// A step has no side effects, so a later resume runs it again; the count
		// of failures in a row is kept so that a step that never succeeds ends up
		// with a person instead of being retried for ever.
		l.State.StepFailures++
		failures := l.State.StepFailures
		if failures < maxStepFailures {
			serr := e.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
				return e.runs.Save(ctx, tx, l, record.StatusRunning, record.EventStepFailed, "signoff", map[string]any{"step": l.Run.Step + 1, "failures": failures, "error": err.Error()}, nil)
			})
			return errors.Join(fmt.Errorf("run %s step %d: %w", l.Run.ID, l.Run.Step+1, err), serr)
		}
		l.Run.Status, l.Run.Reason = record.StatusNeedsAttention, fmt.Sprintf("step %d failed %d times in a row: %v", l.Run.Step+1, failures, err)
		return e.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
			return e.runs.Save(ctx, tx, l, record.StatusRunning, record.EventNeedsAttention, "signoff", map[string]string{"reason": l.Run.Reason}, nil)
		})
	}
	if err != nil {
		l.Run.Status, l.Run.Reason = record.StatusFailed, fmt.Sprintf("step %d failed: %v", l.Run.Step+1, err)
		return e.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
			return e.runs.Save(ctx, tx, l, record.StatusRunning, record.EventFailed, "signoff", map[string]string{"reason": l.Run.Reason}, nil)
		})
	}
	l.State.StepFailures = 0
	l.Run.Step++
	l.State.Proposed = done
	err = e.runs.WriteCheckpoint(ctx, l, func(ctx context.Context, tx storage.Tx) error {
		return e.runs.Save(ctx, tx, l, record.StatusRunning, record.EventStep, "signoff", map[string]any{"step": l.Run.Step, "model_calls": l.State.ModelCalls}, nil)
	})
	if err != nil {
		return fmt.Errorf("checkpoint step %d of run %s: %w", l.Run.Step, l.Run.ID, err)
	}
	e.fail(fmt.Sprintf("after-step-%d", l.Run.Step))
	return nil
}

// maxStepFailures is how many times in a row a step may fail (without saying
// it is permanent) before the run is handed to a person.
const maxStepFailures = 5

// executeAlone is executeNext, unless another goroutine of this engine is
// executing the same run: goroutines of one process share one lease owner,
// so the lease cannot keep two of them from calling at once. ran says
// whether it executed.
func (e *Engine) executeAlone(ctx context.Context, l *runtx.Loaded) (ran bool, err error) {
	if _, busy := e.executing.LoadOrStore(l.Run.ID, struct{}{}); busy {
		return false, nil
	}
	defer e.executing.Delete(l.Run.ID)
	return true, e.exec.ExecuteNext(ctx, l)
}
