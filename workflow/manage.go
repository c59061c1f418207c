package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// Reassign asks one person to decide a waiting run. The assignee must hold the
// role the rule needs; who reassigns must hold it too (or be the requester).
func (e *Engine) Reassign(ctx context.Context, id string, by, to record.Person) (*record.Run, error) {
	if by.ID == "" || to.ID == "" {
		return nil, e.runs.Refuse(ctx, by.ID, refused(record.CodeInvalidInput, id, "reassign needs who reassigns and to whom"))
	}
	byRole, byOK, err := e.dir.RoleOf(ctx, by.ID)
	if err != nil {
		return nil, fmt.Errorf("resolve role of %s: %w", by.ID, err)
	}
	toRole, toOK, err := e.dir.RoleOf(ctx, to.ID)
	if err != nil {
		return nil, fmt.Errorf("resolve role of %s: %w", to.ID, err)
	}
	return e.manage(ctx, id, by.ID, record.EventReassigned, func(l *runtx.Loaded, req *record.ApprovalRequest) (any, error) {
		if !(by.ID == l.State.Requester.ID || (byOK && e.roles.AtLeast(byRole, req.Role))) {
			return nil, refused(record.CodeNoRole, id, "only the requester or someone with role %s or above may reassign", req.Role)
		}
		if !toOK || !e.roles.AtLeast(toRole, req.Role) {
			return nil, refused(record.CodeNoRole, id, "%s cannot approve this: it needs %s or above", to.ID, req.Role)
		}
		if to.ID == req.RequesterID && !req.SelfApproval {
			return nil, refused(record.CodeSelfApproval, id, "%s asked for this action and rule %s forbids approving one's own request", to.ID, req.Rule)
		}
		l.State.Gate.Assignee = to.ID
		return map[string]string{"to": to.ID}, nil
	})
}

// Extend moves a waiting run's deadline by d. Who extends must hold the role the
// rule needs and, where the rule forbids self-approval, must not be the
// requester (keeping a request alive is a say over it). No request lives
// longer than MaxRequestLifetime from when it was made.
func (e *Engine) Extend(ctx context.Context, id string, by record.Person, d time.Duration) (*record.Run, error) {
	if by.ID == "" || d <= 0 || d > e.maxLife {
		return nil, e.runs.Refuse(ctx, by.ID, refused(record.CodeInvalidInput, id, "extend needs who extends and a duration between 1s and %s", days(e.maxLife)))
	}
	role, ok, err := e.dir.RoleOf(ctx, by.ID)
	if err != nil {
		return nil, fmt.Errorf("resolve role of %s: %w", by.ID, err)
	}
	return e.manage(ctx, id, by.ID, record.EventExtended, func(l *runtx.Loaded, req *record.ApprovalRequest) (any, error) {
		if !ok || !e.roles.AtLeast(role, req.Role) {
			return nil, refused(record.CodeNoRole, id, "only someone with role %s or above may extend the deadline", req.Role)
		}
		if !req.SelfApproval && by.ID == req.RequesterID {
			return nil, refused(record.CodeSelfApproval, id, "the requester may not extend their own request: rule %s forbids self-approval", req.Rule)
		}
		deadline := req.Deadline.Add(d)
		if limit := req.CreatedAt.Add(e.maxLife); deadline.After(limit) {
			return nil, refused(record.CodeInvalidInput, id, "a request lives at most %s: the deadline cannot pass %s (it is %s)",
				days(e.maxLife), limit.UTC().Format(time.RFC3339), req.Deadline.UTC().Format(time.RFC3339))
		}
		req.Deadline, l.Run.Deadline = deadline, deadline
		l.State.Gate.Deadline = &deadline
		return map[string]string{"deadline": deadline.Format(time.RFC3339), "by": d.String()}, nil
	})
}

// days shows a lifetime in days when it is whole days.
func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// manage applies a change to the pending request of a waiting run, in one
// transaction with its checkpoint and audit event.
func (e *Engine) manage(ctx context.Context, id, actor string, event record.Event, change func(*runtx.Loaded, *record.ApprovalRequest) (any, error)) (*record.Run, error) {
	var run *record.Run
	err := e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		l, err := e.runs.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		if l.Run.Status != record.StatusWaitingApproval || l.State.Gate == nil || l.State.Gate.RequestID == "" {
			return refused(record.CodeNotWaiting, id, "the run is %s and waits for no approval", l.Run.Status)
		}
		if !e.now().Before(l.Run.Deadline) {
			return refused(record.CodeExpired, id, "the deadline passed at %s", l.Run.Deadline.Format(time.RFC3339))
		}
		req, err := tx.Request(ctx, l.State.Gate.RequestID)
		if err != nil {
			return fmt.Errorf("load approval request of run %s: %w", id, err)
		}
		detail, err := change(l, req)
		if err != nil {
			return err
		}
		if err := tx.UpdateRequest(ctx, req); err != nil {
			return fmt.Errorf("update approval request %s: %w", req.ID, err)
		}
		if err := e.runs.Save(ctx, tx, l, l.Run.Status, event, actor, detail, req); err != nil {
			return err
		}
		run = l.Run
		return nil
	})
	if record.IsRefused(err, record.CodeExpired) {
		if xerr := e.decisions.expire(ctx, id, actor); xerr != nil {
			return nil, errors.Join(err, xerr)
		}
	}
	return run, e.decisions.outcome(ctx, id, actor, err)
}
