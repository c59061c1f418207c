package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/callback"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/internal/app/exitcode"
	"github.com/signoff-dev/signoff/keyring"
	"github.com/signoff-dev/signoff/mcpgateway"
	"github.com/signoff-dev/signoff/metrics"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/postgres"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// Exit codes that automation can trust (package exitcode says what each means).
const (
	exitDone      = exitcode.Done
	exitFailed    = exitcode.Failed
	exitRefused   = exitcode.Refused
	exitWaiting   = exitcode.Waiting
	exitEnded     = exitcode.Ended
	exitAttention = exitcode.Attention
	exitActive    = exitcode.Active
)

// options are the global flags, resolved against the environment.
type options struct {
	db     string
	config string // "" after resolve: the built-in demo config
	shop   string
	keys   string // --keys: the integrity key file (see keys.go)
	// readOnly opens the store read-only and the shop only on demand: for
	// commands that only read.
	readOnly bool
	// quietBuiltin: say nothing about using the built-in config (the demo's
	// own commands, where that is the point).
	quietBuiltin bool
	// logFormat (text, json) and logLevel (debug, info, warn, error): "" for
	// the default, text at warn, or at info for a server.
	logFormat, logLevel string
	server              bool
	// getenv reads the environment (the executors' secrets); nil reads nothing.
	getenv func(string) string
	// metrics, for serve: decisions and executor calls are counted on it.
	metrics *metrics.Metrics
	// anchorTo, for serve --anchor-to: where anchors are published, over
	// the config's anchors.to ("" keeps the config's).
	anchorTo string
	// mcpGateway: the upstreams of mcp.upstreams must connect (the
	// gateway); elsewhere one that does not is a warning.
	mcpGateway bool
}

// localConfig is the config file looked for in the working directory when
// neither --config nor SIGNOFF_CONFIG names one.
const localConfig = "signoff.yaml"

// resolve fills the options from the environment.
func (o *options) resolve(getenv func(string) string) {
	o.getenv = getenv
	if o.db == "" {
		o.db = getenv("SIGNOFF_DB")
	}
	if o.db == "" {
		o.db = "signoff.db"
	}
	if o.config == "" {
		o.config = getenv("SIGNOFF_CONFIG")
	}
	if o.shop == "" {
		o.shop = getenv("SIGNOFF_SHOP")
	}
	if o.keys == "" {
		o.keys = getenv("SIGNOFF_KEYS_FILE")
	}
	if o.logFormat == "" {
		o.logFormat = getenv("SIGNOFF_LOG_FORMAT")
	}
	if o.logLevel == "" {
		o.logLevel = getenv("SIGNOFF_LOG_LEVEL")
	}
	if o.shop == "" {
		// Beside the store file; a database URL has no directory, so the working one.
		o.shop = "shop.db"
		if !isPostgres(o.db) {
			o.shop = filepath.Join(filepath.Dir(o.db), "shop.db")
		}
	}
}

// findLocal uses ./signoff.yaml when neither --config nor SIGNOFF_CONFIG names
// a config, so that forgetting --config in a project folder does not quietly
// run on the demo's policy and approvers.
func (o *options) findLocal() {
	if o.config != "" {
		return
	}
	if info, err := os.Stat(localConfig); err == nil && !info.IsDir() {
		o.config = localConfig
	}
}

// app is the program wired together: config, store, shop and engine.
type app struct {
	cfg    *config.Config
	store  storage.Store
	shopDB *sql.DB
	shop   *demo.Shop
	// shopPath is where the practice shop lives, for readShop.
	shopPath string
	// db names the store for logs: a file path, or a database's host and name.
	db     string
	engine *workflow.Engine
	// keys are the integrity keys the engine seals and verifies with (nil
	// for none), for messages that name them.
	keys *keyring.Ring
	// anchors is where serve publishes audit anchors outside the store, and
	// the newest published, which runs are checked against before they send.
	anchors anchorSink
	log     *slog.Logger
	// Slack, when the config has a slack: section: the Web API client (with
	// SLACK_BOT_TOKEN) and the directory that resolves roles, user groups included.
	slackAPI *bot.API
	dir      workflow.Directory
	// metrics is set for serve (options.metrics).
	metrics *metrics.Metrics
	// changes wakes the waiters on runs (wait, submit --wait): the engine
	// tells it of its own commits, the store's feed of others' (feedChanges).
	changes *storage.Changes
	// getenv, failpoint and leaseTTL are what serve's callback dispatcher
	// takes from the environment: its secret, SIGNOFF_FAILPOINT and
	// SIGNOFF_LEASE_TTL (how long a claimed row is left to its claimer).
	getenv    func(string) string
	failpoint func(string)
	leaseTTL  time.Duration
	// clock is the engine's: what the daily digests read the time of day from.
	clock workflow.Clock
	// wcfg is the engine's config, for what explains a proposal without a
	// store (the MCP gateway's).
	wcfg workflow.Config
	// upstreams are the MCP servers of mcp.upstreams, connected by a process
	// that may carry out their tools (gateway.go).
	upstreams *mcpgateway.Upstreams
}

// openApp builds the app from the global options and the environment:
// SIGNOFF_FAILPOINT names the write boundary at which the process kills itself,
// SLACK_BOT_TOKEN lets it talk to Slack when the config has a slack section.
//
// Everything that can be refused is checked before any file is opened: a
// refused config or environment creates no store and no shop.
func openApp(ctx context.Context, o options, getenv func(string) string, logOut io.Writer, clock workflow.Clock) (*app, error) {
	if o.getenv == nil {
		o.getenv = getenv // the executors' secrets come from the same environment
	}
	cfg, err := loadConfig(o, logOut)
	if err != nil {
		return nil, err
	}
	leaseTTL, err := leaseTTLFrom(getenv)
	if err != nil {
		return nil, err
	}
	log, err := newLogger(o, logOut)
	if err != nil {
		return nil, err
	}
	store, err := openStore(ctx, o.db, log, o.readOnly)
	if err != nil {
		return nil, err
	}
	a := &app{cfg: cfg, store: store, log: log, shopPath: o.shop, db: describeDB(o.db), changes: storage.NewChanges(), getenv: getenv, leaseTTL: leaseTTL}
	if clock == nil {
		clock = workflow.SystemClock{}
	}
	a.clock = clock
	if err := a.open(ctx, o, logOut, clock); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// leaseTTLFrom is SIGNOFF_LEASE_TTL: how long a claimed row is left to its
// claimer (0 for the default).
func leaseTTLFrom(getenv func(string) string) (time.Duration, error) {
	ttl := getenv("SIGNOFF_LEASE_TTL")
	if ttl == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(ttl)
	if err != nil || d <= 0 {
		return 0, usageError{fmt.Sprintf("SIGNOFF_LEASE_TTL=%q: want a duration like 30s", ttl)}
	}
	return d, nil
}

// open opens, once the store is, the keys, the practice shop and the anchor
// sink, and the engine on them all; the caller closes a on an error.
func (a *app) open(ctx context.Context, o options, logOut io.Writer, clock workflow.Clock) error {
	keys, err := storeKeys(ctx, o, a.getenv, a.store, logOut)
	if err != nil {
		return err
	}
	a.keys = keys
	// The practice shop is opened only for a config that has demo actions.
	if !o.readOnly && usesDemo(a.cfg) {
		if a.shopDB, err = sqlite.OpenDB(o.shop); err != nil {
			return fmt.Errorf("open shop: %w", err)
		}
		if a.shop, err = demo.OpenShop(ctx, a.shopDB, clock); err != nil {
			return fmt.Errorf("open shop: %w", err)
		}
	}
	// A read-only app binds the demo executors to no shop: its store refuses
	// every write, so no action can run.
	actions, _, err := buildActions(a.cfg, a.shop, a.getenv, o.readOnly, privateFiles(o))
	if err != nil {
		return err
	}
	if actions, err = a.connectUpstreams(ctx, o, actions); err != nil {
		return err
	}
	if o.metrics != nil {
		for name, spec := range actions {
			spec.Executor = o.metrics.Executor(name, spec.Executor)
		}
	}
	to := a.cfg.Anchors.To
	if o.anchorTo != "" {
		if to, err = config.AnchorTarget(o.anchorTo, "."); err != nil {
			return usageError{"--anchor-to: " + err.Error()}
		}
	}
	if a.anchors, err = newAnchorSink(to, a.getenv, a.log); err != nil {
		return usageError{err.Error()}
	}
	a.wcfg = a.engineConfig(o, actions, clock)
	if a.engine, err = workflow.New(a.wcfg); err != nil {
		return err
	}
	return nil
}

// engineConfig is the engine's config for the app: its store, policy and
// actions, and the hooks every process that changes runs has (Slack's
// outbox with a slack: section, the metrics for serve, the callbacks).
func (a *app) engineConfig(o options, actions map[string]*workflow.ActionSpec, clock workflow.Clock) workflow.Config {
	cfg := a.cfg
	wcfg := workflow.Config{
		Store: a.store, Policy: cfg.Policy, Roles: cfg.Roles, Actions: actions, Clock: clock, Logger: a.log,
		AllowUnknownRequesters: cfg.Requesters.AllowUnknown, LeaseTTL: a.leaseTTL, Keys: a.keys,
		MaxRequestLifetime: cfg.Requests.MaxLifetime, Changes: a.changes, ResolveRole: cfg.Resolve.Role,
		PublishedAnchor: a.anchors.latest, Owner: a.getenv("SIGNOFF_OWNER"),
	}
	if usesDemo(cfg) {
		wcfg.Agents = map[string]workflow.Agent{demo.AgentWorkflow: demo.NewAgent(a.shop)}
	}
	if cfg.Slack.Given {
		// Every process that changes runs queues the Slack messages, so a CLI
		// decision is posted by whichever server delivers the outbox; the
		// outcome goes to requesters who are Slack users.
		wcfg.Hooks = append(wcfg.Hooks, bot.Outbox{SlackUserOf: cfg.Requesters.SlackUserOf, Details: true, AuditChannel: cfg.Slack.AuditChannel})
		a.slackAPI = bot.NewAPI(a.getenv("SLACK_BOT_TOKEN"), cfg.Slack.APIURL, 10*time.Second)
		if len(cfg.Slack.UserGroups) > 0 {
			a.dir = bot.NewDirectory(cfg.Roles, cfg.Slack.UserGroups, a.slackAPI, 5*time.Minute, workflow.SystemClock{})
			wcfg.Dir = a.dir
		}
	}
	if o.metrics != nil {
		wcfg.Hooks = append(wcfg.Hooks, o.metrics.Hook())
		a.metrics = o.metrics
	}
	// Every process that changes runs queues their callbacks, whatever the
	// allow-list says now: submit checked it, and the dispatcher checks it
	// again before it sends anything.
	wcfg.Hooks = append(wcfg.Hooks, callback.Hook{})
	wcfg.CallbackAllowed, wcfg.CallbackPrefixes = cfg.API.CallbackAllowed, cfg.API.CallbackPrefixes
	if failpoint := a.getenv("SIGNOFF_FAILPOINT"); failpoint != "" {
		wcfg.Failpoint = failpointFunc(failpoint)
		a.failpoint = wcfg.Failpoint
	}
	return wcfg
}

// describeDB names a store for people and logs: a SQLite file as it is, a
// PostgreSQL database by scheme, host and name only, since its URL may carry
// a password in the user part or in the query.
func describeDB(db string) string {
	if !isPostgres(db) {
		return db
	}
	u, err := url.Parse(db)
	if err != nil {
		return "the PostgreSQL database in --db"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// newLogger builds the program's one logger from --log-format and
// --log-level; every package logs through it. A command on a terminal says
// only what went wrong (warn); a server also says what it did (info), with
// the run ids.
func newLogger(o options, w io.Writer) (*slog.Logger, error) {
	level := slog.LevelWarn
	if o.server {
		level = slog.LevelInfo
	}
	if o.logLevel != "" {
		l, ok := logLevels[strings.ToLower(o.logLevel)]
		if !ok {
			return nil, usageError{fmt.Sprintf("--log-level %q (or SIGNOFF_LOG_LEVEL): want debug, info, warn or error", o.logLevel)}
		}
		level = l
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(o.logFormat) {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError{fmt.Sprintf("--log-format %q (or SIGNOFF_LOG_FORMAT): want text or json", o.logFormat)}
}

// openStore opens the store that --db names: a PostgreSQL database for a
// postgres:// or postgresql:// URL, else a SQLite file path (the default).
// PostgreSQL is not migrated here, unlike SQLite: an unmigrated database is
// refused (exit 2) with a message that says to run `signoff migrate`. A
// read-only SQLite store is not migrated either, and refused the same way.
func openStore(ctx context.Context, db string, log *slog.Logger, readOnly bool) (storage.Store, error) {
	if isPostgres(db) {
		store, err := postgres.Open(ctx, db, postgres.WithLogger(log))
		if err != nil {
			return nil, refuseSchema(fmt.Errorf("%s: %w", redactDB(db), err))
		}
		return store, nil
	}
	if readOnly {
		store, err := sqlite.OpenReadOnly(ctx, db, sqlite.WithLogger(log))
		if err != nil {
			return nil, refuseSchema(err)
		}
		return store, nil
	}
	store, err := sqlite.Open(ctx, db, sqlite.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", db, err)
	}
	return store, nil
}

// failpointFunc makes the process stop at a named write boundary, for crash
// tests: NAME kills it (SIGKILL: no deferred function, no flush, no goodbye);
// NAME:stop freezes it (SIGSTOP), as a paused VM or a long GC would, until
// someone sends SIGCONT.
func failpointFunc(spec string) func(string) {
	name, mode, _ := strings.Cut(spec, ":")
	var fired atomic.Bool
	return func(at string) {
		if at != name || !fired.CompareAndSwap(false, true) {
			return
		}
		if mode == "stop" {
			// The kernel stops the threads when each next passes through it,
			// so the caller could otherwise run on for a moment (a whole
			// short transaction) before it freezes: it waits for the
			// SIGCONT that ends the freeze instead.
			cont := make(chan os.Signal, 1)
			signal.Notify(cont, syscall.SIGCONT)
			defer signal.Stop(cont)
			_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			<-cont
			return
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}

// loadConfig reads the config the options name, or the built-in one (saying
// so on w, unless quiet), and checks what only this build knows: which
// executors exist and which actions they have, and, unless o.readOnly, that
// the secrets they name are set. Its warnings go to w.
func loadConfig(o options, w io.Writer) (*config.Config, error) {
	cfg := config.Default()
	if o.config != "" {
		var err error
		if cfg, err = config.Load(o.config); err != nil {
			return nil, err
		}
	} else if !o.quietBuiltin {
		fmt.Fprintf(w, "signoff: using the %s (no --config, no SIGNOFF_CONFIG, no ./%s)\n", config.DefaultSource, localConfig)
	}
	_, warnings, err := buildActions(cfg, nil, o.getenv, o.readOnly, privateFiles(o))
	if err != nil {
		return nil, err
	}
	cfg.Warnings = append(cfg.Warnings, warnings...)
	for _, warn := range cfg.Warnings {
		fmt.Fprintln(w, "signoff: warning:", warn)
	}
	return cfg, nil
}

// readShop is the practice shop for a command that reads it: the one the app
// opened, or else the shop file opened read-only.
func (a *app) readShop(ctx context.Context) (*demo.Shop, error) {
	if a.shop != nil || !usesDemo(a.cfg) {
		return a.shop, nil // nil: the config has no shop
	}
	db, shop, err := openShopReadOnly(ctx, a.shopPath)
	if err != nil {
		return nil, err
	}
	a.shopDB, a.shop = db, shop
	return shop, nil
}

// openShopReadOnly opens the practice shop at path read-only: it creates,
// seeds and writes nothing. A missing file is sqlite.ErrNoStore.
func openShopReadOnly(ctx context.Context, path string) (*sql.DB, *demo.Shop, error) {
	db, err := sqlite.OpenReadOnlyDB(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open shop: %w", err)
	}
	shop, err := demo.OpenShopReadOnly(ctx, db)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, shop, nil
}

// Close releases the app's files.
func (a *app) Close() error {
	var errs []error
	if a.shopDB != nil {
		errs = append(errs, a.shopDB.Close())
	}
	if a.store != nil {
		errs = append(errs, a.store.Close())
	}
	if a.upstreams != nil {
		errs = append(errs, a.upstreams.Close())
	}
	return errors.Join(errs...)
}

// exitFor maps a run's status to the exit code of a run-level command.
func exitFor(s record.Status) int {
	switch s {
	case record.StatusDone:
		return exitDone
	case record.StatusFailed:
		return exitFailed
	case record.StatusWaitingApproval:
		return exitWaiting
	case record.StatusRejected, record.StatusExpired, record.StatusCancelled:
		return exitEnded
	case record.StatusNeedsAttention:
		return exitAttention
	case record.StatusRunning, record.StatusExecuting, record.StatusScheduled:
		return exitActive
	}
	return exitFailed
}

// exitForErr maps an error to an exit code: refusals changed nothing (2), a
// decision after the deadline ended the run (4), damaged state needs a person (5).
func exitForErr(err error) int {
	var r *record.RefusedError
	if errors.As(err, &r) {
		switch r.Code {
		case record.CodeExpired:
			return exitEnded
		case record.CodeIntegrity:
			return exitAttention
		}
		return exitRefused
	}
	var ie *workflow.IntegrityError
	if errors.As(err, &ie) {
		return exitAttention
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		return exitRefused
	}
	var se *bot.SetupError
	if errors.As(err, &se) {
		return exitRefused
	}
	return exitFailed
}

// since says how long ago t was, for people.
func since(now, t time.Time) string {
	d := now.Sub(t).Round(time.Minute)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
