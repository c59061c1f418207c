package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// Proposal is what an agent or automation submits.
type Proposal struct {
	TaskID         string            `json:"task_id,omitempty"`
	Requester      record.Person     `json:"requester"`
	Summary        string            `json:"summary,omitempty"`
	Actions        []record.Action   `json:"actions"`
	Evidence       []record.Evidence `json:"evidence,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	// CallbackURL, when set, is sent a signed event at each status change of
	// the run (see package callback). It must be allowed by the config.
	CallbackURL string `json:"callback_url,omitempty"`
}

// ParseProposal decodes a proposal strictly: unknown fields and duplicate keys are refused.
func ParseProposal(b []byte) (*Proposal, error) {
	var p Proposal
	if err := DecodeStrict(b, &p); err != nil {
		return nil, refused(record.CodeInvalidInput, "", "invalid proposal: %v", err)
	}
	return &p, nil
}

// normalise validates actions against their schemas and canonicalises their
// arguments and the evidence.
func (gk *gatekeeper) normalise(actions []record.Action, evidence []record.Evidence) ([]record.Action, []record.Evidence, error) {
	if len(actions) == 0 {
		return nil, nil, errors.New("a proposal needs at least one action")
	}
	outA := make([]record.Action, len(actions))
	for i, a := range actions {
		spec, ok := gk.actions[a.Name]
		if !ok {
			return nil, nil, &unknownActionError{actionError{index: i, name: a.Name, field: "name",
				err: fmt.Errorf("unknown action %q (configured: %s)", a.Name, strings.Join(gk.actionNames(), ", "))}}
		}
		if err := spec.Validate(a.Args); err != nil {
			return nil, nil, &actionError{index: i, name: a.Name, field: "args", err: err}
		}
		args, err := jsonvalue.Canonical(a.Args)
		if err != nil {
			return nil, nil, fmt.Errorf("action %d (%s): %w", i+1, a.Name, err)
		}
		outA[i] = record.Action{Name: a.Name, Args: args}
	}
	outE := make([]record.Evidence, len(evidence))
	for i, ev := range evidence {
		if ev.Source == "" {
			return nil, nil, fmt.Errorf("evidence %d: source is required", i+1)
		}
		data := ev.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		c, err := jsonvalue.Canonical(data)
		if err != nil {
			return nil, nil, fmt.Errorf("evidence %d: %w", i+1, err)
		}
		outE[i] = record.Evidence{Source: ev.Source, Data: c}
	}
	return outA, outE, nil
}

// actionNames are the actions this engine may run, sorted.
func (gk *gatekeeper) actionNames() []string {
	names := make([]string, 0, len(gk.actions))
	for name := range gk.actions {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Submit starts a run from a proposal: validate, check, apply policy, and either
// wait for approval or execute. The same idempotency key from the same requester
// with the same proposal returns the first run; with another proposal it is
// refused (ErrIdempotencyKeyReused). Another requester's key is another key.
func (e *Engine) Submit(ctx context.Context, p *Proposal) (*record.Run, error) {
	run, _, err := e.SubmitReplay(ctx, p)
	return run, err
}

// SubmitReplay is Submit that also says whether the run was already there:
// replayed is true when the idempotency key returned the first run instead of
// making a new one (an HTTP API answers 200 instead of 201).
func (e *Engine) SubmitReplay(ctx context.Context, p *Proposal) (run *record.Run, replayed bool, err error) {
	actions, evidence, callbackURL, err := e.checkProposal(ctx, p)
	if err != nil {
		return nil, false, err
	}
	digest, err := proposalDigest(p.TaskID, p.Requester, p.Summary, callbackURL, actions, evidence)
	if err != nil {
		return nil, false, refused(record.CodeInvalidInput, "", "invalid proposal: %v", err)
	}
	if p.IdempotencyKey != "" {
		if run, err := e.runByKey(ctx, p.IdempotencyKey, p.Requester.ID, digest); err == nil || !errors.Is(err, storage.ErrNotFound) {
			run, err = e.continueActive(ctx, run, err)
			return run, err == nil, err
		}
	}
	id := e.runs.NewID("run_")
	st := &record.State{
		SchemaVersion: record.SchemaVersion, RunID: id, Workflow: "proposal", TaskID: p.TaskID,
		Requester: p.Requester, Summary: p.Summary, Actions: actions, Evidence: evidence, Proposed: true,
		CallbackURL: callbackURL,
	}
	l := &runtx.Loaded{Run: &record.Run{ID: id, Workflow: "proposal", TaskID: p.TaskID, RequesterID: p.Requester.ID, IdempotencyKey: p.IdempotencyKey,
		CallbackURL: callbackURL}, State: st}
	if err := e.gates.propose(ctx, l, "", p.Requester.ID); err != nil {
		if errors.Is(err, storage.ErrDuplicate) && p.IdempotencyKey != "" {
			// Another submit with this key committed first.
			run, err := e.runByKey(ctx, p.IdempotencyKey, p.Requester.ID, digest)
			run, err = e.continueActive(ctx, run, err)
			return run, err == nil, err
		}
		return nil, false, err
	}
	e.log.Info("run submitted", "run_id", id, "status", string(l.Run.Status), "actions", len(actions))
	if l.Run.Status == record.StatusExecuting {
		// As a follower: a target that asks for time parks the run for the
		// workers instead of holding the submitter (an HTTP request) here.
		// The run goes on as this write left it (no read of its chain).
		e.runs.HandOn(l)
		run, err := e.resume(ctx, id, asFollower)
		return run, false, err
	}
	return l.Run, false, nil
}

// checkProposal refuses, before anything is written, a proposal Submit cannot
// take, and returns its actions, evidence and callback URL normalised.
func (e *Engine) checkProposal(ctx context.Context, p *Proposal) ([]record.Action, []record.Evidence, string, error) {
	if p.Requester.ID == "" {
		return nil, nil, "", refused(record.CodeInvalidInput, "", "invalid proposal: requester.id is required")
	}
	if field := badText(map[string]string{"task_id": p.TaskID, "requester.id": p.Requester.ID, "requester.name": p.Requester.Name,
		"summary": p.Summary, "idempotency_key": p.IdempotencyKey, "callback_url": p.CallbackURL}); field != "" {
		return nil, nil, "", refused(record.CodeInvalidInput, "", "invalid proposal: %s must be valid UTF-8 text without NUL characters", field)
	}
	if bad := checkLines([]lineField{{"requester.id", p.Requester.ID, true}, {"requester.name", p.Requester.Name, false},
		{"task_id", p.TaskID, true}, {"idempotency_key", p.IdempotencyKey, true}}); bad != nil {
		bad.Msg = "invalid proposal: " + bad.Msg
		return nil, nil, "", bad
	}
	actions, evidence, err := e.gates.normalise(p.Actions, p.Evidence)
	if err != nil {
		// Err keeps the cause, so that ProposalProblems can name each field.
		return nil, nil, "", &record.RefusedError{Code: record.CodeInvalidInput, Msg: fmt.Sprintf("invalid proposal: %v", err), Err: err}
	}
	callbackURL, err := e.checkCallback(p.CallbackURL)
	if err != nil {
		return nil, nil, "", err
	}
	if err := e.checkRequester(ctx, p.Requester.ID); err != nil {
		return nil, nil, "", err
	}
	return actions, evidence, callbackURL, nil
}

// checkRequester refuses a requester who holds no role, unless the engine lets
// anyone propose.
func (e *Engine) checkRequester(ctx context.Context, id string) error {
	if e.anyone {
		return nil
	}
	_, ok, err := e.dir.RoleOf(ctx, id)
	if err != nil {
		return fmt.Errorf("resolve the requester's role: %w", err)
	}
	if !ok {
		return refused(record.CodeUnknownRequester, "", "requester %q holds no role in the config: add them to a role, or let anyone propose (requesters: {allow_unknown: true})", id)
	}
	return nil
}

// badText names the first field that is not text every store can keep (valid
// UTF-8 without NUL: PostgreSQL refuses both), or returns "".
func badText(fields map[string]string) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v := fields[name]
		if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return name
		}
	}
	return ""
}

// continueActive resumes a run found by its idempotency key when a crash left it
// active: the retried submit finishes what the first one started.
func (e *Engine) continueActive(ctx context.Context, run *record.Run, err error) (*record.Run, error) {
	if err != nil || (run.Status != record.StatusRunning && run.Status != record.StatusExecuting) {
		return run, err
	}
	// As a worker: when the first try is still executing the run (in this
	// process or another), the retry returns it as it stands.
	return e.resume(ctx, run.ID, asWorker)
}

// runByKey finds the run requesterID submitted with an idempotency key. A key
// is its requester's: another requester's run under the same key is not
// looked at, so that no proposer can take a key first and lock the one who
// will use it out. The key binds the proposal it was first sent with: a retry
// of the same proposal gets that run, whatever became of it, and a different
// proposal is refused, so that an agent never takes an old run for its new
// proposal.
func (e *Engine) runByKey(ctx context.Context, key, requesterID, digest string) (*record.Run, error) {
	var (
		run    *record.Run
		first  *record.State
		pruned bool
	)
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		if run, err = tx.RunByIdempotencyKey(ctx, requesterID, key); err != nil {
			return err
		}
		cps, err := tx.Checkpoints(ctx, run.ID)
		if err != nil {
			return err
		}
		if len(cps) == 0 {
			return &IntegrityError{RunID: run.ID, Problem: "no checkpoint"}
		}
		if !cps[0].PrunedAt.IsZero() {
			// Retention removed the proposal as submitted: what the key
			// binds can no longer be compared.
			pruned = true
			return nil
		}
		// The first checkpoint holds the proposal as submitted; later ones may
		// carry arguments an approver edited.
		b, err := chain.Resolve(cps, 0)
		if err != nil {
			return &IntegrityError{RunID: run.ID, Seq: cps[0].Seq, Problem: err.Error()}
		}
		if first, err = chain.Decode(b); err != nil {
			return &IntegrityError{RunID: run.ID, Seq: cps[0].Seq, Problem: err.Error()}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find run by idempotency key: %w", err)
	}
	if pruned {
		return nil, &record.RefusedError{Code: record.CodeIdempotencyKeyReused, RunID: run.ID, Err: record.ErrIdempotencyKeyReused,
			Msg: fmt.Sprintf("the idempotency key %q is held by this run, which ended and whose proposal retention has pruned; use a new key", key)}
	}
	held, err := proposalDigest(first.TaskID, first.Requester, first.Summary, first.CallbackURL, first.Actions, first.Evidence)
	if err != nil {
		return nil, &IntegrityError{RunID: run.ID, Seq: 1, Problem: err.Error()}
	}
	if held != digest {
		return nil, &record.RefusedError{Code: record.CodeIdempotencyKeyReused, RunID: run.ID, Err: record.ErrIdempotencyKeyReused,
			Msg: fmt.Sprintf("the idempotency key %q is held by this run, which was submitted with a different proposal; use a new key for a new proposal", key)}
	}
	return run, nil
}

// proposalDigest is what an idempotency key binds: the proposal in canonical
// form, its actions and evidence normalised, the key itself left out. The
// callback URL is part of it (where the outcome goes is part of what was
// asked), left out when empty so that digests of runs stored before callbacks
// stay the same. It is proposalDocDigest's digest, made from canonical parts
// so that the evidence, most of a proposal's bytes, is read once; for
// anything that cannot be made so, proposalDocDigest answers.
func proposalDigest(taskID string, requester record.Person, summary, callbackURL string, actions []record.Action, evidence []record.Evidence) (string, error) {
	whole := func() (string, error) {
		return proposalDocDigest(taskID, requester, summary, callbackURL, actions, evidence)
	}
	evs := make([][]byte, len(evidence))
	for i, ev := range evidence {
		c, ok := jsonvalue.CanonicalEvidence(ev)
		if !ok {
			return whole()
		}
		evs[i] = c
	}
	members := []jsonvalue.Member{{Name: "evidence", Value: jsonvalue.CanonicalArray(evs...)}}
	rest := map[string]any{"task_id": taskID, "requester": requester, "summary": summary, "actions": append([]record.Action{}, actions...)}
	if callbackURL != "" {
		rest["callback_url"] = callbackURL
	}
	for name, v := range rest {
		c, err := jsonvalue.CanonicalOf(v)
		if err != nil {
			return whole()
		}
		members = append(members, jsonvalue.Member{Name: name, Value: c})
	}
	return jsonvalue.DigestCanonical(jsonvalue.CanonicalObject(members...)), nil
}

// proposalDocDigest is the digest of the proposal marshalled whole: the
// definition proposalDigest keeps to, byte for byte.
func proposalDocDigest(taskID string, requester record.Person, summary, callbackURL string, actions []record.Action, evidence []record.Evidence) (string, error) {
	return jsonvalue.DigestOf(struct {
		TaskID      string            `json:"task_id"`
		Requester   record.Person     `json:"requester"`
		Summary     string            `json:"summary"`
		Actions     []record.Action   `json:"actions"`
		Evidence    []record.Evidence `json:"evidence"`
		CallbackURL string            `json:"callback_url,omitempty"`
	}{taskID, requester, summary, append([]record.Action{}, actions...), append([]record.Evidence{}, evidence...), callbackURL})
}
