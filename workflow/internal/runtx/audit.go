package runtx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

func (rs *Runs) audit(ctx context.Context, tx storage.Tx, runID, actor string, action record.Event, detail any) error {
	return rs.appendAudit(ctx, tx, &record.AuditEvent{RunID: runID, Actor: actor, Action: action}, detail)
}

// Audit audits an event without a checkpoint: runID "" for one about no
// run (a delegation).
func (rs *Runs) Audit(ctx context.Context, tx storage.Tx, runID, actor string, action record.Event, detail any) error {
	return rs.audit(ctx, tx, runID, actor, action, detail)
}

// CheckpointEvents are the audit events of the transition that writes cp
// (storage.RunWrite.Events): first its own, then those of then, each
// naming cp.
func (rs *Runs) CheckpointEvents(cp *record.Checkpoint, first Event, then ...Event) ([]*record.AuditEvent, error) {
	evs := make([]*record.AuditEvent, 0, 1+len(then))
	for _, e := range append([]Event{first}, then...) {
		ev := &record.AuditEvent{RunID: cp.RunID, Actor: e.Actor, Action: e.Action, CheckpointSeq: cp.Seq, CheckpointHash: cp.Hash}
		if err := rs.eventDetail(ev, e.Detail); err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// eventDetail encodes detail (nil: none) into ev and dates it now.
func (rs *Runs) eventDetail(ev *record.AuditEvent, detail any) error {
	if detail != nil {
		d, err := json.Marshal(detail)
		if err != nil {
			return fmt.Errorf("audit %s of run %s: %w", ev.Action, ev.RunID, err)
		}
		ev.Detail = d
	}
	ev.At = rs.Now()
	return nil
}

func (rs *Runs) appendAudit(ctx context.Context, tx storage.Tx, ev *record.AuditEvent, detail any) error {
	if err := rs.eventDetail(ev, detail); err != nil {
		return err
	}
	if err := tx.AppendAudit(ctx, ev, nil); err != nil {
		return fmt.Errorf("audit %s of run %s: %w", ev.Action, ev.RunID, err)
	}
	return nil
}

// Refuse records a refusal in the audit log (and nothing else) and returns it.
func (rs *Runs) Refuse(ctx context.Context, actor string, r *record.RefusedError) error {
	return rs.RefuseWith(ctx, actor, r, nil)
}

// RefuseWith is Refuse with first (when not nil) written in the same
// transaction, before the audit: the claim of the request that asked. An
// error of first rolls the refusal back and is joined to r.
func (rs *Runs) RefuseWith(ctx context.Context, actor string, r *record.RefusedError, first func(context.Context, storage.Tx) error) error {
	err := rs.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		if first != nil {
			if err := first(ctx, tx); err != nil {
				return err
			}
		}
		return rs.audit(ctx, tx, r.RunID, actor, record.EventRefused, map[string]string{"code": r.Code, "reason": r.Msg})
	})
	if err != nil {
		return errors.Join(r, fmt.Errorf("record refusal: %w", err))
	}
	return r
}

// Attention puts a run in needs_attention with a reason, without a checkpoint when
// its state cannot be trusted. A terminal run is left as it is.
func (rs *Runs) Attention(ctx context.Context, id, reason string) error {
	err := rs.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		run, err := tx.Run(ctx, id)
		if err != nil {
			return fmt.Errorf("load run %s: %w", id, err)
		}
		if run.Status.Terminal() || (run.Status == record.StatusNeedsAttention && run.Reason == reason) {
			return nil
		}
		from := run.Status
		run.Status, run.Reason = record.StatusNeedsAttention, reason
		return rs.WriteRow(ctx, tx, run, from, record.EventNeedsAttention, "signoff", map[string]string{"from": string(from), "reason": reason})
	})
	if err != nil {
		return fmt.Errorf("put run %s in needs_attention: %w", id, err)
	}
	rs.log.Warn("run needs attention", "run_id", id, "reason", reason)
	return nil
}

// WriteRow writes a transition of run's row alone, with its audit event,
// for a run whose state may be unreadable: no checkpoint, and hooks get the
// row only.
func (rs *Runs) WriteRow(ctx context.Context, tx storage.Tx, run *record.Run, from record.Status, event record.Event, actor string, detail any) error {
	run.UpdatedAt = rs.Now()
	if err := tx.UpdateRun(ctx, run); err != nil {
		return fmt.Errorf("update run %s: %w", run.ID, err)
	}
	if err := rs.audit(ctx, tx, run.ID, actor, event, detail); err != nil {
		return err
	}
	return rs.notify(ctx, tx, Change{Run: run, From: from, Event: event})
}
