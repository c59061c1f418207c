package storagetest

// Delegations: their round trip, the listing by whom they are to, and
// revoking by compare-and-set.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

func testDelegations(t *testing.T, s storage.Store) {
	full := &record.Delegation{ID: "dlg-full", From: "U0MANAGER1", To: "U0DEPUTY01", Until: odd.Add(72 * time.Hour),
		Reason: "on leave", CreatedBy: "U0MANAGER1", CreatedAt: odd, RevokedAt: odd.Add(time.Hour), RevokedBy: "U0MANAGER1",
		Version: 7, Seal: record.Seal{KeyID: "k1", MAC: "m4c"}}
	minimal := &record.Delegation{ID: "dlg-min", From: "U0LEAD0001", To: "U0DEPUTY01", Until: base.Add(time.Hour), CreatedAt: base.Add(time.Second)}
	other := &record.Delegation{ID: "dlg-other", From: "U0LEAD0001", To: "U0SOMEONE1", Until: base.Add(time.Hour), CreatedAt: base}
	for _, d := range []*record.Delegation{full, minimal, other} {
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertDelegation(ctx, d) })
		if d.Version != 1 {
			t.Errorf("after InsertDelegation %s Version = %d, want 1", d.ID, d.Version)
		}
	}
	t.Run("round trip", func(t *testing.T) {
		for _, in := range []*record.Delegation{full, minimal} {
			got := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Delegation, error) {
				return tx.Delegation(ctx, in.ID)
			})
			checkSame(t, "Delegation", stored(in), got)
		}
	})
	t.Run("listed by whom they are to, oldest first", func(t *testing.T) {
		cases := []struct {
			to   string
			want []string
		}{
			{"U0DEPUTY01", []string{"dlg-min", "dlg-full"}},
			{"U0SOMEONE1", []string{"dlg-other"}},
			{"", []string{"dlg-other", "dlg-min", "dlg-full"}},
			{"U0NOBODY01", nil},
		}
		for _, tc := range cases {
			ds := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Delegation, error) {
				return tx.Delegations(ctx, tc.to)
			})
			var ids []string
			for _, d := range ds {
				ids = append(ids, d.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("Delegations(%q) = %v, want %v", tc.to, ids, tc.want)
			}
		}
	})
	t.Run("duplicate and not found", func(t *testing.T) {
		err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			return tx.InsertDelegation(ctx, &record.Delegation{ID: "dlg-min", From: "a", To: "b", Until: base})
		})
		wantErr(t, "InsertDelegation of an existing id", err, storage.ErrDuplicate)
		err = s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			_, err := tx.Delegation(ctx, "dlg-none")
			return err
		})
		wantErr(t, "Delegation of an unknown id", err, storage.ErrNotFound)
		err = s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			return tx.UpdateDelegation(ctx, &record.Delegation{ID: "dlg-none", Version: 1})
		})
		wantErr(t, "UpdateDelegation of an unknown id", err, storage.ErrNotFound)
	})
	t.Run("revoked by compare-and-set", func(t *testing.T) {
		d := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Delegation, error) {
			return tx.Delegation(ctx, "dlg-min")
		})
		stale := *d
		d.RevokedAt, d.RevokedBy, d.MAC = base.Add(2*time.Second), "U0LEAD0001", "new-mac"
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.UpdateDelegation(ctx, d) })
		if d.Version != 2 {
			t.Errorf("after UpdateDelegation Version = %d, want 2", d.Version)
		}
		stale.RevokedBy = "U0SOMEONE1"
		err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error { return tx.UpdateDelegation(ctx, &stale) })
		wantErr(t, "UpdateDelegation of a stale version", err, storage.ErrConflict)
		got := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Delegation, error) {
			return tx.Delegation(ctx, "dlg-min")
		})
		checkSame(t, "Delegation", stored(d), got)
	})
}
