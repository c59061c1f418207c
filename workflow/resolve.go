package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/execute"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// resolver carries out what a person found out about a run that needs
// attention: the receipt they give, a retry under the same key, or the run
// abandoned. Who may resolve is its rule too.
type resolver struct {
	runs        *runtx.Runs
	roles       *policy.Roles
	resolveRole string
	// windows says whether a run a resolution sends back to execution
	// before its first action may run now or waits for its window.
	windows *scheduler
}

// ResolveInput is a person's resolution of a run that needs attention.
type ResolveInput struct {
	RunID  string
	By     record.Person
	Choice record.Resolution
	// Receipt, with ResolveHappened only, is what the target did as the
	// person found it (a JSON object; optional).
	Receipt json.RawMessage
	Reason  string // required: what the person checked
	Via     string // cli, slack, api
}

// maxResolveReceipt bounds a receipt a person gives, as a target's is.
const maxResolveReceipt = 64 << 10

// Resolve ends a run's stay in needs_attention as a person decides, so that
// no run is stuck there: the effect happened (the run carries on, or is
// done), it did not and is tried again under the same key, or it did not
// and the run is abandoned as failed. Only someone holding the resolve role
// (Config.ResolveRole; default the highest) may. It is a decision like any
// other: compare-and-set, checkpointed, sealed and audited (EventResolved).
// A run whose stored records are damaged can only be abandoned, and its
// damage stays for Verify to report. Nothing that may have run is ever
// called cancelled.
func (e *Engine) Resolve(ctx context.Context, in ResolveInput) (*record.Run, error) {
	receipt, err := checkResolveInput(&in)
	var r *record.RefusedError
	if errors.As(err, &r) {
		return nil, e.runs.Refuse(ctx, in.By.ID, r)
	}
	if err != nil {
		return nil, err
	}
	role, ok, err := e.dir.RoleOf(ctx, in.By.ID)
	if err != nil {
		return nil, fmt.Errorf("resolve role of %s: %w", in.By.ID, err)
	}
	if need := e.resolutions.resolverRole(); !ok || !e.roles.AtLeast(role, need) {
		return nil, e.runs.Refuse(ctx, in.By.ID, refused(record.CodeNoRole, in.RunID, "only someone with role %s or above may resolve a run that needs attention", need))
	}
	var run *record.Run
	err = e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		l, err := e.runs.LoadWith(ctx, tx, in.RunID, storage.RunParts{Operations: true, Requests: true, Decisions: true})
		if err == nil {
			// What a resolution marks done or sends again must be as sealed.
			err = e.in.CheckRun(ctx, tx, in.RunID, nil, l.More.Requests, l.More.Decisions, l.More.Operations)
		}
		var ie *IntegrityError
		if errors.As(err, &ie) {
			run, err = e.resolutions.abandonDamaged(ctx, tx, in, ie)
			return err
		}
		if err != nil {
			return err
		}
		if l.Run.Status != record.StatusNeedsAttention {
			return refused(record.CodeNothingToResolve, in.RunID, "the run is %s; only a run that needs attention can be resolved", l.Run.Status)
		}
		op := inQuestion(execute.WithIntents(l.More.Operations, l.Run.ID, l.State))
		detail, err := e.resolutions.applyResolution(l, op, in, receipt)
		if err != nil {
			return err
		}
		if op != nil {
			if err := execute.WriteOperation(ctx, tx, op); err != nil {
				return fmt.Errorf("record the resolution of %s: %w", op.Key, err)
			}
		}
		var sched *scheduling
		if l.Run.Status == record.StatusExecuting {
			sched = e.resolutions.windows.approve(l)
		}
		if err := e.runs.SaveWith(ctx, tx, l, record.StatusNeedsAttention, record.EventResolved, in.By.ID, detail, nil, runtx.Also{Then: sched.then()}); err != nil {
			return err
		}
		run = l.Run
		return nil
	})
	if err != nil {
		return nil, e.decisions.outcome(ctx, in.RunID, in.By.ID, err)
	}
	e.log.Info("run resolved", "run_id", run.ID, "by", in.By.ID, "choice", string(in.Choice), "status", string(run.Status))
	e.fail("after-resolve")
	return run, nil
}

// checkResolveInput refuses input Resolve cannot take, and returns the
// receipt to record for ResolveHappened.
func checkResolveInput(in *ResolveInput) ([]byte, error) {
	id := in.RunID
	if in.By.ID == "" || in.Reason == "" {
		return nil, refused(record.CodeInvalidInput, id, "resolve needs who resolves and a reason (what you checked at the target)")
	}
	if field := badText(map[string]string{"run id": id, "who": in.By.ID, "reason": in.Reason}); field != "" {
		return nil, refused(record.CodeInvalidInput, id, "the %s must be valid UTF-8 text without NUL characters", field)
	}
	if !slices.Contains(record.Resolutions, in.Choice) {
		return nil, refused(record.CodeInvalidInput, id, "unknown resolution %q: the effect happened, or it did not and is retried or abandoned", in.Choice)
	}
	if len(in.Receipt) > 0 && in.Choice != record.ResolveHappened {
		return nil, refused(record.CodeInvalidInput, id, "a receipt says what happened: it goes only with the effect having happened")
	}
	if in.Choice != record.ResolveHappened {
		return nil, nil
	}
	rc := record.Receipt{ID: "resolved by " + in.By.ID}
	given := json.RawMessage("null")
	if len(in.Receipt) > 0 {
		if len(in.Receipt) > maxResolveReceipt {
			return nil, refused(record.CodeInvalidInput, id, "the receipt is %d bytes; at most %d", len(in.Receipt), maxResolveReceipt)
		}
		var obj map[string]json.RawMessage
		if err := DecodeStrict(in.Receipt, &obj); err != nil || obj == nil {
			return nil, refused(record.CodeInvalidInput, id, `the receipt must be a JSON object, like {"id": "D-123"}`)
		}
		var rid string
		if json.Unmarshal(obj["id"], &rid) == nil && rid != "" {
			rc.ID = rid
		}
		// Kept as written (compacted), numbers exactly as given.
		var b bytes.Buffer
		if err := json.Compact(&b, in.Receipt); err != nil {
			return nil, refused(record.CodeInvalidInput, id, "the receipt: %v", err)
		}
		given = b.Bytes()
	}
	// The receipt says it was given by a person, and what they gave.
	detail, err := json.Marshal(map[string]any{"resolved_by": in.By.ID, "given": given})
	if err != nil {
		return nil, fmt.Errorf("encode the receipt: %w", err)
	}
	rc.Detail = detail
	return json.Marshal(rc)
}

// resolverRole is who may resolve: the configured role, else the highest.
func (rv *resolver) resolverRole() string {
	if rv.resolveRole != "" {
		return rv.resolveRole
	}
	names := rv.roles.Names()
	return names[len(names)-1]
}

// inQuestion is the first operation, in action order, without its receipt:
// the one whose outcome a person is resolving. Nil when none is.
func inQuestion(ops []*record.Operation) *record.Operation {
	var out *record.Operation
	for _, op := range ops {
		if op.Status != record.OpCommitted && (out == nil || op.Index < out.Index) {
			out = op
		}
	}
	return out
}

// applyResolution changes l and op as in.Choice says and returns the audit
// detail.
func (rv *resolver) applyResolution(l *runtx.Loaded, op *record.Operation, in ResolveInput, receipt []byte) (map[string]string, error) {
	detail := map[string]string{"choice": string(in.Choice), "reason": in.Reason, "via": in.Via}
	by := in.By.ID
	now := rv.runs.Now()
	rec := record.ResolutionRecord{By: by, Choice: in.Choice, Reason: in.Reason, Via: in.Via, At: now}
	if op != nil {
		detail["key"], rec.Key = op.Key, op.Key
		op.UpdatedAt = now
	}
	l.State.Resolutions = append(l.State.Resolutions, rec)
	switch in.Choice {
	case record.ResolveHappened:
		if op == nil {
			return nil, refused(record.CodeInvalidInput, in.RunID, "no action's outcome is in question (%s): it did not get as far as a call, so only --did-not-happen applies", l.Run.Reason)
		}
		op.Status, op.Receipt, op.Error = record.OpCommitted, receipt, ""
		execute.SetOpRecord(l.State, op)
		l.Run.Status, l.Run.Reason = record.StatusExecuting, ""
		if execute.AllCommitted(l.State) {
			l.Run.Status = record.StatusDone
		}
	case record.ResolveRetry:
		l.Run.Status, l.Run.Reason = rv.retryStatus(l, op), ""
		if op != nil {
			// A person proved it did not happen: it is sent again at
			// once, under its own key, with a fresh budget of attempts.
			op.Status, op.Attempts, op.Error = record.OpPending, 0, ""
			execute.SetOpRecord(l.State, op)
		}
		l.State.StepFailures = 0
	case record.ResolveAbandon:
		if op != nil {
			op.Status, op.Error = record.OpFailed, fmt.Sprintf("did not happen, as %s found: %s", by, in.Reason)
			execute.SetOpRecord(l.State, op)
		}
		l.Run.Status, l.Run.Reason = record.StatusFailed, fmt.Sprintf("abandoned by %s: %s", by, in.Reason)
	}
	return detail, nil
}

// retryStatus is where a run resolved for a retry carries on: executing when
// an action is in question, else where it stood when it was handed to a
// person (a run stopped without a checkpoint of its own keeps its state's
// status), else its steps.
func (rv *resolver) retryStatus(l *runtx.Loaded, op *record.Operation) record.Status {
	switch {
	case op != nil:
		return record.StatusExecuting
	case l.State.Status != record.StatusNeedsAttention && l.State.Status != "":
		return l.State.Status
	}
	return record.StatusRunning
}

// abandonDamaged abandons a run whose stored records failed their check.
// Nothing of its state can be trusted, so no checkpoint is written: the row
// ends as failed with an audit event, and the damage stays for Verify.
func (rv *resolver) abandonDamaged(ctx context.Context, tx storage.Tx, in ResolveInput, ie *IntegrityError) (*record.Run, error) {
	if in.Choice != record.ResolveAbandon {
		return nil, refused(record.CodeIntegrity, in.RunID, "the run's stored records are damaged (%s): only abandoning it (--did-not-happen --abandon) can resolve it, and the damage stays for verify to show", ie.Problem)
	}
	run, err := tx.Run(ctx, in.RunID)
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", in.RunID, err)
	}
	if run.Status.Terminal() {
		return nil, refused(record.CodeNothingToResolve, in.RunID, "the run is %s; only a run that needs attention can be resolved", run.Status)
	}
	from := run.Status
	run.Status, run.Reason = record.StatusFailed, fmt.Sprintf("abandoned by %s: %s (its stored records are damaged: %s)", in.By.ID, in.Reason, ie.Problem)
	run.LeaseOwner, run.LeaseUntil = "", time.Time{}
	detail := map[string]string{"choice": string(in.Choice), "reason": in.Reason, "via": in.Via, "damage": ie.Problem}
	if err := rv.runs.WriteRow(ctx, tx, run, from, record.EventResolved, in.By.ID, detail); err != nil {
		return nil, err
	}
	return run, nil
}
