package bot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// slackCallTimeout bounds the Slack calls made while Slack waits for our
// answer (views.open, chat.postEphemeral): Slack gives up after 3 seconds.
const slackCallTimeout = 2 * time.Second

// SlackActions are the Slack Web API calls the handlers make while answering:
// opening a modal (the trigger id lives 3 seconds, so it cannot wait for the
// outbox) and telling one person why their click changed nothing.
type SlackActions interface {
	OpenView(ctx context.Context, triggerID string, view slack.ModalViewRequest) error
	PostEphemeral(ctx context.Context, channel, user string, blocks []slack.Block, text string) error
}

// Engine is what the handlers need of the engine; *workflow.Engine has it.
// Replays is where each signed request and Socket Mode envelope is claimed
// before it is handled, so that a copy changes nothing (see serveSigned).
type Engine interface {
	Decide(ctx context.Context, in workflow.DecideInput) (*record.Run, error)
	Get(ctx context.Context, id string) (*workflow.RunView, error)
	List(ctx context.Context, f storage.RunFilter) ([]*record.Run, error)
	Cancel(ctx context.Context, id string, by record.Person, reason string) (*record.Run, error)
	Reassign(ctx context.Context, id string, by, to record.Person) (*record.Run, error)
	Extend(ctx context.Context, id string, by record.Person, d time.Duration) (*record.Run, error)
	Resolve(ctx context.Context, in workflow.ResolveInput) (*record.Run, error)
	Roles() *policy.Roles
	Action(name string) (*workflow.ActionSpec, bool)
	Replays() *workflow.Replays
}

var _ Engine = (*workflow.Engine)(nil)

// ServerConfig is what a Server is built from.
type ServerConfig struct {
	// Engine decides and keeps the runs: a *workflow.Engine.
	Engine        Engine
	SigningSecret string
	// AppID is required; TeamID or EnterpriseID (or both) too. See Origin for
	// which requests they admit.
	AppID, TeamID, EnterpriseID string
	Clock                       workflow.Clock // defaults to workflow.SystemClock
	Logger                      *slog.Logger   // defaults to discarding
	Slack                       SlackActions
	MaxBody                     int64 // defaults to DefaultMaxBody
	// Directory resolves roles for the read-only commands (/runs pending,
	// /runs show), which the engine does not check. It should be the one the
	// engine was built with; nil uses the config's members (Engine.Roles()).
	Directory workflow.Directory
	// UserGroups (role → Slack user group) are mentioned in /runs show.
	UserGroups map[string]string
	// Command is the slash command's name, as the app defines it
	// (slack.command); "" is DefaultCommand. Help and replies name it, and a
	// command of another name is told which one this server answers.
	Command string
	// Refused, when set, is told why a request was refused: signature, app,
	// team, role, fingerprint, deadline or replay (serve counts them).
	Refused func(reason string)
	// ConsoleURL is the web console's address (ui.base_url): a click whose
	// approval must be confirmed on the web is told the run's page there.
	ConsoleURL string
}

// DefaultCommand is the slash command's name unless the config names another.
const DefaultCommand = "/runs"

// Server answers Slack's interaction and slash-command requests.
type Server struct {
	eng     Engine
	secret  string
	origin  Origin
	clock   workflow.Clock
	log     *slog.Logger
	slack   SlackActions
	maxBody int64
	dir     workflow.Directory
	groups  map[string]string
	slash   string // the slash command's name
	refused func(reason string)
	console string // the web console's address, "" for none
	// seen keeps the requests taken (see serveSigned): the engine's.
	seen *workflow.Replays
}

// NewServer checks cfg and builds a Server. It refuses a config that would
// admit requests it cannot attribute: no app id, or neither a team nor an
// enterprise id. Without a signing secret the HTTP routes refuse every
// request (401), which suits a server that takes Slack's requests over
// Socket Mode only.
func NewServer(cfg ServerConfig) (*Server, error) {
	switch {
	case cfg.Engine == nil:
		return nil, errors.New("new slack server: an engine is required")
	case cfg.AppID == "":
		return nil, errors.New("new slack server: slack.app_id is required: requests from other apps must be refused")
	case cfg.TeamID == "" && cfg.EnterpriseID == "":
		return nil, errors.New("new slack server: slack.team_id or slack.enterprise_id is required: requests from other organisations must be refused")
	case cfg.Slack == nil:
		return nil, errors.New("new slack server: a Slack client is required (modals and ephemeral replies)")
	}
	return newServer(cfg.Engine, cfg), nil
}

func newServer(eng Engine, cfg ServerConfig) *Server {
	s := &Server{
		eng: eng, seen: eng.Replays(), secret: cfg.SigningSecret, clock: cfg.Clock, log: cfg.Logger, slack: cfg.Slack,
		maxBody: cfg.MaxBody, dir: cfg.Directory, groups: cfg.UserGroups, slash: cfg.Command, refused: cfg.Refused, console: cfg.ConsoleURL,
		origin: Origin{AppID: cfg.AppID, TeamID: cfg.TeamID, EnterpriseID: cfg.EnterpriseID},
	}
	if s.clock == nil {
		s.clock = workflow.SystemClock{}
	}
	if s.slash == "" {
		s.slash = DefaultCommand
	}
	if s.refused == nil {
		s.refused = func(string) {}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBody
	}
	if s.dir == nil {
		s.dir = rolesOnly{eng.Roles()}
	}
	if s.secret == "" {
		s.log.Warn("no Slack signing secret: every HTTP request from Slack will be refused; only Socket Mode can reach this server")
	}
	return s
}

// rolesOnly resolves roles from the config's members alone.
type rolesOnly struct{ r *policy.Roles }

func (d rolesOnly) RoleOf(_ context.Context, id string) (string, bool, error) {
	role, ok := d.r.RoleOf(id)
	return role, ok, nil
}

// Register adds the Slack routes to e. No body-reading middleware may run
// before them: the signature is over the raw body.
func (s *Server) Register(e *echo.Echo) {
	e.POST("/slack/interactions", s.serveInteraction)
	e.POST("/slack/commands", s.serveCommand)
}

// Response is the answer to one Slack request: Body is sent as JSON (a
// slash-command message, a modal's response_action), or nothing when nil.
// Over Socket Mode it is the ack's payload.
type Response struct {
	Body any
}

func (s *Server) serveInteraction(c echo.Context) error {
	return s.serveSigned(c, "interaction", s.approveClickOf, func(ctx context.Context, raw []byte) (Response, error) {
		payload, err := InteractionPayload(raw)
		if err != nil {
			return Response{}, err
		}
		return s.handleInteraction(ctx, payload, digest(raw))
	})
}

func (s *Server) serveCommand(c echo.Context) error {
	return s.serveSigned(c, "command", nil, func(ctx context.Context, raw []byte) (Response, error) {
		form, err := CommandForm(raw)
		if err != nil {
			return Response{}, err
		}
		return s.HandleCommand(ctx, form)
	})
}

// errUnsigned wraps signature failures, answered 401.
var errUnsigned = errors.New("unsigned")

// readVerified reads the body once, within the limit, and verifies its
// signature before anything parses it.
func (s *Server) readVerified(c echo.Context) ([]byte, error) {
	req := c.Request()
	if req.ContentLength > s.maxBody {
		return nil, fmt.Errorf("%w: %d bytes (at most %d)", ErrTooLarge, req.ContentLength, s.maxBody)
	}
	raw, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, s.maxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, s.maxBody)
		}
		if isTimeout(err) {
			return nil, fmt.Errorf("%w: %v", ErrBodyTimeout, err)
		}
		return nil, fmt.Errorf("%w: read body: %v", ErrMalformed, err)
	}
	if err := VerifySignature(req.Header, raw, s.secret, s.clock.Now()); err != nil {
		s.refused("signature")
		return nil, fmt.Errorf("%w: %w", errUnsigned, err)
	}
	return raw, nil
}

// isTimeout says whether a body read failed because the connection's read
// deadline (the server's read timeout) passed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// statusOf maps a request-level error to its HTTP status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errUnsigned):
		return http.StatusUnauthorized
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrBodyTimeout):
		return http.StatusRequestTimeout
	case errors.Is(err, ErrMalformed):
		return http.StatusBadRequest
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

// digest is the hex SHA-256 of what carried a decision, kept with it.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// HandleInteraction handles one interaction payload (the JSON of the payload
// form field) whose origin the transport has already authenticated: over HTTP
// by its signature, over Socket Mode by the connection. It checks the app and
// organisation, then acts. The error is for requests that are themselves
// wrong (ErrMalformed, ErrForbidden) or an internal failure; a refusal of
// what a person asked for is a Response, told to them.
func (s *Server) HandleInteraction(ctx context.Context, payload []byte) (Response, error) {
	return s.handleInteraction(ctx, payload, digest(payload))
}

func (s *Server) handleInteraction(ctx context.Context, payload []byte, digest string) (Response, error) {
	ic, err := ParseInteraction(payload)
	if err != nil {
		return Response{}, err
	}
	if err := s.origin.CheckInteraction(ic); err != nil {
		s.refused(originReason(err))
		return Response{}, err
	}
	switch ic.Type {
	case TypeBlockActions:
		return s.blockAction(ctx, ic, digest)
	case TypeViewSubmission:
		if ic.View == nil {
			return Response{}, fmt.Errorf("%w: view_submission without a view", ErrMalformed)
		}
		if ic.View.AppID != "" && ic.View.AppID != s.origin.AppID {
			return Response{}, fmt.Errorf("%w: view of app %q", ErrForbidden, clipErr(ic.View.AppID, 40))
		}
		switch ic.View.CallbackID {
		case CallbackReject:
			return s.submitReject(ctx, ic, digest)
		case CallbackEdit:
			return s.submitEdit(ctx, ic, digest)
		}
	}
	// Shortcuts, closed modals, other apps' leftovers: acknowledged, ignored.
	s.log.Debug("slack interaction ignored", "type", ic.Type)
	return Response{}, nil
}

// HandleCommand handles one slash command whose origin the transport has
// already authenticated. Its answer is an ephemeral message.
func (s *Server) HandleCommand(ctx context.Context, form url.Values) (Response, error) {
	cmd, err := ParseCommand(form)
	if err != nil {
		return Response{}, err
	}
	if err := s.origin.CheckCommand(cmd); err != nil {
		s.refused(originReason(err))
		return Response{}, err
	}
	return s.command(ctx, cmd), nil
}
