// Package barebot is the Slack handler in front of an engine that keeps
// nothing, for `signoff bench`: set beside the real handler, it shows what the
// HTTP edge (signature, the replay claim, strict parse, organisation check,
// answer) costs by itself, with no database behind it.
package barebot

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/internal/benchkit"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// NewServer is bot's handler, built from cfg, in front of an engine whose
// every run is v and which counts a decision and answers it as recorded;
// requests are claimed in a store that keeps nothing (benchkit.KeepNothing).
// cfg.Engine gives the roles; its store is not used. The count is the
// decisions taken.
func NewServer(cfg bot.ServerConfig, v *workflow.RunView) (*bot.Server, *atomic.Int64, error) {
	if cfg.Engine == nil {
		return nil, nil, errors.New("new bare slack server: an engine is required, for its roles")
	}
	replays, err := benchkit.KeepNothingReplays(cfg.Engine.Roles())
	if err != nil {
		return nil, nil, err
	}
	eng := &engine{view: v, roles: cfg.Engine.Roles(), replays: replays}
	cfg.Engine = eng
	srv, err := bot.NewServer(cfg)
	if err != nil {
		return nil, nil, err
	}
	return srv, &eng.decided, nil
}

// engine answers like an engine whose one run waits for approval.
type engine struct {
	view    *workflow.RunView
	roles   *policy.Roles
	replays *workflow.Replays
	decided atomic.Int64
}

var _ bot.Engine = (*engine)(nil)

var errBare = errors.New("the bare handler keeps no runs")

func (e *engine) Get(context.Context, string) (*workflow.RunView, error) {
	v := *e.view
	return &v, nil
}

func (e *engine) Decide(_ context.Context, in workflow.DecideInput) (*record.Run, error) {
	e.decided.Add(1)
	return &record.Run{ID: in.RunID, Status: record.StatusExecuting}, nil
}

func (e *engine) List(context.Context, storage.RunFilter) ([]*record.Run, error) {
	return nil, nil
}

func (e *engine) Cancel(context.Context, string, record.Person, string) (*record.Run, error) {
	return nil, errBare
}

func (e *engine) Reassign(context.Context, string, record.Person, record.Person) (*record.Run, error) {
	return nil, errBare
}

func (e *engine) Extend(context.Context, string, record.Person, time.Duration) (*record.Run, error) {
	return nil, errBare
}

func (e *engine) Resolve(context.Context, workflow.ResolveInput) (*record.Run, error) {
	return nil, errBare
}

func (e *engine) Roles() *policy.Roles { return e.roles }

func (e *engine) Action(string) (*workflow.ActionSpec, bool) { return nil, false }

func (e *engine) Replays() *workflow.Replays { return e.replays }
