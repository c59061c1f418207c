package bot

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// NewBareServer is the Slack handler in front of an engine that keeps
// nothing: every run it is asked about is v, and a decision is counted and
// answered as recorded. `signoff bench` sets it beside the real handler, to
// show what the HTTP edge (signature, strict parse, organisation check)
// costs by itself. cfg.Engine gives the roles; its store is not used.
func NewBareServer(cfg ServerConfig, v *workflow.RunView) (*Server, *atomic.Int64, error) {
	if _, err := NewServer(cfg); err != nil {
		return nil, nil, err
	}
	eng := &bareEngine{view: v, roles: cfg.Engine.Roles()}
	return newServer(eng, cfg), &eng.decided, nil
}

// bareEngine answers like an engine whose one run waits for approval.
type bareEngine struct {
	view    *workflow.RunView
	roles   *policy.Roles
	decided atomic.Int64
}

var _ runEngine = (*bareEngine)(nil)

var errBare = errors.New("the bare handler keeps no runs")

func (e *bareEngine) Get(context.Context, string) (*workflow.RunView, error) {
	v := *e.view
	return &v, nil
}

func (e *bareEngine) Decide(_ context.Context, in workflow.DecideInput) (*record.Run, error) {
	e.decided.Add(1)
	return &record.Run{ID: in.RunID, Status: record.StatusExecuting}, nil
}

func (e *bareEngine) List(context.Context, storage.RunFilter) ([]*record.Run, error) {
	return nil, nil
}

func (e *bareEngine) Cancel(context.Context, string, record.Person, string) (*record.Run, error) {
	return nil, errBare
}

func (e *bareEngine) Reassign(context.Context, string, record.Person, record.Person) (*record.Run, error) {
	return nil, errBare
}

func (e *bareEngine) Extend(context.Context, string, record.Person, time.Duration) (*record.Run, error) {
	return nil, errBare
}

func (e *bareEngine) Resolve(context.Context, workflow.ResolveInput) (*record.Run, error) {
	return nil, errBare
}

func (e *bareEngine) Roles() *policy.Roles { return e.roles }

func (e *bareEngine) Action(string) (*workflow.ActionSpec, bool) { return nil, false }
