package sqlstore

import (
	"context"
	"fmt"
	"time"
)

// --- seen requests (the replay cache)

const seenColumns = `digest, version, created_at, expires_at, answered_at, status, content_type, body`

func scanSeen(s Row) (*record.SeenRequest, error) {
	var (
		r                          record.SeenRequest
		created, expires, answered int64
	)
	err := s.Scan(&r.Digest, &r.Version, &created, &expires, &answered, &r.Status, &r.ContentType, &r.Body)
	if err != nil {
		return nil, err
	}
	r.CreatedAt = fromMillis(created)
	r.ExpiresAt = fromMillis(expires)
	r.AnsweredAt = fromMillis(answered)
	return &r, nil
}

// ClaimRequest inserts with ON CONFLICT DO NOTHING rather than reading first:
// the unique key decides between two claimers, and on PostgreSQL the second
// waits for the first's commit and then reads its row (read committed).
func (t *Tx) ClaimRequest(ctx context.Context, r *record.SeenRequest) (*record.SeenRequest, bool, error) {
	n, err := t.c.Exec(ctx, t.d.Bind(`INSERT INTO seen_requests (`+seenColumns+`)
		VALUES (?, 1, ?, ?, ?, ?, ?, ?) ON CONFLICT (digest) DO NOTHING`),
		r.Digest, millis(r.CreatedAt), millis(r.ExpiresAt), millis(r.AnsweredAt), r.Status, r.ContentType, r.Body)
	if err != nil {
		return nil, false, fmt.Errorf("claim request %s: %w", r.Digest, t.d.Err(err))
	}
	if n == 1 {
		r.Version = 1
		return r, true, nil
	}
	first, err := t.SeenRequest(ctx, r.Digest)
	if err != nil {
		return nil, false, fmt.Errorf("claim request %s: %w", r.Digest, err)
	}
	return first, false, nil
}

func (t *Tx) SeenRequest(ctx context.Context, digest string) (*record.SeenRequest, error) {
	r, err := scanSeen(t.queryRow(ctx, `SELECT `+seenColumns+` FROM seen_requests WHERE digest = ?`, digest))
	if err != nil {
		return nil, fmt.Errorf("load request %s: %w", digest, t.d.Err(err))
	}
	return r, nil
}

func (t *Tx) AnswerRequest(ctx context.Context, r *record.SeenRequest) error {
	err := t.compareAndSet(ctx, "seen_requests", "digest", r.Digest, `UPDATE seen_requests SET
		version = version + 1, answered_at = ?, status = ?, content_type = ?, body = ?
		WHERE digest = ? AND version = ?`,
		millis(r.AnsweredAt), r.Status, r.ContentType, r.Body, r.Digest, r.Version)
	if err != nil {
		return fmt.Errorf("answer request %s (version %d): %w", r.Digest, r.Version, err)
	}
	r.Version++
	return nil
}

// ForgetRequests bounds its batch through a sub-select, since neither
// database takes a LIMIT on DELETE in its default build.
func (t *Tx) ForgetRequests(ctx context.Context, now time.Time, limit int) (int, error) {
	q, args := `DELETE FROM seen_requests WHERE expires_at <= ?`, []any{millis(now)}
	if limit > 0 {
		q = `DELETE FROM seen_requests WHERE digest IN (
			SELECT digest FROM seen_requests WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)`
		args = append(args, limit)
	}
	n, err := t.c.Exec(ctx, t.d.Bind(q), args...)
	if err != nil {
		return 0, fmt.Errorf("forget requests expired by %s: %w", now.UTC().Format(time.RFC3339), t.d.Err(err))
	}
	return int(n), nil
}
