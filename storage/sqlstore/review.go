package sqlstore

import (
	"context"
	"fmt"

	"github.com/signoff-dev/signoff/record"
)

const reviewColumns = `run_id, request_id, rule, role, forced_by, reason, due, status, acknowledged_by,
	acknowledged_at, note, reminded_at, created_at, version, key_id, mac`

func scanReview(s Row) (*record.Review, error) {
	var (
		r                         record.Review
		due, acked, reminded, cre int64
		status                    string
	)
	if err := s.Scan(&r.RunID, &r.RequestID, &r.Rule, &r.Role, &r.ForcedBy, &r.Reason, &due, &status, &r.AcknowledgedBy,
		&acked, &r.Note, &reminded, &cre, &r.Version, &r.KeyID, &r.MAC); err != nil {
		return nil, err
	}
	r.Status = record.ReviewStatus(status)
	r.Due, r.AcknowledgedAt, r.RemindedAt, r.CreatedAt = fromMillis(due), fromMillis(acked), fromMillis(reminded), fromMillis(cre)
	return &r, nil
}

func (t *Tx) InsertReview(ctx context.Context, r *record.Review) error {
	err := t.guarded(ctx, nil, `INSERT INTO reviews (`+reviewColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
		r.RunID, r.RequestID, r.Rule, r.Role, r.ForcedBy, r.Reason, millis(r.Due), string(r.Status), r.AcknowledgedBy,
		millis(r.AcknowledgedAt), r.Note, millis(r.RemindedAt), millis(r.CreatedAt), r.KeyID, r.MAC)
	if err != nil {
		return fmt.Errorf("insert the review of run %s: %w", r.RunID, err)
	}
	r.Version = 1
	return nil
}

func (t *Tx) Review(ctx context.Context, runID string) (*record.Review, error) {
	r, err := scanReview(t.queryRow(ctx, `SELECT `+reviewColumns+` FROM reviews WHERE run_id = ?`, runID))
	if err != nil {
		return nil, fmt.Errorf("load the review of run %s: %w", runID, t.d.Err(err))
	}
	return r, nil
}

func (t *Tx) Reviews(ctx context.Context, status record.ReviewStatus) ([]*record.Review, error) {
	rs, err := queryAll(ctx, t, scanReview, `SELECT `+reviewColumns+` FROM reviews WHERE status = ? ORDER BY due, run_id`, string(status))
	if err != nil {
		return nil, fmt.Errorf("list the %s reviews: %w", status, err)
	}
	return rs, nil
}

func (t *Tx) UpdateReview(ctx context.Context, r *record.Review) error {
	err := t.compareAndSet(ctx, "reviews", "run_id", r.RunID, `UPDATE reviews SET
		request_id = ?, rule = ?, role = ?, forced_by = ?, reason = ?, due = ?, status = ?, acknowledged_by = ?,
		acknowledged_at = ?, note = ?, reminded_at = ?, created_at = ?, version = version + 1, key_id = ?, mac = ?
		WHERE run_id = ? AND version = ?`,
		r.RequestID, r.Rule, r.Role, r.ForcedBy, r.Reason, millis(r.Due), string(r.Status), r.AcknowledgedBy,
		millis(r.AcknowledgedAt), r.Note, millis(r.RemindedAt), millis(r.CreatedAt), r.KeyID, r.MAC, r.RunID, r.Version)
	if err != nil {
		return fmt.Errorf("update the review of run %s (version %d): %w", r.RunID, r.Version, err)
	}
	r.Version++
	return nil
}
