package workflow

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Directory resolves who a person is on this server: the role they hold. The
// server resolves roles; a role claimed by a client is never trusted.
type Directory interface {
	RoleOf(ctx context.Context, userID string) (role string, ok bool, err error)
}

// Config is what an Engine is built from.
type Config struct {
	Store   Store
	Policy  *Policy
	Roles   *Roles                 // role order (and, without a Directory, membership)
	Dir     Directory              // optional; defaults to Roles' members
	Actions map[string]*ActionSpec // every action the engine may run
	Agents  map[string]Agent       // workflows made of steps, by name
	Clock   Clock                  // defaults to SystemClock
	Logger  *slog.Logger           // defaults to discarding
	// Failpoint, when set, is called at each write boundary with its name
	// (after-step-N, before-decision-commit, after-decision-commit, after-intent,
	// after-effect, after-receipt). Crash tests make it kill the process.
	Failpoint func(name string)
	// CheckAttempts and ExecAttempts bound retries of transient failures.
	CheckAttempts int
	ExecAttempts  int
	// Backoff is the wait before retry n (1-based).
	Backoff func(n int) time.Duration
	// Hooks are told about transitions inside their transaction (the outbox).
	Hooks []Hook
	// Owner names this engine in leases (default host:pid); LeaseTTL is how long
	// a lease lasts without progress (default 30s).
	Owner    string
	LeaseTTL time.Duration
	// Keys seal every record the engine writes and verify what it reads (see
	// Keyring). Without keys nothing is sealed or checked.
	Keys *Keyring
	// MaxRequestLifetime bounds how far extending may push a request's
	// deadline, counted from when the request was made (default 30 days), so
	// that no approval waits for ever by a series of extensions.
	MaxRequestLifetime time.Duration
	// AllowUnknownRequesters lets a requester who holds no role propose. By
	// default such a proposal is refused before anything is written: otherwise
	// anyone who can reach the engine gets what policy lets through unapproved.
	AllowUnknownRequesters bool
	// Changes wakes waiters (WaitRun) after each commit that changes a run;
	// a new hub when nil. Share one between engines on one store, and feed
	// it the commits of other processes, so that a wait wakes for those too.
	Changes *Changes
	// CallbackAllowed says whether a proposal may ask for callbacks to a URL
	// (the config's allow-list); nil allows none. CallbackPrefixes are the
	// allowed prefixes, named in the refusal of any other URL.
	CallbackAllowed  func(url string) bool
	CallbackPrefixes []string
}

// DefaultMaxRequestLifetime is MaxRequestLifetime when the config sets none.
const DefaultMaxRequestLifetime = 30 * 24 * time.Hour

// Hook is told about every transition in the transaction that makes it, so it
// can enqueue outbox rows that commit with the transition or not at all.
type Hook interface {
	OnTransition(ctx context.Context, tx Tx, t Transition) error
}

// Transition is one committed change of a run, as hooks see it.
type Transition struct {
	Run     *Run
	State   *State
	From    Status
	Event   Event // one of Events
	Request *ApprovalRequest
}

// Engine runs workflows durably. It holds no run in memory: every method loads
// what it needs from the store and writes every change back before returning.
type Engine struct {
	store   Store
	policy  *Policy
	roles   *Roles
	dir     Directory
	actions map[string]*ActionSpec
	agents  map[string]Agent
	clock   Clock
	log     *slog.Logger
	fail    func(string)
	checkN  int
	execN   int
	backoff func(int) time.Duration
	hooks   []Hook
	owner   string
	ttl     time.Duration
	maxLife time.Duration
	anyone  bool // AllowUnknownRequesters
	in      *integrity
	changes *Changes
	// cbAllowed and cbPrefixes: Config.CallbackAllowed and CallbackPrefixes.
	cbAllowed  func(string) bool
	cbPrefixes []string
}

// New builds an engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil || cfg.Policy == nil || cfg.Roles == nil {
		return nil, errors.New("new engine: store, policy and roles are required")
	}
	e := &Engine{
		store: cfg.Store, policy: cfg.Policy, roles: cfg.Roles, dir: cfg.Dir,
		actions: cfg.Actions, agents: cfg.Agents, clock: cfg.Clock, log: cfg.Logger,
		fail: cfg.Failpoint, checkN: cfg.CheckAttempts, execN: cfg.ExecAttempts,
		backoff: cfg.Backoff, hooks: cfg.Hooks, owner: cfg.Owner, ttl: cfg.LeaseTTL,
		maxLife:   cfg.MaxRequestLifetime,
		anyone:    cfg.AllowUnknownRequesters,
		cbAllowed: cfg.CallbackAllowed, cbPrefixes: cfg.CallbackPrefixes,
	}
	if e.maxLife <= 0 {
		e.maxLife = DefaultMaxRequestLifetime
	}
	e.in = &integrity{keys: cfg.Keys}
	e.changes = cfg.Changes
	if e.changes == nil {
		e.changes = NewChanges()
	}
	e.store = &notifyingStore{Store: &sealedStore{Store: cfg.Store, in: e.in}, changes: e.changes}
	if e.owner == "" {
		host, _ := os.Hostname()
		e.owner = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if e.ttl <= 0 {
		e.ttl = 30 * time.Second
	}
	if e.dir == nil {
		e.dir = rolesDirectory{cfg.Roles}
	}
	if e.clock == nil {
		e.clock = SystemClock{}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.fail == nil {
		e.fail = func(string) {}
	}
	if e.checkN <= 0 {
		e.checkN = 3
	}
	if e.execN <= 0 {
		e.execN = 3
	}
	if e.backoff == nil {
		e.backoff = func(n int) time.Duration { return time.Duration(n*n) * 200 * time.Millisecond }
	}
	if e.actions == nil {
		e.actions = map[string]*ActionSpec{}
	}
	return e, nil
}

type rolesDirectory struct{ r *Roles }

func (d rolesDirectory) RoleOf(_ context.Context, userID string) (string, bool, error) {
	role, ok := d.r.RoleOf(userID)
	return role, ok, nil
}

// Store returns the engine's store.
func (e *Engine) Store() Store { return e.store }

// Policy returns the policy in force.
func (e *Engine) Policy() *Policy { return e.policy }

// Roles returns the role order.
func (e *Engine) Roles() *Roles { return e.roles }

// Owner is the name this engine's leases carry: Config.Owner, or host:pid.
func (e *Engine) Owner() string { return e.owner }

// Action returns the spec of a named action.
func (e *Engine) Action(name string) (*ActionSpec, bool) {
	s, ok := e.actions[name]
	return s, ok
}

// now is the engine's time, at the precision the store keeps.
func (e *Engine) now() time.Time { return e.clock.Now().UTC().Truncate(time.Millisecond) }

// newID makes an id that sorts by creation time (milliseconds, then a process-wide
// counter), with random bits so that ids made by different processes never meet.
// Stores list records by (created_at, id), so records made in the same
// millisecond keep the order they were made in.
func (e *Engine) newID(prefix string) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], uint64(e.now().UnixMilli())<<16|uint64(idSeq.Add(1)&0xffff))
	if _, err := rand.Read(b[8:]); err != nil {
		panic(fmt.Sprintf("read random: %v", err)) // crypto/rand does not fail on supported platforms
	}
	return prefix + hex.EncodeToString(b[:])
}

var idSeq atomic.Uint32

// loaded is a run as read in one transaction: its row, its verified latest state
// and the hash the next checkpoint links to.
type loaded struct {
	run      *Run
	st       *State
	lastHash string
	// state is the encoded state of the latest checkpoint, as loaded or as
	// save wrote it, and committed says that the write holding it committed:
	// then the run is known as stored, and need not be verified again.
	state     []byte
	committed bool
	// spare is state decoded and held by nobody else, for loadHeld to hand
	// out once instead of decoding state again.
	spare *State
	// chain is the checkpoints load verified (nil from loadHeld's shortcut).
	chain []*Checkpoint
	// fps holds the fingerprints of state computed so far, by risk and policy
	// revision: a decision computes its run's before its write, and the write
	// transaction, which concurrent Updates share, takes it from here.
	fps map[fpKey]string
	// base is what the next checkpoint is written against: the latest
	// checkpoint that holds a whole state (nil: the next one holds its own).
	base *stateBase
	// more is what was read with the run besides its checkpoints, in the
	// same transaction (see RunParts); more.Run is nil when nothing was.
	more RunBundle
	read RunParts
}

type fpKey struct {
	risk     Risk
	revision string
}

// fingerprint is fingerprintOf(l.st, risk, revision), computed once per
// state: loadHeld hands the ones of a state it did not change on.
func (l *loaded) fingerprint(risk Risk, revision string) (string, error) {
	k := fpKey{risk, revision}
	if fp, ok := l.fps[k]; ok {
		return fp, nil
	}
	fp, err := fingerprintOf(l.st, risk, revision)
	if err != nil {
		return "", err
	}
	if l.fps == nil {
		l.fps = map[fpKey]string{}
	}
	l.fps[k] = fp
	return fp, nil
}

// baseOf is the base for the checkpoint after cps (verified): the latest
// one that holds a whole state.
func baseOf(cps []*Checkpoint) *stateBase {
	c := cps[len(cps)-1]
	if c.BaseSeq != 0 {
		c = cps[c.BaseSeq-1]
	}
	if c.State == nil {
		return nil
	}
	return &stateBase{seq: c.Seq, state: c.State}
}

// load reads a run and verifies its checkpoint chain.
func (e *Engine) load(ctx context.Context, tx Tx, id string) (*loaded, error) {
	return e.loadWith(ctx, tx, id, RunParts{})
}

// loadWith is load that also reads the run's records extra asks for, in the
// same round trip (see Tx.LoadRun), for the caller to use from l.more.
func (e *Engine) loadWith(ctx context.Context, tx Tx, id string, extra RunParts) (*loaded, error) {
	extra.Checkpoints = true
	b, err := tx.LoadRun(ctx, id, extra)
	if errors.Is(err, ErrNotFound) {
		return nil, UnknownRun(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, err)
	}
	run, cps := b.Run, b.Checkpoints
	// The chain first, so that accidental damage is named as such; then the
	// seals, which catch a chain someone recomputed.
	st, full, err := verifyChain(id, cps)
	if err != nil {
		return &loaded{run: run}, err
	}
	if err := e.in.checkRun(ctx, tx, id, cps, nil, nil, nil); err != nil {
		return &loaded{run: run}, err
	}
	if int64(len(cps)) != run.Seq {
		return &loaded{run: run}, &IntegrityError{RunID: id, Problem: fmt.Sprintf("run row says checkpoint %d but the chain ends at %d", run.Seq, len(cps))}
	}
	if st.Status != run.Status && run.Status != StatusNeedsAttention {
		return &loaded{run: run}, &IntegrityError{RunID: id, Problem: fmt.Sprintf("run row says %s but its checkpoint says %s", run.Status, st.Status)}
	}
	if st.CallbackURL != run.CallbackURL {
		return &loaded{run: run}, &IntegrityError{RunID: id, Problem: callbackMismatch}
	}
	b.Checkpoints = nil
	extra.Checkpoints = false
	return &loaded{run: run, st: st, lastHash: cps[len(cps)-1].Hash, state: full, chain: cps, base: baseOf(cps), more: *b, read: extra}, nil
}

// loadHeld is load for a run held from a committed write or an earlier read
// (held, or nil): when the run row still has the version, checkpoint and
// status held, nobody has written the run since (every write bumps the
// version), so the chain verified then is still the stored one and only the
// row is read (with extra, in the same round trip). Anything else is loaded
// and verified afresh.
func (e *Engine) loadHeld(ctx context.Context, tx Tx, id string, held *loaded, extra RunParts) (*loaded, error) {
	if held == nil || !held.committed || held.state == nil {
		return e.loadWith(ctx, tx, id, extra)
	}
	extra.Checkpoints = false
	b, err := tx.LoadRun(ctx, id, extra)
	if err != nil || b.Run.Version != held.run.Version || b.Run.Seq != held.run.Seq || b.Run.Status != held.run.Status {
		return e.loadWith(ctx, tx, id, extra)
	}
	run := b.Run
	// A state of its own (spare, or decoded from the bytes stored), so that
	// it is exactly what a load would give and a caller's changes stay its own.
	st := held.spare
	held.spare = nil
	if st == nil {
		if st, err = DecodeState(held.state); err != nil {
			return &loaded{run: run}, &IntegrityError{RunID: id, Seq: run.Seq, Problem: err.Error()}
		}
	}
	return &loaded{run: run, st: st, lastHash: held.lastHash, state: held.state, fps: held.fps, base: held.base, more: *b, read: extra}, nil
}

// save writes l's run row (compare-and-set), a new checkpoint of l.st, the
// approval request when it is new, and an audit event, all in tx, and tells the hooks.
// The checkpoint is written against l.base when that saves at least half
// of the state (see stateBase.delta), and becomes the next base otherwise.
func (e *Engine) save(ctx context.Context, tx Tx, l *loaded, from Status, event Event, actor string, detail any, req *ApprovalRequest) error {
	now := e.now()
	l.st.SchemaVersion = SchemaVersion
	l.st.Status = l.run.Status
	l.st.Step = l.run.Step
	l.st.Reason = l.run.Reason
	b, err := EncodeState(l.st)
	if err != nil {
		return err
	}
	stored, baseSeq := b, int64(0)
	if l.base != nil {
		d, ok, err := l.base.delta(b)
		if err != nil {
			return fmt.Errorf("encode checkpoint %d of run %s: %w", l.run.Seq+1, l.run.ID, err)
		}
		if ok {
			stored, baseSeq = d, l.base.seq
		}
	}
	cp := &Checkpoint{RunID: l.run.ID, Seq: l.run.Seq + 1, SchemaVersion: SchemaVersion, State: stored, BaseSeq: baseSeq, PrevHash: l.lastHash, CreatedAt: now}
	cp.Hash = CheckpointHash(cp)
	l.state = b
	l.run.Seq = cp.Seq
	l.run.UpdatedAt = now
	e.lease(l.run, event, now)
	if l.run.Version == 0 {
		l.run.CreatedAt = now
		if err := tx.InsertRun(ctx, l.run); err != nil {
			return fmt.Errorf("insert run %s: %w", l.run.ID, err)
		}
	} else if err := tx.UpdateRun(ctx, l.run); err != nil {
		return fmt.Errorf("update run %s: %w", l.run.ID, err)
	}
	if err := tx.AppendCheckpoint(ctx, cp); err != nil {
		return fmt.Errorf("append checkpoint %d of run %s: %w", cp.Seq, l.run.ID, err)
	}
	l.lastHash = cp.Hash
	if baseSeq == 0 {
		l.base = &stateBase{seq: cp.Seq, state: b}
	}
	if req != nil && req.Version == 0 {
		if err := tx.InsertRequest(ctx, req); err != nil {
			return fmt.Errorf("insert approval request of run %s: %w", l.run.ID, err)
		}
	}
	if err := e.auditCheckpoint(ctx, tx, cp, actor, event, detail); err != nil {
		return err
	}
	for _, h := range e.hooks {
		if err := h.OnTransition(ctx, tx, Transition{Run: l.run, State: l.st, From: from, Event: event, Request: req}); err != nil {
			return fmt.Errorf("%s hook of run %s: %w", event, l.run.ID, err)
		}
	}
	return nil
}

// write runs fn, which saves l, in one Update, and notes whether it
// committed: only then is l the run as stored.
func (e *Engine) write(ctx context.Context, l *loaded, fn func(ctx context.Context, tx Tx) error) error {
	l.committed = false
	err := e.store.Update(ctx, fn)
	l.committed = err == nil
	return err
}

// lease keeps the lease of an active run with whoever makes progress on it, so
// that workers leave it alone, and frees it when the run stops being active. A
// valid lease of another owner is left in place: the compare-and-set on the
// version is what fences writers, the lease only spares duplicate work.
func (e *Engine) lease(r *Run, event Event, now time.Time) {
	// A decision hands the run on: the decider (a click handler) does not
	// execute, so the lease is left free for whichever worker comes first.
	if r.Status != StatusRunning && r.Status != StatusExecuting || event == EventDecided || event == EventEdited {
		r.LeaseOwner, r.LeaseUntil = "", time.Time{}
		return
	}
	if r.LeaseOwner == e.owner || !now.Before(r.LeaseUntil) {
		r.LeaseOwner, r.LeaseUntil = e.owner, now.Add(e.ttl)
	}
}

// Work claims active runs whose lease is free (a crashed process's, or approved
// runs nobody is executing) and resumes them, one claim at a time so that a
// lease is never left ticking while the runs claimed before it are worked on.
// It stops after limit runs or when none is free, and returns how many it
// claimed. Servers call it in a loop; several replicas may share one store.
func (e *Engine) Work(ctx context.Context, limit int) (int, error) {
	var errs []error
	n := 0
	for ; n < limit; n++ {
		var runs []*Run
		err := e.store.Update(ctx, func(ctx context.Context, tx Tx) error {
			now := e.now()
			var err error
			runs, err = tx.ClaimRuns(ctx, e.owner, []Status{StatusExecuting, StatusRunning}, now, now.Add(e.ttl), 1)
			return err
		})
		if err != nil {
			return n, errors.Join(append(errs, fmt.Errorf("claim runs: %w", err))...)
		}
		if len(runs) == 0 {
			break
		}
		if _, err := e.Resume(ctx, runs[0].ID); err != nil && !errors.Is(err, ErrConflict) {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

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
		run.Status, run.Reason, run.UpdatedAt = StatusNeedsAttention, reason, e.now()
		if err := tx.UpdateRun(ctx, run); err != nil {
			return fmt.Errorf("update run %s: %w", id, err)
		}
		if err := e.audit(ctx, tx, id, "signoff", EventNeedsAttention, map[string]string{"from": string(from), "reason": reason}); err != nil {
			return err
		}
		// The state may be unreadable, so hooks get the run row only.
		for _, h := range e.hooks {
			if err := h.OnTransition(ctx, tx, Transition{Run: run, From: from, Event: EventNeedsAttention}); err != nil {
				return fmt.Errorf("needs_attention hook of run %s: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put run %s in needs_attention: %w", id, err)
	}
	e.log.Warn("run needs attention", "run_id", id, "reason", reason)
	return nil
}

// view loads a run in a read-only transaction; an integrity problem puts the run
// in needs_attention and is returned.
func (e *Engine) view(ctx context.Context, id string) (*loaded, error) {
	return e.reload(ctx, id, nil)
}

// reload is view for a run this engine may hold from its own last write
// (held, or nil; see loadHeld). Writes still compare-and-set the version, so
// a held run never wins a write it should not.
func (e *Engine) reload(ctx context.Context, id string, held *loaded) (*loaded, error) {
	// What executing the run will read next comes in the same round trip:
	// its operations, and with keys what is checked before a call.
	var extra RunParts
	if held == nil || held.run.Status == StatusExecuting {
		extra.Operations = true
		extra.Requests, extra.Decisions, extra.Audit = e.in.keys != nil, e.in.keys != nil, e.in.keys != nil
	}
	var l *loaded
	err := e.store.View(ctx, func(ctx context.Context, tx Tx) error {
		var err error
		l, err = e.loadHeld(ctx, tx, id, held, extra)
		return err
	})
	var ie *IntegrityError
	if errors.As(err, &ie) {
		if aerr := e.attention(ctx, id, ie.Error()); aerr != nil {
			return nil, errors.Join(err, aerr)
		}
		return nil, err
	}
	return l, err
}

// Proposal is what an agent or automation submits.
type Proposal struct {
	TaskID         string     `json:"task_id,omitempty"`
	Requester      Person     `json:"requester"`
	Summary        string     `json:"summary,omitempty"`
	Actions        []Action   `json:"actions"`
	Evidence       []Evidence `json:"evidence,omitempty"`
	IdempotencyKey string     `json:"idempotency_key,omitempty"`
	// CallbackURL, when set, is sent a signed event at each status change of
	// the run (see package callback). It must be allowed by the config.
	CallbackURL string `json:"callback_url,omitempty"`
}

// ParseProposal decodes a proposal strictly: unknown fields and duplicate keys are refused.
func ParseProposal(b []byte) (*Proposal, error) {
	var p Proposal
	if err := DecodeStrict(b, &p); err != nil {
		return nil, refused(CodeInvalidInput, "", "invalid proposal: %v", err)
	}
	return &p, nil
}

// normalise validates actions against their schemas and canonicalises their
// arguments and the evidence.
func (e *Engine) normalise(actions []Action, evidence []Evidence) ([]Action, []Evidence, error) {
	if len(actions) == 0 {
		return nil, nil, errors.New("a proposal needs at least one action")
	}
	outA := make([]Action, len(actions))
	for i, a := range actions {
		spec, ok := e.actions[a.Name]
		if !ok {
			return nil, nil, &unknownActionError{actionError{index: i, name: a.Name, field: "name",
				err: fmt.Errorf("unknown action %q (configured: %s)", a.Name, strings.Join(e.actionNames(), ", "))}}
		}
		if err := spec.Validate(a.Args); err != nil {
			return nil, nil, &actionError{index: i, name: a.Name, field: "args", err: err}
		}
		args, err := Canonical(a.Args)
		if err != nil {
			return nil, nil, fmt.Errorf("action %d (%s): %w", i+1, a.Name, err)
		}
		outA[i] = Action{Name: a.Name, Args: args}
	}
	outE := make([]Evidence, len(evidence))
	for i, ev := range evidence {
		if ev.Source == "" {
			return nil, nil, fmt.Errorf("evidence %d: source is required", i+1)
		}
		data := ev.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		c, err := Canonical(data)
		if err != nil {
			return nil, nil, fmt.Errorf("evidence %d: %w", i+1, err)
		}
		outE[i] = Evidence{Source: ev.Source, Data: c}
	}
	return outA, outE, nil
}

// actionNames are the actions this engine may run, sorted.
func (e *Engine) actionNames() []string {
	names := make([]string, 0, len(e.actions))
	for name := range e.actions {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Submit starts a run from a proposal: validate, check, apply policy, and either
// wait for approval or execute. The same idempotency key with the same proposal
// returns the first run; with another proposal it is refused (ErrIdempotencyKeyReused).
func (e *Engine) Submit(ctx context.Context, p *Proposal) (*Run, error) {
	run, _, err := e.SubmitReplay(ctx, p)
	return run, err
}

// SubmitReplay is Submit that also says whether the run was already there:
// replayed is true when the idempotency key returned the first run instead of
// making a new one (an HTTP API answers 200 instead of 201).
func (e *Engine) SubmitReplay(ctx context.Context, p *Proposal) (run *Run, replayed bool, err error) {
	actions, evidence, err := e.checkProposal(ctx, p)
	if err != nil {
		return nil, false, err
	}
	digest, err := proposalDigest(p.TaskID, p.Requester, p.Summary, p.CallbackURL, actions, evidence)
	if err != nil {
		return nil, false, refused(CodeInvalidInput, "", "invalid proposal: %v", err)
	}
	if p.IdempotencyKey != "" {
		if run, err := e.runByKey(ctx, p.IdempotencyKey, digest); err == nil || !errors.Is(err, ErrNotFound) {
			run, err = e.continueActive(ctx, run, err)
			return run, err == nil, err
		}
	}
	id := e.newID("run_")
	st := &State{
		SchemaVersion: SchemaVersion, RunID: id, Workflow: "proposal", TaskID: p.TaskID,
		Requester: p.Requester, Summary: p.Summary, Actions: actions, Evidence: evidence, Proposed: true,
		CallbackURL: p.CallbackURL,
	}
	l := &loaded{run: &Run{ID: id, Workflow: "proposal", TaskID: p.TaskID, RequesterID: p.Requester.ID, IdempotencyKey: p.IdempotencyKey,
		CallbackURL: p.CallbackURL}, st: st}
	if err := e.propose(ctx, l, "", p.Requester.ID); err != nil {
		if errors.Is(err, ErrDuplicate) && p.IdempotencyKey != "" {
			// Another submit with this key committed first.
			run, err := e.runByKey(ctx, p.IdempotencyKey, digest)
			run, err = e.continueActive(ctx, run, err)
			return run, err == nil, err
		}
		return nil, false, err
	}
	e.log.Info("run submitted", "run_id", id, "status", string(l.run.Status), "actions", len(actions))
	if l.run.Status == StatusExecuting {
		run, err := e.Resume(ctx, id)
		return run, false, err
	}
	return l.run, false, nil
}

// checkProposal refuses, before anything is written, a proposal Submit cannot
// take, and returns its actions and evidence normalised.
func (e *Engine) checkProposal(ctx context.Context, p *Proposal) ([]Action, []Evidence, error) {
	if p.Requester.ID == "" {
		return nil, nil, refused(CodeInvalidInput, "", "invalid proposal: requester.id is required")
	}
	if field := badText(map[string]string{"task_id": p.TaskID, "requester.id": p.Requester.ID, "requester.name": p.Requester.Name,
		"summary": p.Summary, "idempotency_key": p.IdempotencyKey, "callback_url": p.CallbackURL}); field != "" {
		return nil, nil, refused(CodeInvalidInput, "", "invalid proposal: %s must be valid UTF-8 text without NUL characters", field)
	}
	if bad := checkLines([]lineField{{"requester.id", p.Requester.ID, true}, {"requester.name", p.Requester.Name, false},
		{"task_id", p.TaskID, true}, {"idempotency_key", p.IdempotencyKey, true}}); bad != nil {
		bad.Msg = "invalid proposal: " + bad.Msg
		return nil, nil, bad
	}
	actions, evidence, err := e.normalise(p.Actions, p.Evidence)
	if err != nil {
		// Err keeps the cause, so that ProposalProblems can name each field.
		return nil, nil, &RefusedError{Code: CodeInvalidInput, Msg: fmt.Sprintf("invalid proposal: %v", err), Err: err}
	}
	if err := e.checkCallback(p.CallbackURL); err != nil {
		return nil, nil, err
	}
	if err := e.checkRequester(ctx, p.Requester.ID); err != nil {
		return nil, nil, err
	}
	return actions, evidence, nil
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
		return refused(CodeUnknownRequester, "", "requester %q holds no role in the config: add them to a role, or let anyone propose (requesters: {allow_unknown: true})", id)
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
func (e *Engine) continueActive(ctx context.Context, run *Run, err error) (*Run, error) {
	if err != nil || (run.Status != StatusRunning && run.Status != StatusExecuting) {
		return run, err
	}
	return e.Resume(ctx, run.ID)
}

// runByKey finds the run submitted with an idempotency key. The key binds the
// proposal it was first sent with: a retry of the same proposal gets that run,
// whatever became of it, and a different proposal is refused, so that an agent
// never takes an old run for its new proposal.
func (e *Engine) runByKey(ctx context.Context, key, digest string) (*Run, error) {
	var run *Run
	var first *State
	err := e.store.View(ctx, func(ctx context.Context, tx Tx) error {
		var err error
		if run, err = tx.RunByIdempotencyKey(ctx, key); err != nil {
			return err
		}
		cps, err := tx.Checkpoints(ctx, run.ID)
		if err != nil {
			return err
		}
		if len(cps) == 0 {
			return &IntegrityError{RunID: run.ID, Problem: "no checkpoint"}
		}
		// The first checkpoint holds the proposal as submitted; later ones may
		// carry arguments an approver edited.
		b, err := ResolveState(cps, 0)
		if err != nil {
			return &IntegrityError{RunID: run.ID, Seq: cps[0].Seq, Problem: err.Error()}
		}
		if first, err = DecodeState(b); err != nil {
			return &IntegrityError{RunID: run.ID, Seq: cps[0].Seq, Problem: err.Error()}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find run by idempotency key: %w", err)
	}
	held, err := proposalDigest(first.TaskID, first.Requester, first.Summary, first.CallbackURL, first.Actions, first.Evidence)
	if err != nil {
		return nil, &IntegrityError{RunID: run.ID, Seq: 1, Problem: err.Error()}
	}
	if held != digest {
		return nil, &RefusedError{Code: CodeIdempotencyKeyReused, RunID: run.ID, Err: ErrIdempotencyKeyReused,
			Msg: fmt.Sprintf("the idempotency key %q is held by this run, which was submitted with a different proposal; use a new key for a new proposal", key)}
	}
	return run, nil
}

// proposalDigest is what an idempotency key binds: the proposal in canonical
// form, its actions and evidence normalised, the key itself left out. The
// callback URL is part of it (where the outcome goes is part of what was
// asked), left out when empty so that digests of runs stored before callbacks
// stay the same.
func proposalDigest(taskID string, requester Person, summary, callbackURL string, actions []Action, evidence []Evidence) (string, error) {
	return digestOf(struct {
		TaskID      string     `json:"task_id"`
		Requester   Person     `json:"requester"`
		Summary     string     `json:"summary"`
		Actions     []Action   `json:"actions"`
		Evidence    []Evidence `json:"evidence"`
		CallbackURL string     `json:"callback_url,omitempty"`
	}{taskID, requester, summary, append([]Action{}, actions...), append([]Evidence{}, evidence...), callbackURL})
}

// Start starts an agent workflow on a task. Its steps run until it proposes.
func (e *Engine) Start(ctx context.Context, workflow, taskID string, requester Person) (*Run, error) {
	if _, ok := e.agents[workflow]; !ok {
		return nil, refused(CodeInvalidInput, "", "unknown workflow %q", workflow)
	}
	if requester.ID == "" {
		return nil, refused(CodeInvalidInput, "", "a requester id is required")
	}
	if bad := checkLines([]lineField{{"requester id", requester.ID, true}, {"requester name", requester.Name, false}, {"task id", taskID, true}}); bad != nil {
		return nil, bad
	}
	if err := e.checkRequester(ctx, requester.ID); err != nil {
		return nil, err
	}
	id := e.newID("run_")
	l := &loaded{
		run: &Run{ID: id, Workflow: workflow, TaskID: taskID, Status: StatusRunning, RequesterID: requester.ID},
		st:  &State{SchemaVersion: SchemaVersion, RunID: id, Workflow: workflow, TaskID: taskID, Requester: requester},
	}
	err := e.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		return e.save(ctx, tx, l, "", EventStarted, requester.ID, map[string]string{"workflow": workflow, "task_id": taskID}, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("start run: %w", err)
	}
	return e.Resume(ctx, id)
}

// Resume continues whatever the run was doing: the next steps, the proposal, an
// expiry that is due, or the execution of approved actions (reconciling any
// operation whose outcome a crash left unknown). It returns the run as it stands.
func (e *Engine) Resume(ctx context.Context, id string) (*Run, error) {
	return e.resume(ctx, id, false)
}

// Follow is Resume for the one who just moved the run on (a decision that
// completed the quorum): it executes the run unless a worker took it first.
// While another holds the run's lease it calls nothing, so that the two never
// attempt the same operation at once; it looks again every lookEvery and
// carries on when the run ends, stops executing, or the lease lapses (its
// holder died). Resume, by contrast, is an operator's "do it now".
func (e *Engine) Follow(ctx context.Context, id string) (*Run, error) {
	return e.resume(ctx, id, true)
}

// lookEvery is how often Follow reads a run that another holds.
const lookEvery = 20 * time.Millisecond

func (e *Engine) resume(ctx context.Context, id string, follow bool) (*Run, error) {
	var held *loaded
	for {
		l, err := e.reload(ctx, id, held)
		if err != nil {
			if IsRefused(err) {
				return nil, err
			}
			var ie *IntegrityError
			if errors.As(err, &ie) {
				return e.getRun(ctx, id)
			}
			return nil, err
		}
		held = l
		switch l.run.Status {
		case StatusRunning:
			if l.st.Proposed {
				if err := e.propose(ctx, l, StatusRunning, "signoff"); err != nil {
					return nil, err
				}
				continue
			}
			if err := e.step(ctx, l); err != nil {
				return nil, err
			}
		case StatusWaitingApproval:
			if !l.run.Deadline.IsZero() && !e.now().Before(l.run.Deadline) {
				if err := e.expire(ctx, id, "signoff"); err != nil && !errors.Is(err, ErrConflict) {
					return nil, err
				}
				continue
			}
			return l.run, nil
		case StatusExecuting:
			if now := e.now(); follow && l.run.LeaseOwner != "" && l.run.LeaseOwner != e.owner && now.Before(l.run.LeaseUntil) {
				if err := e.clock.Sleep(ctx, min(lookEvery, l.run.LeaseUntil.Sub(now))); err != nil {
					return nil, err
				}
				continue
			}
			if err := e.executeNext(ctx, l); err != nil {
				return nil, err
			}
		default:
			return l.run, nil
		}
	}
}

func (e *Engine) getRun(ctx context.Context, id string) (*Run, error) {
	var run *Run
	err := e.store.View(ctx, func(ctx context.Context, tx Tx) error {
		var err error
		run, err = tx.Run(ctx, id)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, UnknownRun(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, err)
	}
	return run, nil
}

// step runs one agent step and checkpoints it.
func (e *Engine) step(ctx context.Context, l *loaded) error {
	agent, ok := e.agents[l.run.Workflow]
	if !ok {
		return e.attention(ctx, l.run.ID, fmt.Sprintf("unknown workflow %q: this build cannot continue it", l.run.Workflow))
	}
	before, err := EncodeState(l.st)
	if err != nil {
		return err
	}
	done, err := agent.Step(ctx, l.st)
	if err != nil {
		// A failed step leaves nothing behind: whatever it wrote into the state is
		// dropped, so that a retry starts from the same checkpoint.
		st, derr := DecodeState(before)
		if derr != nil {
			return fmt.Errorf("restore state of run %s: %w", l.run.ID, derr)
		}
		l.st = st
	}
	if err != nil && isCtxErr(err) {
		return fmt.Errorf("run %s step %d: %w", l.run.ID, l.run.Step+1, err) // stopping, not failing
	}
	if err != nil && Classify(err) != ClassPermanent {
		// A step has no side effects, so a later resume runs it again; the count
		// of failures in a row is kept so that a step that never succeeds ends up
		// with a person instead of being retried for ever.
		l.st.StepFailures++
		failures := l.st.StepFailures
		if failures < maxStepFailures {
			serr := e.write(ctx, l, func(ctx context.Context, tx Tx) error {
				return e.save(ctx, tx, l, StatusRunning, EventStepFailed, "signoff", map[string]any{"step": l.run.Step + 1, "failures": failures, "error": err.Error()}, nil)
			})
			return errors.Join(fmt.Errorf("run %s step %d: %w", l.run.ID, l.run.Step+1, err), serr)
		}
		l.run.Status, l.run.Reason = StatusNeedsAttention, fmt.Sprintf("step %d failed %d times in a row: %v", l.run.Step+1, failures, err)
		return e.write(ctx, l, func(ctx context.Context, tx Tx) error {
			return e.save(ctx, tx, l, StatusRunning, EventNeedsAttention, "signoff", map[string]string{"reason": l.run.Reason}, nil)
		})
	}
	if err != nil {
		l.run.Status, l.run.Reason = StatusFailed, fmt.Sprintf("step %d failed: %v", l.run.Step+1, err)
		return e.write(ctx, l, func(ctx context.Context, tx Tx) error {
			return e.save(ctx, tx, l, StatusRunning, EventFailed, "signoff", map[string]string{"reason": l.run.Reason}, nil)
		})
	}
	l.st.StepFailures = 0
	l.run.Step++
	l.st.Proposed = done
	err = e.write(ctx, l, func(ctx context.Context, tx Tx) error {
		return e.save(ctx, tx, l, StatusRunning, EventStep, "signoff", map[string]any{"step": l.run.Step, "model_calls": l.st.ModelCalls}, nil)
	})
	if err != nil {
		return fmt.Errorf("checkpoint step %d of run %s: %w", l.run.Step, l.run.ID, err)
	}
	e.fail(fmt.Sprintf("after-step-%d", l.run.Step))
	return nil
}

// maxStepFailures is how many times in a row a step may fail (without saying
// it is permanent) before the run is handed to a person.
const maxStepFailures = 5

// propose runs the checks (read-only, in parallel, joined once) and the policy
// over a proposal and records the outcome: failed, executing, or
// waiting_approval with an approval request. from is "" for a new run.
func (e *Engine) propose(ctx context.Context, l *loaded, from Status, actor string) error {
	st := l.st
	if len(st.Actions) == 0 {
		l.run.Status, l.run.Reason = StatusDone, "nothing to do: the proposal has no actions"
		return e.write(ctx, l, func(ctx context.Context, tx Tx) error {
			return e.save(ctx, tx, l, from, EventFinished, actor, map[string]string{"reason": l.run.Reason}, nil)
		})
	}
	event := EventSubmitted
	if from != "" {
		event = EventProposed
		actions, evidence, err := e.normalise(st.Actions, st.Evidence)
		if err != nil {
			l.run.Status, l.run.Reason = StatusFailed, "invalid proposal: "+err.Error()
			return e.write(ctx, l, func(ctx context.Context, tx Tx) error {
				return e.save(ctx, tx, l, from, EventFailed, actor, map[string]string{"reason": l.run.Reason}, nil)
			})
		}
		st.Actions, st.Evidence = actions, evidence
	}
	st.Checks = e.runChecks(ctx, st.Actions)
	for _, c := range st.Checks {
		if !c.OK {
			l.run.Status = StatusFailed
			l.run.Reason = fmt.Sprintf("check failed for action %d (%s): %s", c.Action+1, c.Name, c.Error)
			return e.write(ctx, l, func(ctx context.Context, tx Tx) error {
				return e.save(ctx, tx, l, from, EventFailed, actor, map[string]string{"reason": l.run.Reason}, nil)
			})
		}
	}
	gate, err := e.gate(ctx, st)
	if err != nil {
		l.run.Status, l.run.Reason = StatusNeedsAttention, "policy could not decide: "+err.Error()
		return e.write(ctx, l, func(ctx context.Context, tx Tx) error {
			return e.save(ctx, tx, l, from, EventNeedsAttention, actor, map[string]string{"reason": l.run.Reason}, nil)
		})
	}
	st.Gate = gate
	l.run.Fingerprint = gate.Fingerprint
	var req *ApprovalRequest
	if gate.Approval == nil {
		l.run.Status = StatusExecuting
	} else {
		l.run.Status = StatusWaitingApproval
		l.run.Deadline = *gate.Deadline
		req = e.newRequest(l, gate)
	}
	return e.write(ctx, l, func(ctx context.Context, tx Tx) error {
		return e.save(ctx, tx, l, from, event, actor, map[string]any{
			"status": l.run.Status, "rule": gate.Rule, "risk": gate.Risk, "fingerprint": gate.Fingerprint,
		}, req)
	})
}

func (e *Engine) newRequest(l *loaded, g *Gate) *ApprovalRequest {
	return &ApprovalRequest{
		ID: g.RequestID, RunID: l.run.ID, Fingerprint: g.Fingerprint, Rule: g.Rule,
		PolicyRevision: g.PolicyRevision, Risk: g.Risk, Role: g.Approval.Role, Count: g.Approval.Count,
		SelfApproval: g.Approval.SelfApproval, Edit: g.Approval.Edit, RequesterID: l.st.Requester.ID,
		Deadline: *g.Deadline, Status: RequestPending, CreatedAt: e.now(),
	}
}

// gate applies policy to every action; the strictest outcome binds the proposal.
func (e *Engine) gate(ctx context.Context, st *State) (*Gate, error) {
	g, _, _, err := e.outcomes(ctx, st)
	if err != nil {
		return nil, err
	}
	if st.ForkedFrom != nil && g.Approval == nil {
		// A fork repeats what its source proposed, under a new idempotency key:
		// it always needs a person, and fails closed to the highest role.
		names := e.roles.Names()
		g.Approval = &ApprovalSpec{Role: names[len(names)-1], Count: 1, Expires: Seconds(72 * 3600)}
		g.Rule += " (fork of " + st.ForkedFrom.RunID + ")"
	}
	fp, err := fingerprintOf(st, g.Risk, g.PolicyRevision)
	if err != nil {
		return nil, err
	}
	g.Fingerprint = fp
	if g.Approval != nil {
		d := e.now().Add(g.Approval.Expires.Duration())
		g.Deadline = &d
		g.RequestID = e.newID("req_")
	}
	return g, nil
}

// outcomes applies policy to every action and merges the outcomes into the
// proposal's gate (rule, risk, approval only); it also returns each action's
// outcome and the requester's role.
func (e *Engine) outcomes(ctx context.Context, st *State) (*Gate, []Outcome, string, error) {
	g := &Gate{PolicyRevision: e.policy.Revision(), Risk: RiskLow}
	var rules []string
	role, _, err := e.dir.RoleOf(ctx, st.Requester.ID)
	if err != nil {
		return nil, nil, "", fmt.Errorf("resolve the requester's role: %w", err)
	}
	outs := make([]Outcome, 0, len(st.Actions))
	for i, a := range st.Actions {
		out, err := e.policy.Evaluate(ctx, PolicyInput{Action: a, Index: i, Evidence: st.Evidence, Requester: st.Requester, RequesterRole: role, TaskID: st.TaskID})
		if err != nil {
			return nil, nil, "", fmt.Errorf("action %d (%s): %w", i+1, a.Name, err)
		}
		outs = append(outs, out)
		if out.Risk.rank() > g.Risk.rank() {
			g.Risk = out.Risk
		}
		if out.Approval == nil {
			if g.Approval == nil && len(rules) == 0 {
				g.Rule = out.Rule
			}
			continue
		}
		rules = appendUnique(rules, out.Rule)
		if g.Approval == nil {
			a := *out.Approval
			g.Approval = &a
			continue
		}
		merged := g.Approval
		if e.roles.AtLeast(out.Approval.Role, merged.Role) {
			merged.Role = out.Approval.Role
		}
		merged.Count = max(merged.Count, out.Approval.Count)
		merged.Expires = min(merged.Expires, out.Approval.Expires)
		merged.SelfApproval = merged.SelfApproval && out.Approval.SelfApproval
		merged.Edit = merged.Edit && out.Approval.Edit
	}
	if len(rules) > 0 {
		g.Rule = joinComma(rules)
	}
	return g, outs, role, nil
}

func appendUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}

// runChecks runs every action's read-only check in parallel and joins them once.
// The goroutines write only their own slot; the results are read after Wait.
func (e *Engine) runChecks(ctx context.Context, actions []Action) []Check {
	out := make([]Check, len(actions))
	var wg sync.WaitGroup
	for i, a := range actions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = e.check(ctx, i, a)
		}()
	}
	wg.Wait()
	return out
}

func (e *Engine) check(ctx context.Context, i int, a Action) Check {
	c := Check{Action: i, Name: a.Name}
	spec := e.actions[a.Name]
	for c.Attempts = 1; ; c.Attempts++ {
		err := spec.Executor.Check(ctx, a)
		if err == nil {
			c.OK = true
			return c
		}
		c.Error = err.Error()
		// A check only reads, so anything but a refusal may be retried.
		if Classify(err) == ClassPermanent || c.Attempts >= e.checkN || isCtxErr(err) {
			return c
		}
		if err := e.clock.Sleep(ctx, e.backoff(c.Attempts)); err != nil {
			c.Error = err.Error()
			return c
		}
	}
}
