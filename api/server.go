package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"sync"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/signoff-dev/signoff/workflow"
)

// Config is what the API is built from.
type Config struct {
	Engine *workflow.Engine
	Tokens []Token
	// Rate (requests a second) and Burst bound each token's calls
	// (DefaultRate and DefaultBurst when not set).
	Rate   float64
	Burst  int
	Logger *slog.Logger   // defaults to discarding
	Clock  workflow.Clock // the rate limiter's clock; defaults to workflow.SystemClock
	// CursorKeys seal the list cursors the API gives out (HMAC), so that a
	// cursor it never gave out is refused: the first seals, each opens, each
	// of at least 32 bytes. Keep them outside the store and the same on every
	// replica (serve derives them from the integrity keys). Without any, a
	// random key of this process seals, and cursors last as long as it.
	CursorKeys [][]byte
}

// Server is the API: a handler of /v1/… paths.
type Server struct {
	http.Handler
	stopping chan struct{}
	once     sync.Once
}

// Stop ends the waits in progress, each answering the run as it is, so that
// a server shutting down is not held by long polls. Later waits answer at
// once. Give it to http.Server.RegisterOnShutdown.
func (s *Server) Stop() { s.once.Do(func() { close(s.stopping) }) }

// New returns the API. It has its own echo instance, so that its binder
// (strict decoding) and its error handler (problem+json, also for unknown
// routes and methods) apply to /v1 only.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil {
		return nil, fmt.Errorf("new api: an engine is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = workflow.SystemClock{}
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Binder = strictBinder{}
	log := cfg.Logger
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		pe, internal := toProblem(err)
		switch {
		case internal:
			log.Error("api request failed", "method", c.Request().Method, "path", c.Path(), "err", err)
		case pe.p.Status == http.StatusRequestTimeout:
			log.Info("api request body timed out", "method", c.Request().Method, "path", c.Path(),
				"code", pe.p.Code, "status", pe.p.Status, "token_id", tokenOf(c).ID, "remote_addr", c.RealIP())
		default:
			log.Debug("api request refused", "method", c.Request().Method, "path", c.Path(),
				"code", pe.p.Code, "status", pe.p.Status, "token_id", tokenOf(c).ID)
		}
		if werr := writeProblem(c, pe); werr != nil {
			log.Warn("write problem", "err", werr)
		}
	}
	g := newGuard(cfg)
	// A panic answers 500 problem+json and is logged, like any internal error.
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		LogErrorFunc: func(_ echo.Context, err error, _ []byte) error { return err }}), g.middleware)
	srv := &Server{Handler: e, stopping: make(chan struct{})}
	seal, err := newCursorSeal(cfg.CursorKeys)
	if err != nil {
		return nil, fmt.Errorf("new api: %w", err)
	}
	h := &handlers{engine: cfg.Engine, stopping: srv.stopping, cursors: seal}
	RegisterHandlersWithBaseURL(e, NewStrictHandler(h, []StrictMiddlewareFunc{withEchoContext}), "/v1")
	return srv, nil
}

// Mount serves the API under /v1 of e.
func Mount(e *echo.Echo, cfg Config) (*Server, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	e.Any("/v1", echo.WrapHandler(s))
	e.Any("/v1/*", echo.WrapHandler(s))
	return s, nil
}

type echoContextKey struct{}

// withEchoContext hands strict handlers the echo context (the token, the
// response headers) through their context.
func withEchoContext(f StrictHandlerFunc, _ string) StrictHandlerFunc {
	return func(c echo.Context, request any) (any, error) {
		ctx := context.WithValue(c.Request().Context(), echoContextKey{}, c)
		c.SetRequest(c.Request().WithContext(ctx))
		return f(c, request)
	}
}

func echoContext(ctx context.Context) echo.Context {
	c, _ := ctx.Value(echoContextKey{}).(echo.Context)
	return c
}

// maxBody bounds request bodies other than a proposal (a cancel's reason).
const maxBody = 64 << 10

// strictBinder decodes request bodies with the rules of every edge
// (workflow.ReadProposal for a proposal, workflow.DecodeStrict otherwise),
// never with echo's lenient binder: duplicate keys, unknown fields, trailing
// data, invalid UTF-8 and oversized bodies are refused.
type strictBinder struct{}

// bodyTimeout turns a body read cut off by the server's read timeout (a
// client that stalled) into 408 request_timeout, which is the client's
// doing, so that it is neither answered nor logged as the server's failure.
// Any other error is returned as it is.
func bodyTimeout(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return problem(http.StatusRequestTimeout, CodeRequestTimeout, "the request body did not arrive within the server's read timeout; send it again")
	}
	return err
}

func (strictBinder) Bind(v any, c echo.Context) error {
	req := c.Request()
	mt, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || mt != echo.MIMEApplicationJSON {
		return problem(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "send the body as Content-Type: application/json")
	}
	if p, ok := v.(*workflow.Proposal); ok {
		got, err := workflow.ReadProposal(req.Body)
		if err != nil {
			return bodyTimeout(err)
		}
		*p = *got
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, maxBody+1))
	if err != nil {
		return bodyTimeout(fmt.Errorf("read body: %w", err))
	}
	if len(b) > maxBody {
		return problem(http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("the body is larger than %d bytes", maxBody))
	}
	if !utf8.Valid(b) {
		return problem(http.StatusBadRequest, record.CodeInvalidInput, "the body is not valid UTF-8")
	}
	if err := workflow.DecodeStrict(b, v); err != nil {
		return problem(http.StatusBadRequest, record.CodeInvalidInput, "invalid body: "+err.Error())
	}
	return nil
}
