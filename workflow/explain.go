package workflow

import (
	"context"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
)

// Explanation is what Submit would decide for a proposal, before the
// executors' checks run.
type Explanation struct {
	// RequesterRole is the highest role the requester holds; "" when none
	// (possible only where the config lets anyone propose).
	RequesterRole string
	// Actions holds what policy decided for each action, in order.
	Actions []policy.Outcome
	// Gate is the outcome for the proposal as a whole: the strictest risk, and
	// the approval that binds every action (Rule, Risk, PolicyRevision and
	// Approval only: no fingerprint, request or deadline exists yet).
	Gate record.Gate
}

// Explain checks p as Submit does and applies policy, with no store: nothing
// is written and nothing runs. A proposal Submit would refuse gives the same
// *RefusedError; any other error means policy could not decide, where Submit
// would hand the run to a person. cfg.Store is not used.
func Explain(ctx context.Context, cfg Config, p *Proposal) (*Explanation, error) {
	e := &Engine{policy: cfg.Policy, roles: cfg.Roles, dir: cfg.Dir, actions: cfg.Actions, anyone: cfg.AllowUnknownRequesters}
	if e.dir == nil {
		e.dir = rolesDirectory{cfg.Roles}
	}
	e.gates = &gatekeeper{policy: e.policy, roles: e.roles, dir: e.dir, actions: e.actions}
	actions, evidence, _, err := e.checkProposal(ctx, p)
	if err != nil {
		return nil, err
	}
	st := &record.State{Requester: p.Requester, TaskID: p.TaskID, Actions: actions, Evidence: evidence}
	g, outs, role, err := e.gates.outcomes(ctx, st)
	if err != nil {
		return nil, err
	}
	return &Explanation{RequesterRole: role, Actions: outs, Gate: *g}, nil
}
