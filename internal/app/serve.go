package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/spf13/cobra"

	agentapi "github.com/signoff-dev/signoff/api"
	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/callback"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/internal/supervise"
	"github.com/signoff-dev/signoff/metrics"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// serveOptions are what `signoff serve` needs besides the app.
type serveOptions struct {
	addr string
	// adminAddr is where /metrics and the health probes are served, apart
	// from addr, which Slack and agents must reach; "" serves them nowhere.
	adminAddr     string
	signingSecret string
	botToken      string
	appToken      string // xapp-… for Socket Mode
	socketMode    bool
	poll          time.Duration // how often the workers look for work when no commit woke them
	// metricsEvery is how often the gauges are read from the store (0: metrics.RefreshEvery).
	metricsEvery time.Duration
	// readTimeout bounds reading one request, body included (0: readTimeout).
	readTimeout time.Duration
	// digestEvery is how often each daily digest looks whether its time has
	// come (0: digestEvery).
	digestEvery time.Duration
}

// digestEvery is how often a daily digest looks at the clock: it is at most
// this late, and a round before its time reads nothing.
const digestEvery = 30 * time.Second

// readTimeout bounds how long a client may take to send one request, its
// body included: Slack's handlers read the whole body before they can check
// its signature, so a client that sends part of one and stalls would
// otherwise hold a handler and its buffer for as long as it likes. A long
// poll (/v1/…/wait) is not bound by it: it bounds reading, not answering.
const readTimeout = 30 * time.Second

// defaultAdminAddr is --admin-addr's default: loopback, so that metrics and
// probes are not served to whoever can reach the public port.
const defaultAdminAddr = "127.0.0.1:9090"

// servePoll is how often serve's workers look for work when no commit woke
// them: a commit of any process that writes a run wakes the workers that
// work on runs and their messages at once (Changes.Any), so this bounds only
// what becomes due by time alone (a deadline, a retry after its backoff, the
// lease of a process that died), and work whose commit was not heard.
const servePoll = time.Second

func (c *cli) serveCmd() *cobra.Command {
	so := serveOptions{poll: servePoll}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the agent API (and Slack, with a slack: section), deliver messages, and execute approved runs",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if c.opts.config == "" {
				// Its approvers are made up: a server on it would gate nothing real.
				return usageError{"serve needs a config of your own: pass --config FILE (or set SIGNOFF_CONFIG, or put signoff.yaml here); the built-in demo config's approvers are made up"}
			}
			so.signingSecret, so.botToken, so.appToken = c.getenv("SLACK_SIGNING_SECRET"), c.getenv("SLACK_BOT_TOKEN"), c.getenv("SLACK_APP_TOKEN")
			if v := c.getenv("SIGNOFF_ADMIN_ADDR"); v != "" && !cmd.Flags().Changed("admin-addr") {
				so.adminAddr = v
			}
			// Refuse what can be refused before the store and the shop are opened.
			cfg, err := loadConfig(c.opts, io.Discard)
			if err != nil {
				return err
			}
			if _, err := checkServe(cfg, so); err != nil {
				return err
			}
			if _, err := callbackKeys(cfg, c.getenv); err != nil {
				return err
			}
			if err := checkUI(cfg, so.addr, c.getenv); err != nil {
				return err
			}
			c.opts.metrics = metrics.New(version())
			c.tuneGC()
			return c.withApp(func(a *app) error {
				s, err := startServer(c.ctx, a, so)
				if err != nil {
					return err
				}
				if !strings.EqualFold(c.opts.logFormat, "json") {
					fmt.Fprintf(c.errOut, "signoff: serving on %s (store %s); slack: %s\n", s.addr, a.db, s.slack)
					if a.cfg.UI.Given {
						fmt.Fprintf(c.errOut, "signoff: web console on http://%s%s/\n", s.addr, consolePrefix)
					}
					if s.adminAddr != "" {
						fmt.Fprintf(c.errOut, "signoff: metrics and health on %s\n", s.adminAddr)
					} else {
						fmt.Fprintf(c.errOut, "signoff: metrics and health off (--admin-addr \"\")\n")
					}
				}
				for _, w := range placementWarnings(c.opts, c.getenv, a.anchors) {
					a.log.Warn("kept beside the store", "problem", w)
					if !strings.EqualFold(c.opts.logFormat, "json") {
						fmt.Fprintf(c.errOut, "signoff: warning: %s\n", w)
					}
				}
				<-c.ctx.Done()
				return s.stop()
			})
		},
	}
	cmd.Flags().StringVar(&so.addr, "addr", ":8080", "where to listen for Slack's requests and the agent API")
	cmd.Flags().StringVar(&so.adminAddr, "admin-addr", defaultAdminAddr,
		`where to serve /metrics, /livez, /readyz and /healthz, apart from --addr ("" for nowhere; default from SIGNOFF_ADMIN_ADDR when set)`)
	cmd.Flags().StringVar(&c.opts.anchorTo, "anchor-to", "", "publish audit anchors here, outside the store: log, a file to append to, or an http(s) URL to POST to (default: the config's anchors.to, else log)")
	cmd.Flags().BoolVar(&so.socketMode, "socket-mode", false, "receive Slack's requests over Socket Mode (needs SLACK_APP_TOKEN) instead of a public URL")
	return cmd
}

// server is a running `signoff serve`: the HTTP listeners, and every loop
// it runs (the listeners' among them) under one supervisor.
type server struct {
	addr      string
	adminAddr string // "" when metrics and health are served nowhere
	slack     string // on and where, or why it is off (slackOff)
	log       *slog.Logger
	http      *http.Server
	admin     *http.Server // nil with adminAddr
	loops     *supervise.Supervisor
}

// startServer wires the bot onto echo (when Slack is on), listens on
// so.addr (":0" in tests) and starts, under one supervisor that readiness
// asks, the workers: execution of approved runs, the deadline sweep, the
// callbacks and, with Slack, its outbox and the sweep of its requests past
// their replay window; the anchors, the metrics, retention and the audit log
// as the config asks; and the listeners. It returns once the listeners are
// bound.
func startServer(ctx context.Context, a *app, so serveOptions) (*server, error) {
	slackOn, err := checkServe(a.cfg, so)
	if err != nil {
		return nil, err
	}
	cb, err := callbackDispatcher(a)
	if err != nil {
		return nil, err
	}
	bs, err := slackServer(ctx, a, so, slackOn)
	if err != nil {
		return nil, err
	}
	var auditFrom int64
	if a.cfg.AuditLog {
		if auditFrom, err = a.engine.LastAuditSeq(ctx); err != nil {
			return nil, err
		}
	}
	e, agents, err := publicHandler(a, bs)
	if err != nil {
		return nil, err
	}
	// The console's Operations page says what /readyz does; the loops it
	// asks are set below, before anything is served.
	hl := &health{store: a.store, engine: a.engine, log: a.log}
	if err := mountConsole(e, a, so.addr, hl.ready); err != nil {
		return nil, err
	}
	ln, adminLn, err := listen(so)
	if err != nil {
		return nil, err
	}
	rt := so.readTimeout
	if rt <= 0 {
		rt = readTimeout
	}
	s := &server{addr: ln.Addr().String(), log: a.log, loops: supervise.New(ctx), http: httpServer(e, rt)}
	hl.loops = s.loops
	s.http.RegisterOnShutdown(agents.Stop) // long polls answer instead of holding the shutdown
	for _, l := range serveLoops(a, so, cb, slackOn) {
		s.loops.Go(l.Name, func(ctx context.Context) error { l.Run(ctx); return nil })
	}
	startSideLoops(s.loops, a, so, auditFrom)
	if slackOn && so.socketMode {
		client := bot.NewSocketModeClient(so.botToken, so.appToken, a.cfg.Slack.APIURL)
		s.loops.Go("socket mode", func(ctx context.Context) error {
			if err := bot.RunSocketMode(ctx, client, bs); err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		})
	}
	serveOn(s.loops, "serve http", s.http, ln)
	if adminLn != nil {
		// Last: a probe that answers finds every loop started.
		s.adminAddr = adminLn.Addr().String()
		s.admin = httpServer(adminHandler(a, s.loops), rt)
		serveOn(s.loops, "serve admin http", s.admin, adminLn)
	}
	s.slack = s.logStart(a, so, slackOn)
	return s, nil
}

// slackServer is the bot that answers Slack's requests, once the bot token
// and the channel were checked (checkSlack); nil when Slack is off.
func slackServer(ctx context.Context, a *app, so serveOptions, slackOn bool) (*bot.Server, error) {
	if !slackOn {
		return nil, nil
	}
	sc, api := a.cfg.Slack, a.slackAPI
	if a.metrics != nil {
		api.OnError(a.metrics.SlackError)
	}
	if err := checkSlack(ctx, a, api, sc); err != nil {
		return nil, err
	}
	return bot.NewServer(bot.ServerConfig{
		Engine: a.engine, SigningSecret: so.signingSecret, AppID: sc.AppID, TeamID: sc.TeamID, EnterpriseID: sc.EnterpriseID,
		Logger: a.log, Slack: api, Directory: a.dir, UserGroups: sc.UserGroups, Command: sc.Command, Refused: refusedCounter(a),
		ConsoleURL: a.cfg.UI.BaseURL,
	})
}

// publicHandler is what Slack and agents reach: the agent API and, with
// Slack on (bs not nil), Slack's routes.
func publicHandler(a *app, bs *bot.Server) (*echo.Echo, *agentapi.Server, error) {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	if a.metrics != nil {
		e.Use(observeHTTP(a.metrics))
	}
	if bs != nil {
		bs.Register(e) // without Slack its routes do not exist: 404
	}
	agents, err := agentapi.Mount(e, agentAPIConfig(a))
	if err != nil {
		return nil, nil, err
	}
	return e, agents, nil
}

// adminHandler is the operator's: metrics and the probes, on a listener of
// their own (loopback by default), never on the port Slack and agents reach,
// where they are 404. Readiness asks loops.
func adminHandler(a *app, loops loopStatus) *echo.Echo {
	admin := echo.New()
	admin.HideBanner, admin.HidePort = true, true
	if a.metrics != nil {
		admin.GET("/metrics", echo.WrapHandler(a.metrics.Handler()))
	}
	(&health{store: a.store, engine: a.engine, loops: loops, log: a.log}).register(admin)
	return admin
}

// listen binds so.addr and, unless it is "", so.adminAddr.
func listen(so serveOptions) (ln, adminLn net.Listener, err error) {
	if ln, err = net.Listen("tcp", so.addr); err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", so.addr, err)
	}
	if so.adminAddr != "" {
		if adminLn, err = net.Listen("tcp", so.adminAddr); err != nil {
			ln.Close()
			return nil, nil, fmt.Errorf("listen on %s (--admin-addr, for metrics and health; \"\" for none): %w", so.adminAddr, err)
		}
	}
	return ln, adminLn, nil
}

// serveOn serves srv on ln as one of the supervisor's loops, until stop
// shuts srv down.
func serveOn(loops *supervise.Supervisor, name string, srv *http.Server, ln net.Listener) {
	loops.Go(name, func(context.Context) error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
}

// serveLoops are the workers: the engine's loops, the Slack dispatcher's
// with Slack on, and the callback dispatcher's, each on its own goroutine so
// that a slow executor never holds up Slack messages or the deadline sweep.
func serveLoops(a *app, so serveOptions, cb *callback.Dispatcher, slackOn bool) []*workflow.Loop {
	feed, _ := a.store.(storage.ChangeFeed)
	loops := a.engine.Loops(so.poll, feed)
	if slackOn {
		sc := a.cfg.Slack
		disp := &bot.Dispatcher{Engine: a.engine, Slack: a.slackAPI, Channel: sc.Channel, AuditChannel: sc.AuditChannel, ConsoleURL: a.cfg.UI.BaseURL, Logger: a.log, ClaimFor: a.leaseTTL, Failpoint: a.failpoint,
			Render: bot.NewRenderer(a.engine, a.engine.Roles(), sc.UserGroups, sc.Command, a.cfg.UI.BaseURL, workflow.SystemClock{})}
		loops = append(loops, disp.Loops(a.changes, so.poll)...)
		loops = append(loops, digestLoops(a, so)...)
	}
	return append(loops, cb.Loop(a.changes, so.poll))
}

// digestLoops are the daily digests of slack.digests, on the app's clock.
// The dispatcher posts them (bot.KindDigest).
func digestLoops(a *app, so serveOptions) []*workflow.Loop {
	every := so.digestEvery
	if every <= 0 {
		every = digestEvery
	}
	var loops []*workflow.Loop
	for _, d := range a.cfg.Slack.Digests {
		g := &bot.Digest{Engine: a.engine, Channel: d.Channel, Hour: d.Hour, Minute: d.Minute, Location: d.Location, Clock: a.clock, Logger: a.log}
		loops = append(loops, g.Loop(workflow.PaceAfter(every)))
	}
	return loops
}

// startSideLoops starts what serve does besides the workers: publishing
// anchors and, as the config and the options ask, refreshing the metrics'
// gauges, retention and logging the audit events from auditFrom on.
func startSideLoops(loops *supervise.Supervisor, a *app, so serveOptions, auditFrom int64) {
	loops.Go("publish audit anchors", func(ctx context.Context) error {
		publishAnchors(ctx, a.engine, a.anchors, a.log, a.cfg.Anchors.Every)
		return nil
	})
	if a.metrics != nil {
		every := so.metricsEvery
		if every <= 0 {
			every = metrics.RefreshEvery
		}
		refresh := a.metrics.RefreshLoop(a.engine, workflow.SystemClock{}, workflow.PaceEvery(every), a.log)
		loops.Go(refresh.Name, func(ctx context.Context) error { refresh.Run(ctx); return nil })
	}
	if r := a.cfg.Retention; r.RunsOlderThan > 0 {
		retention := pruneLoop(a, r.RunsOlderThan, workflow.SystemClock{}, workflow.PaceEvery(r.Every))
		loops.Go("retention", func(ctx context.Context) error { retention.Run(ctx); return nil })
	}
	if a.cfg.AuditLog {
		// From the head at start: the log is a live feed, not a second copy of
		// the history, which `signoff audit --json` exports.
		loops.Go("log audit events", func(ctx context.Context) error {
			logAudit(ctx, a.engine, a.changes, a.log, so.poll, auditFrom)
			return nil
		})
	}
}

// logStart logs what serve serves, and returns what it says of Slack.
func (s *server) logStart(a *app, so serveOptions, slackOn bool) string {
	sc := a.cfg.Slack
	store := "sqlite"
	if isPostgres(a.db) {
		store = "postgres"
	}
	slackState, command := slackOff, ""
	if slackOn {
		command = slashCommand(sc)
		slackState = "on, channel " + sc.Channel + ", command " + command
	}
	a.log.Info("signoff serving", "version", version(), "addr", s.addr, "admin_addr", s.adminAddr, "store", store, "db", a.db,
		"slack", slackState, "channel", sc.Channel, "slack_command", command, "socket_mode", so.socketMode, "owner", a.engine.Owner())
	return slackState
}

// slashCommand is the name of the slash command serve answers.
func slashCommand(sc config.SlackConfig) string {
	if sc.Command != "" {
		return sc.Command
	}
	return bot.DefaultCommand
}

// slackOff is what serve says of Slack when the config has no slack: section
// and the environment no Slack setting.
const slackOff = "off (no slack: section); people approve with signoff approve, agents use the API"

// checkServe says whether serve talks to Slack, and refuses a Slack set up in
// part. Slack is off when the config has no slack: section and no SLACK_*
// setting is in the environment (nor --socket-mode asked): the agent API,
// the workers and the callbacks run, and approvals come by the CLI and the
// API. Any of them turns it on, and then every setting serve needs is
// required: the error names all that are missing, so that one fix does.
func checkServe(cfg *config.Config, so serveOptions) (bool, error) {
	sc := cfg.Slack
	var given []string
	for _, v := range []struct{ name, value string }{
		{"SLACK_SIGNING_SECRET", so.signingSecret}, {"SLACK_BOT_TOKEN", so.botToken}, {"SLACK_APP_TOKEN", so.appToken},
	} {
		if v.value != "" {
			given = append(given, v.name)
		}
	}
	if so.socketMode {
		given = append(given, "--socket-mode")
	}
	if !sc.Given && len(given) == 0 {
		return false, nil
	}
	missing := sc.Missing()
	if !sc.Given {
		missing = (config.SlackConfig{Given: true}).Missing()
	}
	if so.botToken == "" {
		missing = append(missing, "SLACK_BOT_TOKEN (posts and rewrites the approval messages)")
	}
	switch {
	case so.socketMode && so.appToken == "":
		missing = append(missing, "SLACK_APP_TOKEN (an app-level token, xapp-…, for --socket-mode)")
	case !so.socketMode && so.signingSecret == "":
		missing = append(missing, "SLACK_SIGNING_SECRET (verifies that requests come from Slack)")
	}
	if len(missing) == 0 {
		return true, nil
	}
	list := strings.Join(missing, ", ")
	if !sc.Given {
		return false, usageError{fmt.Sprintf("the config has no slack: section, but Slack is asked for (%s), so serve starts nothing; missing: %s. "+
			"Set them all, or unset SLACK_* (without --socket-mode) to serve without Slack (people then approve with signoff approve)", strings.Join(given, ", "), list)}
	}
	return false, cfg.Errorf("slack", "Slack is set up in part, so serve starts nothing; missing: %s. "+
		"Set them all, or remove the slack: section (and unset SLACK_*) to serve without Slack (people then approve with signoff approve)", list)
}

// checkSlack asks Slack whether the bot token works and the bot is in the
// approvals channel, before anything is served. A token Slack refuses or a
// channel it does not know stops the start: nothing could be posted. A bot
// not invited yet only warns, since the invitation is what fixes it and posts
// are retried every minute or two until then; so does Slack being unreachable.
//
// Who the token speaks for is logged (its team id is the one slack.team_id
// wants), and warned about when it is not the config's organisation, whose
// people would all be refused; so is a token without usergroups:read when
// slack.user_groups needs it.
func checkSlack(ctx context.Context, a *app, api *bot.API, sc config.SlackConfig) error {
	id, err := api.CheckSetup(ctx, sc.Channel)
	if id.BotUser != "" { // auth.test answered
		a.log.Info("slack bot token works", "team_id", id.TeamID, "team", id.Team, "enterprise_id", id.EnterpriseID,
			"bot_user_id", id.BotUser, "url", id.URL)
		ours := func(x string) bool { return x != "" && (x == sc.TeamID || x == sc.EnterpriseID) }
		if (id.TeamID != "" || id.EnterpriseID != "") && !ours(id.TeamID) && !ours(id.EnterpriseID) {
			a.log.Warn("SLACK SETUP: the bot token is of another organisation than the config's, so every request from Slack will be refused",
				"token_team_id", id.TeamID, "token_enterprise_id", id.EnterpriseID, "team_id", sc.TeamID, "enterprise_id", sc.EnterpriseID,
				"fix", "set slack.team_id to "+id.TeamID+" (or slack.enterprise_id to the organisation's id), or use the token of the app installed there")
		}
		if len(sc.UserGroups) > 0 && !id.HasScope("usergroups:read") {
			a.log.Warn("SLACK SETUP: the bot token lacks usergroups:read, so members of slack.user_groups cannot approve",
				"fix", "add usergroups:read under OAuth & Permissions (bot/manifest.yaml says where) and reinstall the app")
		}
	}
	var se *bot.SetupError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se) && se.Refuse:
		return err
	case se != nil:
		a.log.Warn("SLACK SETUP: "+se.Problem+"; approval messages wait until it is fixed", "channel", sc.Channel, "fix", se.Fix)
	default:
		a.log.Warn("could not check the Slack setup; starting anyway", "channel", sc.Channel, "error", err.Error())
	}
	return nil
}

// stop shuts the listeners down, then every loop, and reports the errors
// they had.
func (s *server) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.log.Info("signoff stopping: finishing the requests and the work in hand", "addr", s.addr)
	err := s.http.Shutdown(ctx)
	if s.admin != nil {
		// After the public listener: a probe still answers while it drains.
		err = errors.Join(err, s.admin.Shutdown(ctx))
	}
	err = errors.Join(err, s.loops.Stop())
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

// refusedCounter is what the bot tells of refusals: the metric, when serve has metrics.
func refusedCounter(a *app) func(string) {
	if a.metrics == nil {
		return nil
	}
	return a.metrics.Refused
}
