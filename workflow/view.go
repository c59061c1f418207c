package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// RunView is a run as people and scripts read it (`show --json`).
type RunView struct {
	ID          string          `json:"id"`
	Workflow    string          `json:"workflow"`
	TaskID      string          `json:"task_id,omitempty"`
	Status      Status          `json:"status"`
	Reason      string          `json:"reason,omitempty"`
	Requester   Person          `json:"requester"`
	Summary     string          `json:"summary,omitempty"`
	Step        int             `json:"step"`
	ModelCalls  int             `json:"model_calls"`
	Fingerprint string          `json:"fingerprint,omitempty"`
	Actions     []Action        `json:"actions"`
	Evidence    []Evidence      `json:"evidence"`
	Checks      []Check         `json:"checks"`
	Gate        *Gate           `json:"gate,omitempty"`
	Requests    []RequestView   `json:"requests"`
	Decisions   []DecisionView  `json:"decisions"`
	Operations  []OperationView `json:"operations"`
	ForkedFrom  *ForkRef        `json:"forked_from,omitempty"`
	Deadline    *time.Time      `json:"deadline,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	Problem     string          `json:"problem,omitempty"` // set when the stored state failed its integrity check
}

// RequestView is an approval request as shown.
type RequestView struct {
	ID             string        `json:"id"`
	Status         RequestStatus `json:"status"`
	Fingerprint    string        `json:"fingerprint"`
	Rule           string        `json:"rule"`
	PolicyRevision string        `json:"policy_revision"`
	Risk           string        `json:"risk"`
	Role           string        `json:"role"`
	Count          int           `json:"count"`
	Deadline       time.Time     `json:"deadline"`
	DecidedBy      string        `json:"decided_by,omitempty"`
	DecidedAt      *time.Time    `json:"decided_at,omitempty"`
	Channel        string        `json:"channel,omitempty"`    // where the request was posted
	MessageTS      string        `json:"message_ts,omitempty"` // and which message
}

// DecisionView is a decision as shown.
type DecisionView struct {
	RequestID string          `json:"request_id"`
	By        string          `json:"by"`
	Name      string          `json:"name,omitempty"`
	Role      string          `json:"role"`
	Decision  Verdict         `json:"decision"`
	Reason    string          `json:"reason,omitempty"`
	Edited    json.RawMessage `json:"edited_args,omitempty"`
	Via       string          `json:"via"`
	At        time.Time       `json:"at"`
}

// OperationView is an operation as shown.
type OperationView struct {
	Key      string          `json:"key"`
	Action   string          `json:"action"`
	Status   OpStatus        `json:"status"`
	Attempts int             `json:"attempts"`
	Receipt  json.RawMessage `json:"receipt,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// Get reads a run with its requests, decisions and operations. It changes
// nothing: a run whose state fails its integrity check is returned with Problem set.
func (e *Engine) Get(ctx context.Context, id string) (*RunView, error) {
	var v *RunView
	err := e.store.View(ctx, func(ctx context.Context, tx Tx) error {
		l, err := e.load(ctx, tx, id)
		var ie *IntegrityError
		if errors.As(err, &ie) {
			v = viewOf(l.run, nil)
			v.Problem = ie.Error()
		} else if err != nil {
			return err
		} else {
			v = viewOf(l.run, l.st)
		}
		reqs, err := tx.RequestsForRun(ctx, id)
		if err != nil {
			return fmt.Errorf("load requests of run %s: %w", id, err)
		}
		for _, r := range reqs {
			rv := RequestView{ID: r.ID, Status: r.Status, Fingerprint: r.Fingerprint, Rule: r.Rule, PolicyRevision: r.PolicyRevision,
				Risk: r.Risk, Role: r.Role, Count: r.Count, Deadline: r.Deadline, DecidedBy: r.DecidedBy,
				Channel: r.Channel, MessageTS: r.MessageTS}
			if !r.DecidedAt.IsZero() {
				t := r.DecidedAt
				rv.DecidedAt = &t
			}
			v.Requests = append(v.Requests, rv)
		}
		decs, err := tx.Decisions(ctx, id)
		if err != nil {
			return fmt.Errorf("load decisions of run %s: %w", id, err)
		}
		for _, d := range decs {
			v.Decisions = append(v.Decisions, DecisionView{RequestID: d.RequestID, By: d.ApproverID, Name: d.ApproverName, Role: d.Role,
				Decision: d.Verdict, Reason: d.Reason, Edited: d.EditedArgs, Via: d.Via, At: d.At})
		}
		ops, err := tx.Operations(ctx, id)
		if err != nil {
			return fmt.Errorf("load operations of run %s: %w", id, err)
		}
		for _, op := range ops {
			v.Operations = append(v.Operations, OperationView{Key: op.Key, Action: op.Action, Status: op.Status,
				Attempts: op.Attempts, Receipt: op.Receipt, Error: op.Error})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

func viewOf(r *Run, st *State) *RunView {
	v := &RunView{
		ID: r.ID, Workflow: r.Workflow, TaskID: r.TaskID, Status: r.Status, Reason: r.Reason,
		Requester: Person{ID: r.RequesterID}, Step: r.Step, Fingerprint: r.Fingerprint,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Actions: []Action{}, Evidence: []Evidence{}, Checks: []Check{},
		Requests: []RequestView{}, Decisions: []DecisionView{}, Operations: []OperationView{},
	}
	if !r.Deadline.IsZero() && r.Status == StatusWaitingApproval {
		t := r.Deadline
		v.Deadline = &t
	}
	if st != nil {
		v.Requester, v.Summary, v.ModelCalls, v.Gate, v.ForkedFrom = st.Requester, st.Summary, st.ModelCalls, st.Gate, st.ForkedFrom
		if st.Actions != nil {
			v.Actions = st.Actions
		}
		if st.Evidence != nil {
			v.Evidence = st.Evidence
		}
		if st.Checks != nil {
			v.Checks = st.Checks
		}
	}
	return v
}

// List lists runs, oldest first.
func (e *Engine) List(ctx context.Context, f RunFilter) ([]*Run, error) {
	var runs []*Run
	err := e.store.View(ctx, func(ctx context.Context, tx Tx) error {
		var err error
		runs, err = tx.ListRuns(ctx, f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

// HistoryEntry is one checkpoint of a run, decoded.
type HistoryEntry struct {
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
	Hash    string    `json:"hash"`
	State   *State    `json:"state,omitempty"`
	Problem string    `json:"problem,omitempty"`
}

// History lists a run's checkpoints. It does not stop at a damaged one: it says
// what is wrong with it and goes on.
func (e *Engine) History(ctx context.Context, id string) ([]HistoryEntry, error) {
	var out []HistoryEntry
	err := e.store.View(ctx, func(ctx context.Context, tx Tx) error {
		if _, err := tx.Run(ctx, id); err != nil {
			if errors.Is(err, ErrNotFound) {
				return refused(CodeUnknownRun, id, "no such run")
			}
			return fmt.Errorf("load run %s: %w", id, err)
		}
		cps, err := tx.Checkpoints(ctx, id)
		if err != nil {
			return fmt.Errorf("load checkpoints of run %s: %w", id, err)
		}
		for i, c := range cps {
			h := HistoryEntry{Seq: c.Seq, At: c.CreatedAt, Hash: c.Hash}
			if _, err := VerifyChain(id, cps[:i+1]); err != nil {
				h.Problem = err.Error()
			}
			if st, err := DecodeState(c.State); err == nil {
				h.State = st
			}
			out = append(out, h)
		}
		return nil
	})
	return out, err
}

// AuditLog lists a run's audit events (all runs' when id is empty).
func (e *Engine) AuditLog(ctx context.Context, id string) ([]*AuditEvent, error) {
	var evs []*AuditEvent
	err := e.store.View(ctx, func(ctx context.Context, tx Tx) error {
		var err error
		evs, err = tx.AuditEvents(ctx, AuditFilter{RunID: id})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return evs, nil
}

// Fork starts a new run from checkpoint seq of run id. The fork keeps what the
// run knew at that point (messages, evidence, proposal) and nothing it was
// granted: it is checked and put through policy again and needs its own approval.
func (e *Engine) Fork(ctx context.Context, id string, seq int64, by Person) (*Run, error) {
	if by.ID == "" {
		return nil, refused(CodeInvalidInput, id, "who forks is required")
	}

	var src *State
	err := e.store.View(ctx, func(ctx context.Context, tx Tx) error {
		if _, err := tx.Run(ctx, id); err != nil {
			if errors.Is(err, ErrNotFound) {
				return refused(CodeUnknownRun, id, "no such run")
			}
			return fmt.Errorf("load run %s: %w", id, err)
		}
		cps, err := tx.Checkpoints(ctx, id)
		if err != nil {
			return fmt.Errorf("load checkpoints of run %s: %w", id, err)
		}
		if seq < 1 || seq > int64(len(cps)) {
			return refused(CodeInvalidInput, id, "no checkpoint %d (the run has 1 to %d)", seq, len(cps))
		}
		// The chain up to seq must be intact: a fork of damaged state would launder it.
		src, err = VerifyChain(id, cps[:seq])
		return err
	})
	if err != nil {
		return nil, err
	}
	nid := e.newID("run_")
	st := &State{
		SchemaVersion: SchemaVersion, RunID: nid, Workflow: src.Workflow, TaskID: src.TaskID, Status: StatusRunning,
		Step: src.Step, Requester: src.Requester, Summary: src.Summary, Messages: src.Messages, Evidence: src.Evidence,
		ModelCalls: src.ModelCalls, Actions: src.Actions, Proposed: src.Proposed, ForkedFrom: &ForkRef{RunID: id, Seq: seq},
	}
	l := &loaded{
		run: &Run{ID: nid, Workflow: src.Workflow, TaskID: src.TaskID, Status: StatusRunning, Step: src.Step,
			RequesterID: src.Requester.ID, ParentID: id, ParentSeq: seq},
		st: st,
	}
	err = e.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		return e.save(ctx, tx, l, "", "forked", by.ID, map[string]any{"from_run": id, "from_seq": seq}, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("fork run %s at %d: %w", id, seq, err)
	}
	return e.Resume(ctx, nid)
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	Runs         int               `json:"runs"`
	Checkpoints  int               `json:"checkpoints"`
	AuditEvents  int               `json:"audit_events"`
	Damaged      []*IntegrityError `json:"damaged"`
	AuditProblem string            `json:"audit_problem,omitempty"`
}

// OK reports whether nothing was damaged.
func (r *VerifyReport) OK() bool { return len(r.Damaged) == 0 && r.AuditProblem == "" }

// Verify checks every run's checkpoint chain and the audit chain. It changes nothing.
func (e *Engine) Verify(ctx context.Context) (*VerifyReport, error) {
	rep := &VerifyReport{Damaged: []*IntegrityError{}}
	err := e.store.View(ctx, func(ctx context.Context, tx Tx) error {
		f := RunFilter{Limit: 500}
		for {
			runs, err := tx.ListRuns(ctx, f)
			if err != nil {
				return fmt.Errorf("list runs: %w", err)
			}
			for _, r := range runs {
				rep.Runs++
				cps, err := tx.Checkpoints(ctx, r.ID)
				if err != nil {
					return fmt.Errorf("load checkpoints of run %s: %w", r.ID, err)
				}
				rep.Checkpoints += len(cps)
				var ie *IntegrityError
				if _, err := VerifyChain(r.ID, cps); errors.As(err, &ie) {
					rep.Damaged = append(rep.Damaged, ie)
				} else if int64(len(cps)) != r.Seq {
					rep.Damaged = append(rep.Damaged, &IntegrityError{RunID: r.ID, Problem: fmt.Sprintf("run row says checkpoint %d but the chain ends at %d", r.Seq, len(cps))})
				}
			}
			if len(runs) < f.Limit {
				break
			}
			last := runs[len(runs)-1]
			f.AfterCreated, f.AfterID = last.CreatedAt, last.ID
		}
		evs, err := tx.AuditEvents(ctx, AuditFilter{})
		if err != nil {
			return fmt.Errorf("read audit log: %w", err)
		}
		rep.AuditEvents = len(evs)
		rep.AuditProblem = VerifyAudit(evs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// VerifyAudit checks the audit chain and describes the first break ("" when intact).
func VerifyAudit(evs []*AuditEvent) string {
	prev := ""
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			return fmt.Sprintf("audit event %d missing (found %d)", i+1, ev.Seq)
		}
		if ev.PrevHash != prev || AuditHash(ev) != ev.Hash {
			return fmt.Sprintf("audit chain broken at event %d", ev.Seq)
		}
		prev = ev.Hash
	}
	return ""
}
