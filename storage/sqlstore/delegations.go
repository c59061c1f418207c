package sqlstore

import (
	"context"
	"fmt"

	"github.com/signoff-dev/signoff/record"
)

// --- delegations

const delegationColumns = `id, from_id, to_id, until_at, reason, created_by, created_at,
	revoked_at, revoked_by, version, key_id, mac`

func scanDelegation(s Row) (*record.Delegation, error) {
	var (
		d                       record.Delegation
		until, created, revoked int64
	)
	err := s.Scan(&d.ID, &d.From, &d.To, &until, &d.Reason, &d.CreatedBy, &created,
		&revoked, &d.RevokedBy, &d.Version, &d.KeyID, &d.MAC)
	if err != nil {
		return nil, err
	}
	d.Until, d.CreatedAt, d.RevokedAt = fromMillis(until), fromMillis(created), fromMillis(revoked)
	return &d, nil
}

func (t *Tx) InsertDelegation(ctx context.Context, d *record.Delegation) error {
	err := t.guarded(ctx, nil, `INSERT INTO delegations (`+delegationColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
		d.ID, d.From, d.To, millis(d.Until), d.Reason, d.CreatedBy, millis(d.CreatedAt),
		millis(d.RevokedAt), d.RevokedBy, d.KeyID, d.MAC)
	if err != nil {
		return fmt.Errorf("insert delegation %s: %w", d.ID, err)
	}
	d.Version = 1
	return nil
}

func (t *Tx) Delegation(ctx context.Context, id string) (*record.Delegation, error) {
	d, err := scanDelegation(t.queryRow(ctx, `SELECT `+delegationColumns+` FROM delegations WHERE id = ?`, id))
	if err != nil {
		return nil, fmt.Errorf("load delegation %s: %w", id, t.d.Err(err))
	}
	return d, nil
}

func (t *Tx) Delegations(ctx context.Context, to string) ([]*record.Delegation, error) {
	q, args := `SELECT `+delegationColumns+` FROM delegations ORDER BY created_at, id`, []any(nil)
	if to != "" {
		q, args = `SELECT `+delegationColumns+` FROM delegations WHERE to_id = ? ORDER BY created_at, id`, []any{to}
	}
	ds, err := queryAll(ctx, t, scanDelegation, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list delegations: %w", err)
	}
	return ds, nil
}

func (t *Tx) UpdateDelegation(ctx context.Context, d *record.Delegation) error {
	err := t.compareAndSet(ctx, "delegations", "id", d.ID, `UPDATE delegations SET
		from_id = ?, to_id = ?, until_at = ?, reason = ?, created_by = ?, created_at = ?,
		revoked_at = ?, revoked_by = ?, version = version + 1, key_id = ?, mac = ?
		WHERE id = ? AND version = ?`,
		d.From, d.To, millis(d.Until), d.Reason, d.CreatedBy, millis(d.CreatedAt),
		millis(d.RevokedAt), d.RevokedBy, d.KeyID, d.MAC, d.ID, d.Version)
	if err != nil {
		return fmt.Errorf("update delegation %s (version %d): %w", d.ID, d.Version, err)
	}
	d.Version++
	return nil
}
