package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/spf13/cobra"

	agentapi "github.com/signoff-dev/signoff/api"
	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/callback"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/metrics"
	"github.com/signoff-dev/signoff/workflow"
)

// serveOptions are what `signoff serve` needs besides the app.
type serveOptions struct {
	addr          string
	signingSecret string
	botToken      string
	appToken      string // xapp-… for Socket Mode
	socketMode    bool
	poll          time.Duration // how often the workers look for work when no commit woke them
	// metricsEvery is how often the gauges are read from the store (0: metricsEvery).
	metricsEvery time.Duration
}

// metricsEvery is how often serve reads the gauges of /metrics from the
// store: a scrape never queries it.
const metricsEvery = 15 * time.Second

// servePoll is how often serve's workers look for work when no commit woke
// them: a commit of any process that writes a run wakes the workers that
// work on runs and their messages at once (Changes.Any), so this bounds only
// what becomes due by time alone (a deadline, a retry after its backoff, the
// lease of a process that died), and work whose commit was not heard.
const servePoll = time.Second

// repostEvery is how often serve looks for waiting runs without a message,
// after looking at start.
const repostEvery = time.Minute

func (c *cli) serveCmd() *cobra.Command {
	so := serveOptions{poll: servePoll}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve Slack's interactions and /runs, deliver messages, and execute approved runs",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if c.opts.config == "" {
				// Its approvers are made up: a server on it would gate nothing real.
				return usageError{"serve needs a config of your own: pass --config FILE (or set SIGNOFF_CONFIG, or put signoff.yaml here); the built-in demo config's approvers are made up"}
			}
			so.signingSecret, so.botToken, so.appToken = c.getenv("SLACK_SIGNING_SECRET"), c.getenv("SLACK_BOT_TOKEN"), c.getenv("SLACK_APP_TOKEN")
			// Refuse what can be refused before the store and the shop are opened.
			cfg, err := loadConfig(c.opts, io.Discard)
			if err != nil {
				return err
			}
			if err := checkServe(cfg, so); err != nil {
				return err
			}
			if _, err := callbackKeys(cfg, c.getenv); err != nil {
				return err
			}
			c.opts.metrics = metrics.New(version())
			return c.withApp(func(a *app) error {
				s, err := startServer(c.ctx, a, so)
				if err != nil {
					return err
				}
				if !strings.EqualFold(c.opts.logFormat, "json") {
					fmt.Fprintf(c.errOut, "signoff: serving on %s (store %s)\n", s.addr, a.db)
				}
				<-c.ctx.Done()
				return s.stop()
			})
		},
	}
	cmd.Flags().StringVar(&so.addr, "addr", ":8080", "where to listen for Slack's requests")
	cmd.Flags().BoolVar(&so.socketMode, "socket-mode", false, "receive Slack's requests over Socket Mode (needs SLACK_APP_TOKEN) instead of a public URL")
	return cmd
}

// server is a running `signoff serve`: the HTTP listener and the workers.
type server struct {
	addr   string
	log    *slog.Logger
	http   *http.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error
}

// startServer wires the bot onto echo, listens on so.addr (":0" in tests) and
// starts the workers: execution of approved runs, the deadline sweep, the
// Slack outbox and the sweep of Slack requests past their replay window. It
// returns once the listener is bound.
func startServer(ctx context.Context, a *app, so serveOptions) (*server, error) {
	sc := a.cfg.Slack
	if err := checkServe(a.cfg, so); err != nil {
		return nil, err
	}
	cb, err := callbackDispatcher(a)
	if err != nil {
		return nil, err
	}
	api := a.slackAPI
	if a.metrics != nil {
		api.OnError(a.metrics.SlackError)
	}
	if err := checkSlack(ctx, a, api, sc.Channel); err != nil {
		return nil, err
	}
	bs, err := bot.NewServer(bot.ServerConfig{
		Engine: a.engine, SigningSecret: so.signingSecret, AppID: sc.AppID, TeamID: sc.TeamID, EnterpriseID: sc.EnterpriseID,
		Logger: a.log, Slack: api, Directory: a.dir, UserGroups: sc.UserGroups, Refused: refusedCounter(a),
	})
	if err != nil {
		return nil, err
	}
	var auditFrom int64
	if a.cfg.AuditLog {
		seq, err := a.engine.LastAuditSeq(ctx)
		if err != nil {
			return nil, err
		}
		auditFrom = seq
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	if a.metrics != nil {
		e.Use(observeHTTP(a.metrics))
		e.GET("/metrics", echo.WrapHandler(a.metrics.Handler()))
	}
	bs.Register(e)
	agents, err := agentapi.Mount(e, agentAPIConfig(a))
	if err != nil {
		return nil, err
	}
	ws := &workers{}
	(&health{store: a.store, workers: ws, log: a.log}).register(e)
	ln, err := net.Listen("tcp", so.addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", so.addr, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	s := &server{addr: ln.Addr().String(), log: a.log, cancel: cancel, errs: make(chan error, 2),
		http: &http.Server{Handler: e, ReadHeaderTimeout: 5 * time.Second}}
	s.http.RegisterOnShutdown(agents.Stop) // long polls answer instead of holding the shutdown
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errs <- fmt.Errorf("serve http: %w", err)
		}
	}()
	disp := &bot.Dispatcher{Store: a.store, Engine: a.engine, Slack: api, Channel: sc.Channel, Logger: a.log,
		Render: bot.NewRenderer(a.engine, a.engine.Roles(), sc.UserGroups, time.Now)}
	go func() {
		defer s.wg.Done()
		work(wctx, a, disp, cb, so.poll, ws)
	}()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		logAnchors(wctx, a.engine, a.log, anchorEvery)
	}()
	if a.metrics != nil {
		every := so.metricsEvery
		if every <= 0 {
			every = metricsEvery
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			refreshMetrics(wctx, a, every)
		}()
	}
	if r := a.cfg.Retention; r.RunsOlderThan > 0 {
		t := time.NewTicker(r.Every)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer t.Stop()
			pruneOn(wctx, a, r.RunsOlderThan, time.Now, t.C)
		}()
	}
	if a.cfg.AuditLog {
		// From the head at start: the log is a live feed, not a second copy of
		// the history, which `signoff audit --json` exports.
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			logAudit(wctx, a.store, a.changes, a.log, so.poll, auditFrom)
		}()
	}
	if so.socketMode {
		client := bot.NewSocketModeClient(so.botToken, so.appToken, sc.APIURL)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := bot.RunSocketMode(wctx, client, bs); err != nil && wctx.Err() == nil {
				s.errs <- fmt.Errorf("socket mode: %w", err)
			}
		}()
	}
	store := "sqlite"
	if isPostgres(a.db) {
		store = "postgres"
	}
	a.log.Info("signoff serving", "version", version(), "addr", s.addr, "store", store, "db", a.db,
		"channel", sc.Channel, "socket_mode", so.socketMode, "owner", a.engine.Owner())
	return s, nil
}

// checkServe refuses a server that could not work: tokens missing from the
// environment, or a config without the slack section's ids.
func checkServe(cfg *config.Config, so serveOptions) error {
	if so.socketMode && so.appToken == "" {
		return usageError{"--socket-mode needs SLACK_APP_TOKEN (an app-level token, xapp-…)"}
	}
	if !so.socketMode && so.signingSecret == "" {
		return usageError{"SLACK_SIGNING_SECRET is not set: it verifies that requests come from Slack"}
	}
	if so.botToken == "" {
		return usageError{"SLACK_BOT_TOKEN is not set: it posts and rewrites the approval messages"}
	}
	sc := cfg.Slack
	if sc.Channel == "" || sc.AppID == "" || (sc.TeamID == "" && sc.EnterpriseID == "") {
		return cfg.Errorf("slack", "serve needs channel, app_id and team_id or enterprise_id here")
	}
	return nil
}

// checkSlack asks Slack whether the bot token works and the bot is in the
// approvals channel, before anything is served. A token Slack refuses or a
// channel it does not know stops the start: nothing could be posted. A bot
// not invited yet only warns, since the invitation is what fixes it and posts
// are retried every minute or two until then; so does Slack being unreachable.
func checkSlack(ctx context.Context, a *app, api *bot.API, channel string) error {
	_, err := api.CheckSetup(ctx, channel)
	var se *bot.SetupError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se) && se.Refuse:
		return err
	case se != nil:
		a.log.Warn("SLACK SETUP: "+se.Problem+"; approval messages wait until it is fixed", "channel", channel, "fix", se.Fix)
	default:
		a.log.Warn("could not check the Slack setup; starting anyway", "channel", channel, "error", err.Error())
	}
	return nil
}

// work runs the server's background loops, each on its own goroutine so that a
// slow executor never holds up Slack messages or the deadline sweep. Every
// change they make is durable before they move on, so stopping them at any point
// loses nothing: the next round, here or on another replica, picks up where
// they stopped. An error in one round is logged and the round is tried again at
// the next tick, since the cause (a locked file, Slack being down) is usually
// gone by then.
//
// The loops whose work a commit creates (an approved run, a queued message)
// are woken by every commit that writes a run, this process's or another's
// (the store's change feed hears those), and otherwise look every poll; the
// others, whose work only time makes due, look every poll.
//
// Waiting runs without a message (they waited before the config had a slack
// section) are looked for at start and then every repostEvery: a run gets its
// post queued when it starts waiting, so this only catches what no process
// queued, and need not be quick.
func work(ctx context.Context, a *app, disp *bot.Dispatcher, cb *callback.Dispatcher, poll time.Duration, ws *workers) {
	type loop struct {
		what  string
		every time.Duration
		wake  bool // also at once after a commit that wrote a run
		do    func(context.Context) error
	}
	loops := []loop{
		{"execute approved runs", poll, true, func(ctx context.Context) error { _, err := a.engine.Work(ctx, 20); return err }},
		{"expire runs past their deadline", poll, false, func(ctx context.Context) error { _, err := a.engine.ExpireDue(ctx); return err }},
		{"deliver slack messages", poll, true, func(ctx context.Context) error { _, err := disp.DeliverDue(ctx, 50); return err }},
		{"deliver callbacks", poll, true, func(ctx context.Context) error { _, err := cb.DeliverDue(ctx, 50); return err }},
		{"post waiting runs without a message", repostEvery, false, func(ctx context.Context) error { _, err := disp.QueueUnposted(ctx); return err }},
		{"forget slack requests past their window", poll, false, func(ctx context.Context) error { _, err := bot.ForgetSeen(ctx, a.store, time.Now()); return err }},
	}
	if feed, ok := a.store.(workflow.ChangeFeed); ok {
		// Wakes this server's waiters and workers on other processes'
		// commits; it returns only when ctx ends (or, failing, is started
		// again at the next tick).
		loops = append(loops, loop{"wake waiters on other processes' commits", poll, false, func(ctx context.Context) error { return feed.FeedChanges(ctx, a.changes) }})
	}
	var wg sync.WaitGroup
	ws.up.Add(int32(len(loops)))
	ws.want.Store(int32(len(loops)))
	for _, l := range loops {
		var changes *workflow.Changes
		if l.wake {
			changes = a.changes
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ws.up.Add(-1)
			rounds(ctx, changes, l.every, func(ctx context.Context) {
				if err := l.do(ctx); err != nil && ctx.Err() == nil {
					a.log.Error(l.what, "error", err)
				}
			})
		}()
	}
	wg.Wait()
}

// rounds calls round at once and then again every interval after the last,
// or as soon as a run changes when changes is not nil, until ctx ends. It
// waits for a change from before each round, so that a change committed
// during a round brings one more, and a burst of changes brings one: never a
// loop that spins, and never a change left for the next tick.
func rounds(ctx context.Context, changes *workflow.Changes, every time.Duration, round func(context.Context)) {
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		var woken <-chan struct{} // nil: only the timer or ctx ends the wait
		stop := func() {}
		if changes != nil {
			woken, stop = changes.Any()
		}
		round(ctx)
		t.Reset(every)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-woken:
		case <-t.C:
		}
		stop()
	}
}

// stop shuts the listener and the workers down and reports the first error either had.
func (s *server) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.log.Info("signoff stopping: finishing the requests and the work in hand", "addr", s.addr)
	err := s.http.Shutdown(ctx)
	s.cancel()
	s.wg.Wait()
	select {
	case werr := <-s.errs:
		err = errors.Join(err, werr)
	default:
	}
	if err != nil {
		s.log.Error("signoff stopped", "addr", s.addr, "error", err.Error())
		return err
	}
	s.log.Info("signoff stopped", "addr", s.addr)
	return nil
}

// observeHTTP counts every answered request by its route pattern (never the
// raw path: a path of a route that does not exist is "unmatched").
func observeHTTP(m *metrics.Metrics) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err) // so that the code is the one sent
			}
			route := c.Path()
			if route == "" || c.Response().Status == http.StatusNotFound && route == "/*" {
				route = "unmatched"
			}
			m.ObserveHTTP(route, c.Response().Status, time.Since(start))
			return nil
		}
	}
}

// refreshMetrics sets the gauges from the store now and every tick until ctx ends.
func refreshMetrics(ctx context.Context, a *app, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := a.metrics.Refresh(ctx, a.store, time.Now()); err != nil && ctx.Err() == nil {
			a.log.Error("refresh metrics", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// refusedCounter is what the bot tells of refusals: the metric, when serve has metrics.
func refusedCounter(a *app) func(string) {
	if a.metrics == nil {
		return nil
	}
	return a.metrics.Refused
}

// pruneOn prunes the runs that ended more than age ago (retention: in the
// config) at start and at every tick until ctx ends. A failed prune is
// logged and tried again at the next tick: what it did commit stays done.
func pruneOn(ctx context.Context, a *app, age time.Duration, now func() time.Time, tick <-chan time.Time) {
	for {
		res, err := prune(ctx, a.engine, a.store, a.log, now().Add(-age), false)
		switch {
		case err != nil && ctx.Err() == nil:
			a.log.Error("prune", "error", err)
		case res != nil:
			a.log.Info("prune done", "runs", res.Runs, "checkpoints", res.Checkpoints, "bytes", res.Bytes(), "skipped", len(res.Skipped))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}
