package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/signoff-dev/signoff/keyring"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/execute"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
	"github.com/signoff-dev/signoff/workflow/internal/seal"
)

// Directory resolves who a person is on this server: the role they hold. The
// server resolves roles; a role claimed by a client is never trusted.
type Directory interface {
	RoleOf(ctx context.Context, userID string) (role string, ok bool, err error)
}

// Config is what an Engine is built from.
type Config struct {
	Store   storage.Store
	Policy  *policy.Policy
	Roles   *policy.Roles          // role order (and, without a Directory, membership)
	Dir     Directory              // optional; defaults to Roles' members
	Actions map[string]*ActionSpec // every action the engine may run
	Agents  map[string]Agent       // workflows made of steps, by name
	Clock   Clock                  // defaults to SystemClock
	Logger  *slog.Logger           // defaults to discarding
	// Failpoint, when set, is called at each write boundary with its name
	// (after-step-N, before-decision-commit, after-decision-commit, after-intent,
	// after-effect, after-receipt, after-park, after-resolve, after-recheck, after-remind, after-escalate,
	// after-schedule, after-release, after-delegate,
	// after-force-commit, after-acknowledge-commit, after-unconfirmed-commit,
	// after-refusal-commit).
	// Crash tests make it kill the process.
	Failpoint func(name string)
	// CheckAttempts and ExecAttempts bound retries of transient failures.
	CheckAttempts int
	ExecAttempts  int
	// Backoff is the wait before retry n (1-based).
	Backoff func(n int) time.Duration
	// Hooks are told about transitions inside their transaction (the outbox).
	Hooks []Hook
	// Owner names this engine in leases (default LocalOwner: host, boot id,
	// pid namespace and pid); LeaseTTL is how long a lease lasts without
	// progress (default 30s).
	Owner    string
	LeaseTTL time.Duration
	// OwnerGone says whether the owner of a lease is a process known to be
	// gone, whose lease a worker takes over at once instead of waiting it
	// out (default LocalOwnerGone). It must err towards false: a live owner
	// taken for gone has its run executed by two at once.
	OwnerGone func(owner string) bool
	// Keys seal every record the engine writes and verify what it reads (see
	// keyring.Ring). Without keys nothing is sealed or checked.
	Keys *keyring.Ring
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
	Changes *storage.Changes
	// CallbackAllowed says whether a proposal may ask for callbacks to a URL
	// (the config's allow-list), given in canonical form
	// (CanonicalCallbackURL); nil allows none. CallbackPrefixes are the
	// allowed prefixes, named in the refusal of any other URL.
	CallbackAllowed  func(url string) bool
	CallbackPrefixes []string
	// ResolveRole is who may resolve a run that needs attention (Resolve):
	// this role or above. Empty: the highest role only.
	ResolveRole string
	// PublishedAnchor, when set, says the newest audit anchor published
	// outside the store (serve --anchor-to). Before anything is sent, the
	// engine checks that the store still holds that anchor as published
	// and that the run's audit events it recorded are unchanged (see
	// checkPublished).
	PublishedAnchor func() (Anchor, bool)
}

// DefaultMaxRequestLifetime is MaxRequestLifetime when the config sets none.
const DefaultMaxRequestLifetime = 30 * 24 * time.Hour

// Hook is told about every transition of a run once the engine has written
// it, in the transaction that writes it. The messages it returns are queued
// in the outbox in that transaction, so that they commit with the transition
// or not at all. A hook reads nothing itself: what it needs of the run is in
// the transition (see Transition.RunView).
type Hook interface {
	OnTransition(ctx context.Context, t *Transition) ([]*record.OutboxMessage, error)
}

// Transition is one change of a run, as hooks see it once it is written.
type Transition struct {
	Run     *record.Run
	State   *record.State // nil for a run whose state could not be trusted (only its row was written)
	From    record.Status
	Event   record.Event // one of Events
	Request *record.ApprovalRequest
	// shown is what RunView builds, once, for every hook that asks.
	shown shownRun
}

// Engine runs workflows durably. It holds no run in memory: every method loads
// what it needs from the store and writes every change back before returning.
type Engine struct {
	// executing holds the ids of the runs a goroutine of this engine is
	// executing (see executeAlone).
	executing sync.Map
	store     storage.Store
	policy    *policy.Policy
	roles     *policy.Roles
	dir       Directory
	actions   map[string]*ActionSpec
	agents    map[string]Agent
	clock     Clock
	log       *slog.Logger
	fail      func(string)
	checkN    int
	execN     int
	backoff   func(int) time.Duration
	hooks     []Hook
	owner     string
	ownerGone func(string) bool
	ttl       time.Duration
	maxLife   time.Duration
	anyone    bool // AllowUnknownRequesters
	// resolveRole is Config.ResolveRole.
	resolveRole string
	published   func() (Anchor, bool)
	in          *seal.Sealer
	changes     *storage.Changes
	// cbAllowed and cbPrefixes: Config.CallbackAllowed and CallbackPrefixes.
	cbAllowed  func(string) bool
	cbPrefixes []string
	// heldMu guards held: the owner of each run another held when Work last
	// looked, so that a run held for long is logged once, not every round.
	heldMu sync.Mutex
	held   map[string]string
	// runs is the run transaction every transition goes through.
	runs *runtx.Runs
	// exec carries out approved operations.
	exec *execute.Runner
	// gates decides what a proposal needs.
	gates *gatekeeper
	// decisions admits people's decisions.
	decisions *decider
	reminders *reminder
	// forces admit forced approvals (break-glass).
	forces *forcer
	// reviews keep the follow-up reviews of forced approvals.
	reviews *reviewer
	// escalations widen who may decide as time passes.
	escalations *escalator
	// windows keep approved runs inside their execution window.
	windows *scheduler
	// resolutions carries out what people found out about stuck runs.
	resolutions *resolver
	// delegations lets one person decide on another's behalf.
	delegations *delegations
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
		backoff: cfg.Backoff, hooks: cfg.Hooks, owner: cfg.Owner, ownerGone: cfg.OwnerGone, ttl: cfg.LeaseTTL,
		maxLife:   cfg.MaxRequestLifetime,
		anyone:    cfg.AllowUnknownRequesters,
		cbAllowed: cfg.CallbackAllowed, cbPrefixes: cfg.CallbackPrefixes,
		resolveRole: cfg.ResolveRole, published: cfg.PublishedAnchor,
	}
	if e.maxLife <= 0 {
		e.maxLife = DefaultMaxRequestLifetime
	}
	if _, ok := cfg.Roles.Rank(e.resolveRole); e.resolveRole != "" && !ok {
		return nil, fmt.Errorf("new engine: the resolve role %q is not one of the roles (%s)", e.resolveRole, strings.Join(cfg.Roles.Names(), ", "))
	}
	e.in = seal.New(cfg.Keys)
	e.changes = cfg.Changes
	if e.changes == nil {
		e.changes = storage.NewChanges()
	}
	e.store = &notifyingStore{Store: e.in.Store(cfg.Store), changes: e.changes}
	if e.owner == "" {
		e.owner = LocalOwner()
	}
	if e.ownerGone == nil {
		e.ownerGone = LocalOwnerGone
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
	e.runs = runtx.New(runtx.Config{Store: e.store, Sealer: e.in, Clock: e.clock, Owner: e.owner, TTL: e.ttl, Tell: e.tell, RowProblem: rowProblem, Logger: e.log})
	e.exec = execute.New(execute.Config{Runs: e.runs, Store: e.store, Sealer: e.in, Actions: e.actions, Logger: e.log, Failpoint: e.fail,
		Attempts: e.execN, Backoff: e.backoff, Owner: e.owner, TTL: e.ttl, Published: e.published,
		Hide: func(actions []record.Action, text string) string { return hideIn(e.actions, actions, text) }})
	e.windows = &scheduler{runs: e.runs, log: e.log, fail: e.fail}
	e.gates = &gatekeeper{runs: e.runs, policy: e.policy, roles: e.roles, dir: e.dir, actions: e.actions,
		clock: e.clock, checkN: e.checkN, backoff: e.backoff, windows: e.windows}
	e.resolutions = &resolver{runs: e.runs, roles: e.roles, resolveRole: e.resolveRole, windows: e.windows}
	e.decisions = &decider{runs: e.runs, gates: e.gates, store: e.store, in: e.in, policy: e.policy, roles: e.roles, fail: e.fail, windows: e.windows}
	e.reminders = newReminder(e)
	e.delegations = &delegations{runs: e.runs, store: e.store, in: e.in, dir: e.dir, roles: e.roles, log: e.log, fail: e.fail}
	e.reviews = &reviewer{runs: e.runs, store: e.store, in: e.in, roles: e.roles, dir: e.dir, fail: e.fail}
	e.forces = &forcer{dc: e.decisions, reviews: e.reviews, fail: e.fail}
	e.escalations = newEscalator(e)
	return e, nil
}

type rolesDirectory struct{ r *policy.Roles }

func (d rolesDirectory) RoleOf(_ context.Context, userID string) (string, bool, error) {
	role, ok := d.r.RoleOf(userID)
	return role, ok, nil
}

// Store returns the engine's store, which seals what is written through it:
// for tests and tools. The edges use the engine's methods and services.
func (e *Engine) Store() storage.Store { return e.store }

// Policy returns the policy in force.
func (e *Engine) Policy() *policy.Policy { return e.policy }

// Roles returns the role order.
func (e *Engine) Roles() *policy.Roles { return e.roles }

// Owner is the name this engine's leases carry: Config.Owner, or LocalOwner.
func (e *Engine) Owner() string { return e.owner }

// Action returns the spec of a named action.
func (e *Engine) Action(name string) (*ActionSpec, bool) {
	s, ok := e.actions[name]
	return s, ok
}

// now is the engine's time, at the precision the store keeps.
func (e *Engine) now() time.Time { return e.clock.Now().UTC().Truncate(time.Millisecond) }
