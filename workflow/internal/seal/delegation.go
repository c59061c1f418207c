package seal

import (
	"context"
	"fmt"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// delegationParts is what a delegation's MAC covers: everything but its
// version. A delegation says who may approve, so a row edited in the store
// (its person, its end, its revocation) must not let anyone in.
func delegationParts(d *record.Delegation) []string {
	return []string{d.ID, d.From, d.To, ms(d.Until), d.Reason, d.CreatedBy, ms(d.CreatedAt), ms(d.RevokedAt), d.RevokedBy}
}

// CheckDelegations checks the seals of delegations about to be relied on,
// and returns a *record.IntegrityError naming the first at fault. Without
// keys nothing is checked.
func (in *Sealer) CheckDelegations(ctx context.Context, tx storage.Tx, ds []*record.Delegation) error {
	if in.keys == nil || len(ds) == 0 {
		return nil
	}
	h, err := in.keyedHead(ctx, tx)
	if err != nil {
		return err
	}
	for _, d := range ds {
		if p := in.sealProblem(h, "delegation", d.Seal, d.CreatedAt, delegationParts(d)); p != "" {
			return &record.IntegrityError{Problem: fmt.Sprintf("delegation %s (%s to %s): %s", d.ID, d.From, d.To, p)}
		}
	}
	return nil
}
