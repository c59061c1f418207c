package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

func (e *Engine) audit(ctx context.Context, tx Tx, runID, actor string, action Event, detail any) error {
	return e.appendAudit(ctx, tx, &AuditEvent{RunID: runID, Actor: actor, Action: action}, detail)
}

// auditCheckpoint audits the transition that wrote checkpoint cp, naming it.
func (e *Engine) auditCheckpoint(ctx context.Context, tx Tx, cp *Checkpoint, actor string, action Event, detail any) error {
	return e.appendAudit(ctx, tx, &AuditEvent{RunID: cp.RunID, Actor: actor, Action: action, CheckpointSeq: cp.Seq, CheckpointHash: cp.Hash}, detail)
}

func (e *Engine) appendAudit(ctx context.Context, tx Tx, ev *AuditEvent, detail any) error {
	runID, action := ev.RunID, ev.Action
	if detail != nil {
		d, err := json.Marshal(detail)
		if err != nil {
			return fmt.Errorf("audit %s of run %s: %w", action, runID, err)
		}
		ev.Detail = d
	}
	ev.At = e.now()
	if err := tx.AppendAudit(ctx, ev, nil); err != nil {
		return fmt.Errorf("audit %s of run %s: %w", action, runID, err)
	}
	return nil
}

// refuse records a refusal in the audit log (and nothing else) and returns it.
func (e *Engine) refuse(ctx context.Context, actor string, r *RefusedError) error {
	err := e.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		return e.audit(ctx, tx, r.RunID, actor, EventRefused, map[string]string{"code": r.Code, "reason": r.Msg})
	})
	if err != nil {
		return errors.Join(r, fmt.Errorf("record refusal: %w", err))
	}
	return r
}

// attention puts a run in needs_attention with a reason, without a checkpoint when
// its state cannot be trusted. A terminal run is left as it is.
func (e *Engine) attention(ctx context.Context, id, reason string) error {
	err := e.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		run, err := tx.Run(ctx, id)
		if err != nil {
			return fmt.Errorf("load run %s: %w", id, err)
		}
		if run.Status.Terminal() || (run.Status == StatusNeedsAttention && run.Reason == reason) {
			return nil
		}
		from := run.Status
		run.Status, run.Reason = StatusNeedsAttention, reason
		return e.writeRow(ctx, tx, run, from, EventNeedsAttention, "signoff", map[string]string{"from": string(from), "reason": reason})
	})
	if err != nil {
		return fmt.Errorf("put run %s in needs_attention: %w", id, err)
	}
	e.log.Warn("run needs attention", "run_id", id, "reason", reason)
	return nil
}

// writeRow writes a transition of run's row alone, with its audit event,
// for a run whose state may be unreadable: no checkpoint, and hooks get the
// row only.
func (e *Engine) writeRow(ctx context.Context, tx Tx, run *Run, from Status, event Event, actor string, detail any) error {
	run.UpdatedAt = e.now()
	if err := tx.UpdateRun(ctx, run); err != nil {
		return fmt.Errorf("update run %s: %w", run.ID, err)
	}
	if err := e.audit(ctx, tx, run.ID, actor, event, detail); err != nil {
		return err
	}
	return e.tell(ctx, tx, &Transition{Run: run, From: from, Event: event})
}
