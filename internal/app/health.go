package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/signoff-dev/signoff/internal/supervise"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/postgres"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// healthTimeout bounds one readiness check: a probe that waits longer than its
// own timeout tells the orchestrator nothing.
const healthTimeout = 2 * time.Second

// schemaChecker is a store that can say whether its schema is still this
// build's (both drivers can).
type schemaChecker interface {
	CheckSchema(ctx context.Context) error
}

// loopStatus is what readiness asks of the loops of serve: its supervisor.
type loopStatus interface {
	Status() supervise.Status
}

// health answers the probes: /livez (the process answers), /readyz (the store
// answers, its schema is current, every loop of serve runs) and /healthz, its
// alias.
type health struct {
	store  storage.Store // its schema is checked
	engine *workflow.Engine
	loops  loopStatus
	log    *slog.Logger
}

func (h *health) register(e *echo.Echo) {
	e.GET("/livez", h.serveLive)
	e.GET("/readyz", h.serveReady)
	e.GET("/healthz", h.serveReady)
}

func (h *health) serveLive(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (h *health) serveReady(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), healthTimeout)
	defer cancel()
	if err := h.ready(ctx); err != nil {
		h.log.Warn("not ready", "error", err.Error())
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": err.Error()})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// ready returns why the server should not be sent traffic, or nil.
func (h *health) ready(ctx context.Context) error {
	// One cheap indexed read: it needs a connection and a snapshot, which is
	// what every request needs.
	if _, err := h.engine.List(ctx, storage.RunFilter{Limit: 1}); err != nil {
		return fmt.Errorf("store unreachable: %w", err)
	}
	if sc, ok := h.store.(schemaChecker); ok {
		if err := sc.CheckSchema(ctx); err != nil {
			if schemaProblem(err) {
				return fmt.Errorf("schema not current: %w", err)
			}
			return fmt.Errorf("store unreachable: %w", err)
		}
	}
	st := h.loops.Status()
	switch {
	case st.Started == 0:
		return errors.New("workers not started")
	case st.Running < st.Started:
		exited := make([]string, len(st.Exited))
		for i, e := range st.Exited {
			exited[i] = e.String()
		}
		return fmt.Errorf("workers stopped: %d of %d running (%s)", st.Running, st.Started, strings.Join(exited, "; "))
	}
	return nil
}

// schemaProblem tells a schema that is behind, ahead or different from a
// store that did not answer.
func schemaProblem(err error) bool {
	for _, target := range []error{postgres.ErrNotMigrated, postgres.ErrSchemaTooNew, postgres.ErrMigrationChanged,
		sqlite.ErrNotMigrated, sqlite.ErrSchemaTooNew, sqlite.ErrMigrationChanged} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
