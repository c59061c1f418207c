package workflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/seal"
)

// deputyFinder names the delegates of the people a reminder or an
// escalation mentions, so that whoever may decide on their behalf is told
// with them.
type deputyFinder struct {
	in *seal.Sealer
}

// find maps each delegator of a delegation that holds at now to its
// delegates, oldest first. A delegation whose seal fails is left out: it
// lets nobody decide (the decider refuses it), and verify reports it.
func (df *deputyFinder) find(ctx context.Context, tx storage.Tx, now time.Time) (map[string][]string, error) {
	ds, err := tx.Delegations(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list delegations: %w", err)
	}
	out := map[string][]string{}
	for _, d := range ds {
		if !d.ActiveAt(now) {
			continue
		}
		if err := df.in.CheckDelegations(ctx, tx, []*record.Delegation{d}); err != nil {
			var ie *record.IntegrityError
			if errors.As(err, &ie) {
				continue
			}
			return nil, err
		}
		if !slices.Contains(out[d.From], d.To) {
			out[d.From] = append(out[d.From], d.To)
		}
	}
	return out, nil
}

// deputiesFor are the delegates of who that may be told of req: never when
// who or the delegate asked for it (a delegation never lets anyone approve
// their own request), nor a delegate who decided it already.
func deputiesFor(deps map[string][]string, who string, req *record.ApprovalRequest, decided map[string]bool) []string {
	if who == req.RequesterID {
		return nil
	}
	var out []string
	for _, to := range deps[who] {
		if to != req.RequesterID && !decided[to] {
			out = append(out, to)
		}
	}
	return out
}

// withDeputies is mention with each one's delegates after them, each id once.
func withDeputies(mention []string, deps map[string][]string, req *record.ApprovalRequest, decided map[string]bool) []string {
	if len(deps) == 0 {
		return mention
	}
	out := make([]string, 0, len(mention))
	for _, id := range mention {
		for _, p := range append([]string{id}, deputiesFor(deps, id, req, decided)...) {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// decidedOn is who decided request reqID, and on whose behalf: a delegate's
// decision counts as the delegator's too.
func decidedOn(reqID string, decisions []record.DecisionRecord) map[string]bool {
	out := map[string]bool{}
	for _, d := range decisions {
		if d.RequestID == reqID {
			out[d.By] = true
			if d.OnBehalfOf != "" {
				out[d.OnBehalfOf] = true
			}
		}
	}
	return out
}
