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
)

// RunView is a run as people and scripts read it (`show --json`).
type RunView struct {
	ID          string            `json:"id"`
	Workflow    string            `json:"workflow"`
	TaskID      string            `json:"task_id,omitempty"`
	Status      record.Status     `json:"status"`
	Reason      string            `json:"reason,omitempty"`
	Requester   record.Person     `json:"requester"`
	Summary     string            `json:"summary,omitempty"`
	Step        int               `json:"step"`
	ModelCalls  int               `json:"model_calls"`
	Fingerprint string            `json:"fingerprint,omitempty"`
	Actions     []record.Action   `json:"actions"`
	Evidence    []record.Evidence `json:"evidence"`
	Checks      []record.Check    `json:"checks"`
	Gate        *record.Gate      `json:"gate,omitempty"`
	Requests    []RequestView     `json:"requests"`
	Decisions   []DecisionView    `json:"decisions"`
	Operations  []OperationView   `json:"operations"`
	ForkedFrom  *record.ForkRef   `json:"forked_from,omitempty"`
	Deadline    *time.Time        `json:"deadline,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	Problem     string            `json:"problem,omitempty"` // set when the stored state failed its integrity check
	CallbackURL string            `json:"callback_url,omitempty"`
	// Pruned says when Prune removed the run's evidence, messages and older
	// states, and how much; what is shown is what it kept.
	Pruned *record.PruneRecord `json:"pruned,omitempty"`
	// Resolutions are what people found of the run while it needed
	// attention, oldest first.
	Resolutions []record.ResolutionRecord `json:"resolutions,omitempty"`
	// Reminders are the reminders of the pending request before its
	// deadline (the gate's remind), oldest first.
	Reminders []record.ReminderRecord `json:"reminders,omitempty"`
	// Escalations are the escalation steps applied to the pending request
	// (the gate's escalate), oldest first.
	Escalations []record.EscalationRecord `json:"escalations,omitempty"`
	// Unconfirmed are the approvals of a step-up rule given elsewhere than
	// the web console, waiting for their confirmation there.
	Unconfirmed []record.DecisionRecord `json:"unconfirmed,omitempty"`
	// Forced is set when the approval was forced (break-glass).
	Forced *record.ForceRecord `json:"forced,omitempty"`
	// Review is the follow-up review of a forced approval, as it stands
	// (a run read one by one, and a transition's callback, show it).
	Review *ReviewView `json:"review,omitempty"`
	// RetryAt is when an executing run that waits for its target (a
	// Retry-After, a backoff, an action still in progress) is asked again.
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// Progress is, for a composite approval, which places of the pending
	// request's requirement are filled and by whom.
	Progress *record.RequirementProgress `json:"progress,omitempty"`
	// ScheduledFor is when a scheduled run's execution window opens and it runs.
	ScheduledFor *time.Time `json:"scheduled_for,omitempty"`
}

// RequestView is an approval request as shown.
type RequestView struct {
	ID             string               `json:"id"`
	Status         record.RequestStatus `json:"status"`
	Fingerprint    string               `json:"fingerprint"`
	Rule           string               `json:"rule"`
	PolicyRevision string               `json:"policy_revision"`
	Risk           record.Risk          `json:"risk"`
	Role           string               `json:"role"`
	Count          int                  `json:"count"`
	Deadline       time.Time            `json:"deadline"`
	DecidedBy      string               `json:"decided_by,omitempty"`
	DecidedAt      *time.Time           `json:"decided_at,omitempty"`
	Channel        string               `json:"channel,omitempty"`    // where the request was posted
	MessageTS      string               `json:"message_ts,omitempty"` // and which message
}

// DecisionView is a decision as shown.
type DecisionView struct {
	RequestID string          `json:"request_id"`
	By        string          `json:"by"`
	Name      string          `json:"name,omitempty"`
	Role      string          `json:"role"`
	Decision  record.Verdict  `json:"decision"`
	Reason    string          `json:"reason,omitempty"`
	Edited    json.RawMessage `json:"edited_args,omitempty"`
	Via       record.Via      `json:"via"`
	At        time.Time       `json:"at"`
	// OnBehalfOf is whom By decided for, under a delegation ("" for none).
	OnBehalfOf string `json:"on_behalf_of,omitempty"`
}

// OperationView is an operation as shown.
type OperationView struct {
	Key      string          `json:"key"`
	Action   string          `json:"action"`
	Status   record.OpStatus `json:"status"`
	Attempts int             `json:"attempts"`
	Receipt  json.RawMessage `json:"receipt,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// Get reads a run with its requests, decisions and operations. It changes
// nothing: a run whose state fails its integrity check is returned with Problem set.
func (e *Engine) Get(ctx context.Context, id string) (*RunView, error) {
	var v *RunView
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		v, err = e.ViewIn(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// ViewIn is Get in a transaction the caller holds: the view of a transition
// shows the run as the transition leaves it, before that commits.
func (e *Engine) ViewIn(ctx context.Context, tx storage.Tx, id string) (*RunView, error) {
	l, err := e.runs.Load(ctx, tx, id)
	var ie *IntegrityError
	var v *RunView
	var st *record.State
	if errors.As(err, &ie) {
		v = viewOf(l.Run, nil)
		v.Problem = ie.Error()
	} else if err != nil {
		return nil, err
	} else {
		st = l.State
		v = viewOf(l.Run, st)
	}
	return e.viewRest(ctx, tx, v, st)
}

// viewOfTransition is ViewIn for the run a hook is told about: the
// transition's state is the one its transaction writes, so the run is shown
// from it without reading and verifying its chain again. A transition
// without a state (a run put aside unread) is read as ViewIn reads it.
func (e *Engine) viewOfTransition(ctx context.Context, tx storage.Tx, t *Transition) (*RunView, error) {
	if t.State == nil {
		return e.ViewIn(ctx, tx, t.Run.ID)
	}
	return e.viewRest(ctx, tx, viewOf(t.Run, t.State), t.State)
}

// viewRest adds a run's requests (with where each was posted), decisions
// and operations to v, read in one round trip, checking their seals. st,
// the run's state when it could be trusted, holds the intents no row holds
// yet (execute.WithIntents).
func (e *Engine) viewRest(ctx context.Context, tx storage.Tx, v *RunView, st *record.State) (*RunView, error) {
	id := v.ID
	b, err := tx.LoadRun(ctx, id, storage.RunParts{Requests: true, Messages: true, Decisions: true, Operations: true})
	if err != nil {
		return nil, fmt.Errorf("load the requests, decisions and operations of run %s: %w", id, err)
	}
	for _, r := range b.Requests {
		rv := RequestView{ID: r.ID, Status: r.Status, Fingerprint: r.Fingerprint, Rule: r.Rule, PolicyRevision: r.PolicyRevision,
			Risk: r.Risk, Role: r.Role, Count: r.Count, Deadline: r.Deadline, DecidedBy: r.DecidedBy}
		for _, l := range b.Messages {
			if l.RequestID == r.ID {
				rv.Channel, rv.MessageTS = l.Channel, l.TS
			}
		}
		if !r.DecidedAt.IsZero() {
			t := r.DecidedAt
			rv.DecidedAt = &t
		}
		v.Requests = append(v.Requests, rv)
	}
	for _, d := range b.Decisions {
		v.Decisions = append(v.Decisions, DecisionView{RequestID: d.RequestID, By: d.ApproverID, Name: d.ApproverName, Role: d.Role,
			Decision: d.Verdict, Reason: d.Reason, Edited: d.EditedArgs, Via: d.Via, At: d.At, OnBehalfOf: d.OnBehalfOf})
	}
	for _, op := range execute.WithIntents(b.Operations, id, st) {
		v.Operations = append(v.Operations, OperationView{Key: op.Key, Action: op.Action, Status: op.Status,
			Attempts: op.Attempts, Receipt: op.Receipt, Error: op.Error})
	}
	v.Progress = progressOf(e.roles, v)
	if v.Forced != nil {
		if v.Review, err = e.reviews.view(ctx, tx, id); err != nil {
			return nil, err
		}
	}
	if err := e.in.CheckRun(ctx, tx, id, nil, b.Requests, b.Decisions, b.Operations); err != nil {
		var ie *IntegrityError
		if !errors.As(err, &ie) {
			return nil, err
		}
		if v.Problem == "" {
			v.Problem = ie.Error()
		}
	}
	return v, nil
}

func viewOf(r *record.Run, st *record.State) *RunView {
	v := &RunView{
		ID: r.ID, Workflow: r.Workflow, TaskID: r.TaskID, Status: r.Status, Reason: r.Reason,
		Requester: record.Person{ID: r.RequesterID}, Step: r.Step, Fingerprint: r.Fingerprint,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Actions: []record.Action{}, Evidence: []record.Evidence{}, Checks: []record.Check{},
		Requests: []RequestView{}, Decisions: []DecisionView{}, Operations: []OperationView{},
	}
	if !r.Deadline.IsZero() && r.Status == record.StatusWaitingApproval {
		t := r.Deadline
		v.Deadline = &t
	}
	if t := execute.RetryAt(r); !t.IsZero() {
		v.RetryAt = &t
	}
	v.ScheduledFor = scheduledFor(r, st)
	if st != nil {
		v.Requester, v.Summary, v.ModelCalls, v.Gate, v.ForkedFrom = st.Requester, st.Summary, st.ModelCalls, st.Gate, st.ForkedFrom
		v.CallbackURL = st.CallbackURL
		v.Pruned = st.Pruned
		v.Resolutions = st.Resolutions
		v.Reminders = st.Reminders
		v.Escalations = st.Escalations
		v.Unconfirmed = st.Unconfirmed
		v.Forced = st.Forced
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
func (e *Engine) List(ctx context.Context, f storage.RunFilter) ([]*record.Run, error) {
	runs, err := listRuns(ctx, e.store, f)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

// listRuns reads the runs f names in one read transaction of st.
func listRuns(ctx context.Context, st storage.Store, f storage.RunFilter) ([]*record.Run, error) {
	var runs []*record.Run
	err := st.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		runs, err = tx.ListRuns(ctx, f)
		return err
	})
	return runs, err
}

// ListViews lists runs, oldest first, each with what its latest checkpoint
// says (actions, summary, requester) and without its requests, decisions and
// operations: a page of a list in one query. Each latest checkpoint, and the
// base it is written against, is checked against its own hash and seal,
// which cover what is shown; the rest of the
// chain is checked when the run is acted on or shown (Get). A checkpoint that
// fails is not shown: the view has only the run row and Problem says why.
func (e *Engine) ListViews(ctx context.Context, f storage.RunFilter) ([]*RunView, error) {
	var views []*RunView
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		if e.in.HeadKnown() {
			// Checking the heads' seals reads nothing more: the page is
			// the View's one read, and ends its snapshot (PostgreSQL: in
			// the same round trip).
			storage.LastRead(tx)
		}
		heads, err := tx.ListRunHeads(ctx, f)
		if err != nil {
			return err
		}
		views = make([]*RunView, len(heads))
		for i, h := range heads {
			st, err := e.headState(ctx, tx, h)
			var ie *IntegrityError
			if errors.As(err, &ie) {
				views[i] = viewOf(h.Run, nil)
				views[i].Problem = ie.Error()
				continue
			}
			if err != nil {
				return err
			}
			views[i] = viewOf(h.Run, st)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return views, nil
}

// headState checks a run's latest checkpoint and its base, if it has one,
// on their own (hash, seal, state) and decodes its state.
func (e *Engine) headState(ctx context.Context, tx storage.Tx, h *storage.RunHead) (*record.State, error) {
	id, c := h.Run.ID, h.Head
	if c == nil {
		return nil, &IntegrityError{RunID: id, Seq: h.Run.Seq, Problem: "the run row's checkpoint is missing"}
	}
	cps := []*record.Checkpoint{c}
	if c.BaseSeq != 0 && h.Base != nil {
		cps = append(cps, h.Base)
	}
	for _, c := range cps {
		if !c.PrunedAt.IsZero() {
			continue // chain.ResolveWith names it
		}
		if record.CheckpointHash(c) != c.Hash {
			return nil, &IntegrityError{RunID: id, Seq: c.Seq, Problem: "broken hash chain: content does not match its hash"}
		}
	}
	if err := e.in.CheckRun(ctx, tx, id, cps, nil, nil, nil); err != nil {
		return nil, err
	}
	full, err := chain.ResolveWith(c, h.Base)
	if err != nil {
		return nil, &IntegrityError{RunID: id, Seq: c.Seq, Problem: err.Error()}
	}
	st, err := chain.Decode(full)
	if err != nil {
		return nil, &IntegrityError{RunID: id, Seq: c.Seq, Problem: err.Error()}
	}
	if st.SchemaVersion != c.SchemaVersion || st.RunID != id {
		return nil, &IntegrityError{RunID: id, Seq: c.Seq, Problem: "the state does not belong to this checkpoint"}
	}
	// The row chose this run for the list (by requester, status, task):
	// what it says must be what the sealed state says.
	if p := rowProblem(h.Run, st); p != "" {
		return nil, &IntegrityError{RunID: id, Seq: c.Seq, Problem: p}
	}
	return st, nil
}

// AuditLog lists a run's audit events (all runs' when id is empty).
func (e *Engine) AuditLog(ctx context.Context, id string) ([]*record.AuditEvent, error) {
	var evs []*record.AuditEvent
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		evs, err = tx.AuditEvents(ctx, storage.AuditFilter{RunID: id})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return evs, nil
}
