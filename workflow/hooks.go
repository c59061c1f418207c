package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// shownRun is how a transition's view is built: by the engine, in the
// transaction that wrote the transition, once for every hook that asks.
type shownRun struct {
	e    *Engine
	tx   storage.Tx // nil once the hooks have been told
	view *RunView
}

// errToldAlready: a transition's view is only there while its hooks run.
var errToldAlready = errors.New("the view of a transition is only built while its hooks are told of it")

// RunView is the run as the transition leaves it, shown as an agent or a
// callback receiver is shown it (Engine.Redacted): what Get will return,
// redacted, once the transaction commits. The engine builds it the first
// time a hook asks, from the state the transition wrote (a transition
// without a state reads and checks the run as Get does) and the run's
// requests, decisions and operations as the transaction holds them, read in
// one round trip; every other hook of the transition gets the same view. A
// hook must not change it.
func (t *Transition) RunView(ctx context.Context) (*RunView, error) {
	s := &t.shown
	if s.view != nil {
		return s.view, nil
	}
	if s.e == nil || s.tx == nil {
		return nil, errToldAlready
	}
	v, err := s.e.viewOfTransition(ctx, s.tx, t)
	if err != nil {
		return nil, fmt.Errorf("show run %s as %s leaves it: %w", t.Run.ID, t.Event, err)
	}
	s.view = s.e.Redacted(v)
	return s.view, nil
}

// tell tells every hook of the transition c, written in tx, and queues in
// tx the messages they return, in the order of the hooks.
func (e *Engine) tell(ctx context.Context, tx storage.Tx, c runtx.Change) error {
	if len(e.hooks) == 0 {
		return nil
	}
	t := &Transition{Run: c.Run, State: c.State, From: c.From, Event: c.Event, Request: c.Request}
	t.shown = shownRun{e: e, tx: tx}
	defer func() { t.shown.tx = nil }()
	for _, h := range e.hooks {
		ms, err := h.OnTransition(ctx, t)
		if err != nil {
			return fmt.Errorf("%s hook of run %s: %w", t.Event, t.Run.ID, err)
		}
		for _, m := range ms {
			if err := tx.EnqueueOutbox(ctx, m); err != nil {
				return fmt.Errorf("%s hook of run %s: enqueue %s: %w", t.Event, t.Run.ID, m.Kind, err)
			}
		}
	}
	return nil
}
