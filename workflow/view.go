package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
	"github.com/signoff-dev/signoff/workflow/internal/seal"
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
	// RetryAt is when an executing run that waits for its target (a
	// Retry-After, a backoff, an action still in progress) is asked again.
	RetryAt *time.Time `json:"retry_at,omitempty"`
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

// ViewIn is Get in a transaction the caller holds: a hook uses it to show
// the run as the transition it is told about leaves it, before that commits.
func (e *Engine) ViewIn(ctx context.Context, tx storage.Tx, id string) (*RunView, error) {
	l, err := e.load(ctx, tx, id)
	var ie *IntegrityError
	var v *RunView
	if errors.As(err, &ie) {
		v = viewOf(l.run, nil)
		v.Problem = ie.Error()
	} else if err != nil {
		return nil, err
	} else {
		v = viewOf(l.run, l.st)
	}
	return e.viewRest(ctx, tx, v)
}

// ViewOfTransition is ViewIn for the run a hook is told about: the
// transition's state is the one its transaction writes, so the run is shown
// from it without reading and verifying its chain again. A transition
// without a state (a run put aside unread) is read as ViewIn reads it.
func (e *Engine) ViewOfTransition(ctx context.Context, tx storage.Tx, t Transition) (*RunView, error) {
	if t.State == nil {
		return e.ViewIn(ctx, tx, t.Run.ID)
	}
	return e.viewRest(ctx, tx, viewOf(t.Run, t.State))
}

// viewRest adds a run's requests, decisions and operations to v, checking
// their seals.
func (e *Engine) viewRest(ctx context.Context, tx storage.Tx, v *RunView) (*RunView, error) {
	id := v.ID
	var ie *IntegrityError
	err := func() error {
		reqs, err := tx.RequestsForRun(ctx, id)
		if err != nil {
			return fmt.Errorf("load requests of run %s: %w", id, err)
		}
		locs, err := tx.MessageLocations(ctx, id)
		if err != nil {
			return fmt.Errorf("load message locations of run %s: %w", id, err)
		}
		for _, r := range reqs {
			rv := RequestView{ID: r.ID, Status: r.Status, Fingerprint: r.Fingerprint, Rule: r.Rule, PolicyRevision: r.PolicyRevision,
				Risk: r.Risk, Role: r.Role, Count: r.Count, Deadline: r.Deadline, DecidedBy: r.DecidedBy}
			for _, l := range locs {
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
		if err := e.in.CheckRun(ctx, tx, id, nil, reqs, decs, ops); err != nil {
			if !errors.As(err, &ie) {
				return err
			}
			if v.Problem == "" {
				v.Problem = ie.Error()
			}
		}
		return nil
	}()
	if err != nil {
		return nil, err
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
	if t := retryAt(r); !t.IsZero() {
		v.RetryAt = &t
	}
	if st != nil {
		v.Requester, v.Summary, v.ModelCalls, v.Gate, v.ForkedFrom = st.Requester, st.Summary, st.ModelCalls, st.Gate, st.ForkedFrom
		v.CallbackURL = st.CallbackURL
		v.Pruned = st.Pruned
		v.Resolutions = st.Resolutions
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
	var runs []*record.Run
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		runs, err = tx.ListRuns(ctx, f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
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
			continue // resolveWith names it
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

// HistoryEntry is one checkpoint of a run, decoded.
type HistoryEntry struct {
	Seq     int64         `json:"seq"`
	At      time.Time     `json:"at"`
	Hash    string        `json:"hash"`
	State   *record.State `json:"state,omitempty"`
	Problem string        `json:"problem,omitempty"`
	// Pruned is when Prune removed this checkpoint's state (nil: it has it).
	Pruned *time.Time `json:"pruned,omitempty"`
}

// History lists a run's checkpoints. It does not stop at a damaged one: it says
// what is wrong with it and goes on.
func (e *Engine) History(ctx context.Context, id string) ([]HistoryEntry, error) {
	var out []HistoryEntry
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		if _, err := tx.Run(ctx, id); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				return UnknownRun(id)
			}
			return fmt.Errorf("load run %s: %w", id, err)
		}
		cps, err := tx.Checkpoints(ctx, id)
		if err != nil {
			return fmt.Errorf("load checkpoints of run %s: %w", id, err)
		}
		// A pruned run's chain verifies as a whole only: a prefix ending at a
		// pruned checkpoint lacks the summary that allows it.
		_, _, whole := chain.Verify(id, cps)
		prefixes := chain.VerifyPrefixes(id, cps)
		for i, c := range cps {
			h := HistoryEntry{Seq: c.Seq, At: c.CreatedAt, Hash: c.Hash}
			switch {
			case !c.PrunedAt.IsZero():
				at := c.PrunedAt
				h.Pruned = &at
				if whole != nil {
					h.Problem = whole.Error()
				}
			case whole == nil && !cps[0].PrunedAt.IsZero():
				// A pruned run: its whole chain was verified above.
			default:
				if err := prefixes[i]; err != nil {
					h.Problem = err.Error()
				}
			}
			if b, err := chain.Resolve(cps, i); err == nil {
				if st, err := chain.Decode(b); err == nil {
					h.State = st
				}
			}
			out = append(out, h)
		}
		return nil
	})
	return out, err
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

// Fork starts a new run from checkpoint seq of run id. The fork keeps what the
// run knew at that point (messages, evidence, proposal) and nothing it was
// granted: it is checked and put through policy again and needs its own approval.
// Nor does it keep the callback URL: a person starts the fork, and the agent
// that asked for callbacks asked them about its own run, not about runs it
// never submitted (and the allow-list may have changed since).
func (e *Engine) Fork(ctx context.Context, id string, seq int64, by record.Person) (*record.Run, error) {
	if by.ID == "" {
		return nil, refused(record.CodeInvalidInput, id, "who forks is required")
	}

	var src *record.State
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		if _, err := tx.Run(ctx, id); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				return UnknownRun(id)
			}
			return fmt.Errorf("load run %s: %w", id, err)
		}
		cps, err := tx.Checkpoints(ctx, id)
		if err != nil {
			return fmt.Errorf("load checkpoints of run %s: %w", id, err)
		}
		if seq < 1 || seq > int64(len(cps)) {
			return refused(record.CodeInvalidInput, id, "no checkpoint %d (the run has 1 to %d)", seq, len(cps))
		}
		if c := cps[seq-1]; !c.PrunedAt.IsZero() {
			return refused(record.CodeInvalidInput, id, "checkpoint %d was pruned on %s: its state is gone (fork at %d, the run's summary, instead)",
				seq, c.PrunedAt.UTC().Format(time.RFC3339), len(cps))
		}
		if !cps[0].PrunedAt.IsZero() {
			// The summary checkpoint of a pruned run verifies with the whole chain.
			src, _, err = chain.Verify(id, cps)
			return err
		}
		// The chain up to seq must be intact: a fork of damaged state would launder it.
		src, _, err = chain.Verify(id, cps[:seq])
		return err
	})
	if err != nil {
		return nil, err
	}
	nid := e.newID("run_")
	st := &record.State{
		SchemaVersion: record.SchemaVersion, RunID: nid, Workflow: src.Workflow, TaskID: src.TaskID, Status: record.StatusRunning,
		Step: src.Step, Requester: src.Requester, Summary: src.Summary, Messages: src.Messages, Evidence: src.Evidence,
		ModelCalls: src.ModelCalls, Actions: src.Actions, Proposed: src.Proposed, ForkedFrom: &record.ForkRef{RunID: id, Seq: seq},
	}
	l := &loaded{
		run: &record.Run{ID: nid, Workflow: src.Workflow, TaskID: src.TaskID, Status: record.StatusRunning, Step: src.Step,
			RequesterID: src.Requester.ID, ParentID: id, ParentSeq: seq},
		st: st,
	}
	err = e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		return e.save(ctx, tx, l, "", record.EventForked, by.ID, map[string]any{"from_run": id, "from_seq": seq}, nil)
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
	Anchors      int               `json:"anchors"`
	Damaged      []*IntegrityError `json:"damaged"`
	AuditProblem string            `json:"audit_problem,omitempty"`
	// Keyed: the store has a sealed head, so its records are sealed since
	// KeyedSince. Unkeyed counts the rows accepted without a seal because
	// they were written before that (or in a store never keyed).
	// Pruned counts the runs whose older states a prune removed (their
	// chains verify through the seqs, hashes and seals it kept).
	Pruned     int        `json:"pruned"`
	Keyed      bool       `json:"keyed"`
	KeyedSince *time.Time `json:"keyed_since,omitempty"`
	Unkeyed    int        `json:"unkeyed"`
	// Unverified: no key was configured, or not the store's (KeyNotGiven),
	// so seals were not checked.
	Unverified bool `json:"unverified,omitempty"`
	// KeyNotGiven is the key the store's head is sealed with when the keys
	// configured do not include it: every seal would fail for that one
	// reason, so none is checked, and the report says so rather than call
	// the store damaged.
	KeyNotGiven string `json:"key_not_given,omitempty"`
	// Head is the newest anchor (zero before the first): record it
	// elsewhere, and `verify --anchor` proves later that the log still
	// extends it.
	Head Anchor `json:"head"`
}

// Anchor names, as recorded outside the store, either an anchor record by
// its id and hash (A12:HASH: serve writes one every ten minutes and logs
// it), which commits to every run's audit events up to its time, or, as
// anchors did before the log was chained per run, one event of the global
// chain by its seq and hash (SEQ:HASH).
type Anchor struct {
	Seq  int64  `json:"seq"` // the anchor's id, or the event's seq
	Hash string `json:"hash"`
	// Event: Seq names an event of the global chain, not an anchor record.
	Event bool `json:"event,omitempty"`
}

// String is the anchor as `verify --anchor` takes it: A12:HASH, or SEQ:HASH
// for an event.
func (a Anchor) String() string {
	if a.Event {
		return fmt.Sprintf("%d:%s", a.Seq, a.Hash)
	}
	return fmt.Sprintf("A%d:%s", a.Seq, a.Hash)
}

// ParseAnchor reads A12:HASH (an anchor record) or SEQ:HASH (an event of
// the global chain, as anchors were written before).
func ParseAnchor(s string) (Anchor, error) {
	id, hash, ok := strings.Cut(strings.TrimSpace(s), ":")
	rest, record := strings.CutPrefix(id, "A")
	n, err := strconv.ParseInt(rest, 10, 64)
	if !ok || err != nil || n < 1 || len(hash) != 64 || strings.HasPrefix(rest, "+") {
		return Anchor{}, fmt.Errorf("anchor %q: want A12:HASH, as serve logs it and verify prints it (a positive id, a 64-character hash), or SEQ:HASH as earlier versions logged it", s)
	}
	return Anchor{Seq: n, Hash: strings.ToLower(hash), Event: !record}, nil
}

// OK reports whether nothing was damaged and, with keys, the seals could be
// checked: a head sealed with a key not given is a mistaken key as often as
// a changed head, and neither is a store verified.
func (r *VerifyReport) OK() bool {
	return len(r.Damaged) == 0 && r.AuditProblem == "" && r.KeyNotGiven == ""
}

// Verify checks every run's checkpoint chain and audit chain, the seals of
// every checkpoint, approval request, decision, operation, audit event, run
// head and anchor when keys are configured, that every sealed transition has
// its audit event, that each run's audit log ends where its sealed head says
// and the global chain of older events where the store's head says (so
// deleting the newest events shows), and that the log extends every anchor
// stored and each of anchors. It changes nothing.
func (e *Engine) Verify(ctx context.Context, anchors ...Anchor) (*VerifyReport, error) {
	rep := &VerifyReport{Damaged: []*IntegrityError{}, Unverified: !e.in.Keyed()}
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		in := e.in
		if id, err := in.ForeignHeadKey(ctx, tx); err != nil {
			return err
		} else if id != "" {
			rep.KeyNotGiven, rep.Unverified = id, true
			in = seal.New(nil) // checks the chains only, as without keys
		}
		head, err := in.Head(ctx, tx)
		var ie *IntegrityError
		switch {
		case errors.As(err, &ie):
			rep.AuditProblem = ie.Problem
		case err != nil:
			return err
		case head != nil:
			rep.Keyed, rep.KeyedSince = true, &head.KeyedSince
		}
		transitions := map[string]string{} // run/seq → checkpoint hash, from the audit log
		evs, err := tx.AuditEvents(ctx, storage.AuditFilter{})
		if err != nil {
			return fmt.Errorf("read audit log: %w", err)
		}
		rep.AuditEvents = len(evs)
		byRun := map[string][]*record.AuditEvent{}
		for _, ev := range evs {
			if ev.CheckpointSeq != 0 {
				transitions[ev.RunID+"/"+strconv.FormatInt(ev.CheckpointSeq, 10)] = ev.CheckpointHash
			}
			byRun[ev.RunID] = append(byRun[ev.RunID], ev)
			if ev.MAC == "" {
				rep.Unkeyed++
			}
		}
		stored, err := tx.AuditAnchors(ctx)
		if err != nil {
			return fmt.Errorf("read anchors: %w", err)
		}
		rep.Anchors = len(stored)
		if n := len(stored); n > 0 {
			rep.Head = Anchor{Seq: stored[n-1].ID, Hash: stored[n-1].Hash}
		}
		if rep.AuditProblem == "" {
			rep.AuditProblem = verifyAudit(in, evs, head, stored, anchors)
		}
		// Each run's chain against its head; a problem is the run's damage.
		heads, err := tx.AuditRunHeads(ctx)
		if err != nil {
			return fmt.Errorf("read audit heads: %w", err)
		}
		headOf := map[string]*record.AuditRunHead{}
		for _, h := range heads {
			headOf[h.RunID] = h
			if _, ok := byRun[h.RunID]; !ok {
				byRun[h.RunID] = nil
			}
		}
		auditDamage := map[string]string{}
		for id, revs := range byRun {
			if p := in.RunAuditProblem(head, id, revs, headOf[id]); p != "" {
				auditDamage[id] = p
			}
		}
		f := storage.RunFilter{Limit: 500}
		for {
			runs, err := tx.ListRuns(ctx, f)
			if err != nil {
				return fmt.Errorf("list runs: %w", err)
			}
			for _, r := range runs {
				rep.Runs++
				d, err := verifyRun(ctx, tx, in, r, head, transitions, rep)
				if err != nil {
					return err
				}
				if p, ok := auditDamage[r.ID]; ok && d == nil {
					d = &IntegrityError{RunID: r.ID, Problem: p}
				}
				delete(auditDamage, r.ID)
				if d != nil {
					rep.Damaged = append(rep.Damaged, d)
				}
			}
			if len(runs) < f.Limit {
				break
			}
			last := runs[len(runs)-1]
			f.AfterCreated, f.AfterID = last.CreatedAt, last.ID
		}
		// Events about no run, or about a run whose row is gone.
		for _, id := range slices.Sorted(maps.Keys(auditDamage)) {
			rep.Damaged = append(rep.Damaged, &IntegrityError{RunID: id, Problem: auditDamage[id]})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// verifyRun checks one run: its chain, the seals of all its rows (with in's
// keys), and that each sealed checkpoint has the audit event of its transition.
func verifyRun(ctx context.Context, tx storage.Tx, in *seal.Sealer, r *record.Run, head *record.IntegrityHead, transitions map[string]string, rep *VerifyReport) (*IntegrityError, error) {
	cps, err := tx.Checkpoints(ctx, r.ID)
	if err != nil {
		return nil, fmt.Errorf("load checkpoints of run %s: %w", r.ID, err)
	}
	reqs, err := tx.RequestsForRun(ctx, r.ID)
	if err != nil {
		return nil, fmt.Errorf("load requests of run %s: %w", r.ID, err)
	}
	decs, err := tx.Decisions(ctx, r.ID)
	if err != nil {
		return nil, fmt.Errorf("load decisions of run %s: %w", r.ID, err)
	}
	ops, err := tx.Operations(ctx, r.ID)
	if err != nil {
		return nil, fmt.Errorf("load operations of run %s: %w", r.ID, err)
	}
	rep.Checkpoints += len(cps)
	_, unsealed := seal.Counts(cps, reqs, decs, ops)
	rep.Unkeyed += unsealed
	var ie *IntegrityError
	st, _, err := chain.Verify(r.ID, cps)
	if errors.As(err, &ie) {
		return ie, nil
	}
	if st != nil && st.Pruned != nil {
		rep.Pruned++
	}
	// The run row is not sealed; what in it decides anything must agree with
	// the sealed checkpoint, as the engine insists when it loads the run.
	rowP := ""
	if st != nil {
		rowP = rowProblem(r, st)
	}
	switch {
	case st != nil && st.Status != r.Status && r.Status != record.StatusNeedsAttention:
		return &IntegrityError{RunID: r.ID, Problem: fmt.Sprintf("run row says %s but its checkpoint says %s", r.Status, st.Status)}, nil
	case st != nil && st.Gate != nil && r.Fingerprint != "" && r.Fingerprint != st.Gate.Fingerprint:
		return &IntegrityError{RunID: r.ID, Problem: "the run row's fingerprint is not the one its checkpoint approved"}, nil
	case rowP != "":
		return &IntegrityError{RunID: r.ID, Problem: rowP}, nil
	}
	if err := in.CheckRun(ctx, tx, r.ID, cps, reqs, decs, ops); errors.As(err, &ie) {
		return ie, nil
	} else if err != nil {
		return nil, err
	}
	if int64(len(cps)) != r.Seq {
		return &IntegrityError{RunID: r.ID, Problem: fmt.Sprintf("run row says checkpoint %d but the chain ends at %d", r.Seq, len(cps))}, nil
	}
	if in.Keyed() && head != nil {
		for _, c := range cps {
			if c.MAC == "" {
				continue // written before the store was keyed, when events named no checkpoint
			}
			if h, ok := transitions[r.ID+"/"+strconv.FormatInt(c.Seq, 10)]; !ok || h != c.Hash {
				return &IntegrityError{RunID: r.ID, Seq: c.Seq, Problem: fmt.Sprintf("checkpoint %d has no audit event of its transition: the audit log was cut or edited", c.Seq)}, nil
			}
		}
	}
	return nil, nil
}

// verifyAudit checks what spans runs: the global chain of the events written
// before the log was chained per run (contiguous, ending where the store's
// sealed head says), that no per-run event comes before one of them, each
// event's seal, the anchor chain and that the log extends every stored anchor
// and each of anchors. It describes the first problem, or returns "".
func verifyAudit(in *seal.Sealer, evs []*record.AuditEvent, head *record.IntegrityHead, stored []*record.AuditAnchor, anchors []Anchor) string {
	if p := VerifyAudit(evs); p != "" {
		return p
	}
	var global []*record.AuditEvent
	bySeq := make(map[int64]*record.AuditEvent, len(evs))
	for _, ev := range evs {
		bySeq[ev.Seq] = ev
		if ev.Format != record.AuditPerRun {
			global = append(global, ev)
		}
	}
	if in.Keyed() {
		for _, ev := range evs {
			if p := in.EventProblem(head, ev); p != "" {
				return fmt.Sprintf("audit event %d: %s", ev.Seq, p)
			}
		}
		var last *record.AuditEvent
		if len(global) > 0 {
			last = global[len(global)-1]
		}
		switch {
		case head == nil && len(evs) > 0 && evs[len(evs)-1].MAC != "":
			return "the store's integrity head is missing, though its audit events are sealed"
		case head != nil && head.Seq > 0 && (last == nil || last.Seq < head.Seq):
			n := int64(0)
			if last != nil {
				n = last.Seq
			}
			return fmt.Sprintf("the global audit chain ends at event %d, but its sealed head is at event %d: the newest events were deleted", n, head.Seq)
		case head != nil && head.Seq > 0 && last.Seq == head.Seq && last.Hash != head.Hash:
			return fmt.Sprintf("audit event %d is not the one the sealed head names", head.Seq)
		}
	}
	if p := verifyAnchors(in, bySeq, head, stored); p != "" {
		return p
	}
	for _, a := range anchors {
		if a.Event {
			ev, ok := bySeq[a.Seq]
			if !ok {
				return fmt.Sprintf("audit event %d, which the anchor %s names, is missing: events were deleted", a.Seq, a)
			}
			if ev.Hash != a.Hash {
				return fmt.Sprintf("audit event %d is not the anchored one (%s): the log was rewritten", a.Seq, a)
			}
			continue
		}
		if a.Seq > int64(len(stored)) {
			return fmt.Sprintf("the anchor chain ends at %d and does not reach the anchor %s: anchors were deleted", len(stored), a)
		}
		if stored[a.Seq-1].Hash != a.Hash {
			return fmt.Sprintf("anchor %d is not the one recorded (%s): the anchors were rewritten", a.Seq, a)
		}
	}
	return ""
}

// verifyAnchors checks the anchor chain (ids from 1, each linked to the one
// before, hashes and seals), that it ends where the store's sealed head says,
// and that every event an anchor names is in the log as it was named.
func verifyAnchors(in *seal.Sealer, bySeq map[int64]*record.AuditEvent, head *record.IntegrityHead, stored []*record.AuditAnchor) string {
	prev := ""
	for i, a := range stored {
		if a.ID != int64(i+1) {
			return fmt.Sprintf("anchor %d missing (found %d)", i+1, a.ID)
		}
		if a.PrevHash != prev || record.AnchorHash(a) != a.Hash {
			return fmt.Sprintf("the anchor chain is broken at anchor %d", a.ID)
		}
		if in.Keyed() {
			if p := in.AnchorProblem(head, a); p != "" {
				return fmt.Sprintf("anchor %d: %s", a.ID, p)
			}
		}
		for _, h := range a.Heads {
			ev, ok := bySeq[h.Seq]
			switch {
			case !ok:
				return fmt.Sprintf("anchor %d names audit event %d of run %s, which is missing: events were deleted", a.ID, h.Seq, h.RunID)
			case ev.RunID != h.RunID || ev.Hash != h.Hash:
				return fmt.Sprintf("anchor %d names audit event %d of run %s, which was changed since", a.ID, h.Seq, h.RunID)
			}
		}
		prev = a.Hash
	}
	if in.Keyed() && head != nil && head.AnchorID > 0 {
		if head.AnchorID > int64(len(stored)) {
			return fmt.Sprintf("the anchor chain ends at %d, but the sealed head names anchor %d: the newest anchors were deleted", len(stored), head.AnchorID)
		}
		if stored[head.AnchorID-1].Hash != head.AnchorHash {
			return fmt.Sprintf("anchor %d is not the one the sealed head names", head.AnchorID)
		}
	}
	return ""
}

// Anchor writes an anchor record that commits to every run's audit events up
// to now (the heads that moved since the anchor before it, chained to it) and
// returns it, to be recorded outside the store: `verify --anchor` later
// proves the log still extends it. When no head moved it returns the newest
// anchor, and before any event, the zero Anchor. serve calls it every ten
// minutes; anchor writers on several replicas take turns.
func (e *Engine) Anchor(ctx context.Context) (Anchor, error) {
	var out Anchor
	err := e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		prev, err := tx.LatestAnchor(ctx)
		if errors.Is(err, storage.ErrNotFound) {
			prev, err = nil, nil
		}
		if err != nil {
			return err
		}
		heads, err := tx.AnchorHeads(ctx)
		if err != nil {
			return err
		}
		if len(heads) == 0 {
			if prev != nil {
				out = Anchor{Seq: prev.ID, Hash: prev.Hash}
			}
			return nil
		}
		a := &record.AuditAnchor{ID: 1, At: e.now(), Heads: heads}
		if prev != nil {
			a.ID, a.PrevHash = prev.ID+1, prev.Hash
		}
		a.Hash = record.AnchorHash(a)
		e.in.SealAnchor(a)
		if err := tx.InsertAnchor(ctx, a); err != nil {
			return err
		}
		out = Anchor{Seq: a.ID, Hash: a.Hash}
		return e.in.AnchorHead(ctx, tx, a)
	})
	if err != nil {
		return Anchor{}, fmt.Errorf("write an audit anchor: %w", err)
	}
	return out, nil
}

// LastAuditSeq is the seq of the newest audit event (0 for none).
func (e *Engine) LastAuditSeq(ctx context.Context) (int64, error) {
	var seq int64
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		evs, err := tx.AuditEvents(ctx, storage.AuditFilter{Newest: true, Limit: 1})
		if err != nil {
			return err
		}
		if len(evs) > 0 {
			seq = evs[0].Seq
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read the newest audit event: %w", err)
	}
	return seq, nil
}

// VerifyAudit checks the audit log, all of it by seq, and describes the
// first break ("" when intact): the events of the global chain (AuditGlobal,
// written before the log was chained per run) run from seq 1 without gaps,
// each linked to the one before; every later event (AuditPerRun) comes after
// them and is linked to the previous event of its run.
func VerifyAudit(evs []*record.AuditEvent) string {
	prev := ""
	runPrev := map[string]string{}
	var last int64
	perRun := false
	for i, ev := range evs {
		if i > 0 && ev.Seq <= last {
			return fmt.Sprintf("audit event %d comes after event %d: the log was reordered", ev.Seq, last)
		}
		last = ev.Seq
		if ev.Format == record.AuditPerRun {
			if ev.PrevHash != runPrev[ev.RunID] || record.AuditHash(ev) != ev.Hash {
				return fmt.Sprintf("audit chain broken at event %d, of run %s", ev.Seq, ev.RunID)
			}
			runPrev[ev.RunID] = ev.Hash
			perRun = true
			continue
		}
		if perRun {
			return fmt.Sprintf("audit event %d of the older global chain comes after events chained per run: the log was reordered", ev.Seq)
		}
		if ev.Seq != int64(i+1) {
			return fmt.Sprintf("audit event %d missing (found %d)", i+1, ev.Seq)
		}
		if ev.PrevHash != prev || record.AuditHash(ev) != ev.Hash {
			return fmt.Sprintf("audit chain broken at event %d", ev.Seq)
		}
		prev = ev.Hash
	}
	return ""
}
