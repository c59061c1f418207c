package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/signoff-dev/signoff/workflow"
)

// interpretError is the one place where native errors become the sentinels of
// workflow.Store. The native error stays in the chain, for the message.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return workflow.ErrNotFound
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.ExtendedCode {
		case sqlite3.ErrConstraintUnique, sqlite3.ErrConstraintPrimaryKey:
			return fmt.Errorf("%w: %w", workflow.ErrDuplicate, err)
		case sqlite3.ErrConstraintForeignKey:
			// The record refers to one that does not exist (a checkpoint of an
			// unknown run): the caller's "not found", not a storage failure.
			return fmt.Errorf("%w: a record it refers to does not exist: %w", workflow.ErrNotFound, err)
		}
	}
	return err
}

// Encoding of values the database has no type for. See migrations/001_init.sql.

// millis stores t as unix milliseconds in UTC; the zero time is 0.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// fromMillis reverses millis: 0 is the zero time, anything else a UTC time.
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// nullIfEmpty stores "" as NULL, for unique columns where "" means "none".
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// tx is workflow.Tx on one database/sql transaction. Byte slices are bound as
// they are: nil is stored as NULL and read back as nil, an empty slice as a
// zero-length BLOB and read back as an empty, non-nil slice.
type tx struct {
	q *sql.Tx
}

var _ workflow.Tx = (*tx)(nil)

// compareAndSet runs an UPDATE … WHERE <key> = ? AND version = ? and turns zero
// rows changed into ErrNotFound (no such row) or ErrConflict (the row moved on).
func (t *tx) compareAndSet(ctx context.Context, table, keyColumn string, key any, query string, args ...any) error {
	res, err := t.q.ExecContext(ctx, query, args...)
	if err != nil {
		return interpretError(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	var one int
	err = t.q.QueryRowContext(ctx, "SELECT 1 FROM "+table+" WHERE "+keyColumn+" = ?", key).Scan(&one)
	if err != nil {
		return interpretError(err)
	}
	return workflow.ErrConflict
}

// --- runs

const runColumns = `id, workflow, task_id, status, step, seq, version, requester_id, idempotency_key,
	fingerprint, reason, deadline, parent_id, parent_seq, lease_owner, lease_until, fence,
	created_at, updated_at`

func scanRun(s scanner) (*workflow.Run, error) {
	var (
		r                                      workflow.Run
		key                                    sql.NullString
		deadline, leaseUntil, created, updated int64
	)
	err := s.Scan(&r.ID, &r.Workflow, &r.TaskID, &r.Status, &r.Step, &r.Seq, &r.Version,
		&r.RequesterID, &key, &r.Fingerprint, &r.Reason, &deadline, &r.ParentID, &r.ParentSeq,
		&r.LeaseOwner, &leaseUntil, &r.Fence, &created, &updated)
	if err != nil {
		return nil, err
	}
	r.IdempotencyKey = key.String
	r.Deadline = fromMillis(deadline)
	r.LeaseUntil = fromMillis(leaseUntil)
	r.CreatedAt = fromMillis(created)
	r.UpdatedAt = fromMillis(updated)
	return &r, nil
}

func (t *tx) InsertRun(ctx context.Context, r *workflow.Run) error {
	_, err := t.q.ExecContext(ctx, `INSERT INTO runs (`+runColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.Workflow, r.TaskID, r.Status, r.Step, r.Seq, r.RequesterID,
		nullIfEmpty(r.IdempotencyKey), r.Fingerprint, r.Reason, millis(r.Deadline), r.ParentID,
		r.ParentSeq, r.LeaseOwner, millis(r.LeaseUntil), r.Fence, millis(r.CreatedAt),
		millis(r.UpdatedAt))
	if err != nil {
		return fmt.Errorf("insert run %s: %w", r.ID, interpretError(err))
	}
	r.Version = 1
	return nil
}

func (t *tx) Run(ctx context.Context, id string) (*workflow.Run, error) {
	r, err := scanRun(t.q.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, interpretError(err))
	}
	return r, nil
}

func (t *tx) RunByIdempotencyKey(ctx context.Context, key string) (*workflow.Run, error) {
	// "" is stored as NULL and so matches nothing: an empty key names no run.
	r, err := scanRun(t.q.QueryRowContext(ctx,
		`SELECT `+runColumns+` FROM runs WHERE idempotency_key = ?`, key))
	if err != nil {
		return nil, fmt.Errorf("load run by idempotency key %q: %w", key, interpretError(err))
	}
	return r, nil
}

func (t *tx) ListRuns(ctx context.Context, f workflow.RunFilter) ([]*workflow.Run, error) {
	var (
		where []string
		args  []any
	)
	if len(f.Statuses) > 0 {
		where = append(where, "status IN (?"+strings.Repeat(", ?", len(f.Statuses)-1)+")")
		for _, s := range f.Statuses {
			args = append(args, s)
		}
	}
	if !f.DeadlineBefore.IsZero() {
		where = append(where, "deadline <> 0 AND deadline < ?")
		args = append(args, millis(f.DeadlineBefore))
	}
	if !f.AfterCreated.IsZero() || f.AfterID != "" {
		where = append(where, "(created_at, id) > (?, ?)")
		args = append(args, millis(f.AfterCreated), f.AfterID)
	}
	q := `SELECT ` + runColumns + ` FROM runs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY created_at, id`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	runs, err := queryAll(ctx, t.q, scanRun, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

func (t *tx) UpdateRun(ctx context.Context, r *workflow.Run) error {
	err := t.compareAndSet(ctx, "runs", "id", r.ID, `UPDATE runs SET
		workflow = ?, task_id = ?, status = ?, step = ?, seq = ?, version = version + 1,
		requester_id = ?, idempotency_key = ?, fingerprint = ?, reason = ?, deadline = ?,
		parent_id = ?, parent_seq = ?, lease_owner = ?, lease_until = ?, fence = ?,
		created_at = ?, updated_at = ?
		WHERE id = ? AND version = ?`,
		r.Workflow, r.TaskID, r.Status, r.Step, r.Seq, r.RequesterID,
		nullIfEmpty(r.IdempotencyKey), r.Fingerprint, r.Reason, millis(r.Deadline),
		r.ParentID, r.ParentSeq, r.LeaseOwner, millis(r.LeaseUntil), r.Fence,
		millis(r.CreatedAt), millis(r.UpdatedAt), r.ID, r.Version)
	if err != nil {
		return fmt.Errorf("update run %s (version %d): %w", r.ID, r.Version, err)
	}
	r.Version++
	return nil
}

// --- checkpoints

func scanCheckpoint(s scanner) (*workflow.Checkpoint, error) {
	var (
		c       workflow.Checkpoint
		created int64
	)
	if err := s.Scan(&c.RunID, &c.Seq, &c.SchemaVersion, &c.State, &c.PrevHash, &c.Hash, &created); err != nil {
		return nil, err
	}
	c.CreatedAt = fromMillis(created)
	return &c, nil
}

func (t *tx) ClaimRuns(ctx context.Context, owner string, statuses []workflow.Status, now, until time.Time, limit int) ([]*workflow.Run, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	args := []any{owner, millis(until), millis(now)}
	marks := make([]string, len(statuses))
	for i, s := range statuses {
		marks[i] = "?"
		args = append(args, s)
	}
	lim := -1 // SQLite: a negative LIMIT means none
	if limit > 0 {
		lim = limit
	}
	args = append(args, lim)
	// One statement: the single writer makes the select-then-update atomic, so
	// two claimers never lease the same run.
	rows, err := t.q.QueryContext(ctx, `UPDATE runs
		SET lease_owner = ?, lease_until = ?, fence = fence + 1, version = version + 1
		WHERE id IN (SELECT id FROM runs WHERE lease_until <= ? AND status IN (`+strings.Join(marks, ", ")+`)
			ORDER BY updated_at, id LIMIT ?)
		RETURNING `+runColumns, args...)
	if err != nil {
		return nil, fmt.Errorf("claim runs for %s: %w", owner, interpretError(err))
	}
	defer rows.Close()
	var out []*workflow.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("claim runs for %s: %w", owner, interpretError(err))
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim runs for %s: %w", owner, interpretError(err))
	}
	// RETURNING gives rows in no promised order.
	sort.Slice(out, func(i, j int) bool {
		if !out[i].UpdatedAt.Equal(out[j].UpdatedAt) {
			return out[i].UpdatedAt.Before(out[j].UpdatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func (t *tx) AppendCheckpoint(ctx context.Context, c *workflow.Checkpoint) error {
	_, err := t.q.ExecContext(ctx, `INSERT INTO checkpoints
		(run_id, seq, schema_version, state, prev_hash, hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		c.RunID, c.Seq, c.SchemaVersion, c.State, c.PrevHash, c.Hash, millis(c.CreatedAt))
	if err != nil {
		return fmt.Errorf("append checkpoint %s/%d: %w", c.RunID, c.Seq, interpretError(err))
	}
	return nil
}

func (t *tx) Checkpoints(ctx context.Context, runID string) ([]*workflow.Checkpoint, error) {
	cs, err := queryAll(ctx, t.q, scanCheckpoint, `SELECT
		run_id, seq, schema_version, state, prev_hash, hash, created_at
		FROM checkpoints WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of run %s: %w", runID, err)
	}
	return cs, nil
}

// --- approval requests

const requestColumns = `id, run_id, fingerprint, rule, policy_revision, risk, role, count,
	self_approval, edit, requester_id, deadline, status, decided_by, decided_at, channel,
	message_ts, version, created_at`

func scanRequest(s scanner) (*workflow.ApprovalRequest, error) {
	var (
		r                          workflow.ApprovalRequest
		deadline, decided, created int64
	)
	err := s.Scan(&r.ID, &r.RunID, &r.Fingerprint, &r.Rule, &r.PolicyRevision, &r.Risk, &r.Role,
		&r.Count, &r.SelfApproval, &r.Edit, &r.RequesterID, &deadline, &r.Status, &r.DecidedBy,
		&decided, &r.Channel, &r.MessageTS, &r.Version, &created)
	if err != nil {
		return nil, err
	}
	r.Deadline = fromMillis(deadline)
	r.DecidedAt = fromMillis(decided)
	r.CreatedAt = fromMillis(created)
	return &r, nil
}

func (t *tx) InsertRequest(ctx context.Context, r *workflow.ApprovalRequest) error {
	_, err := t.q.ExecContext(ctx, `INSERT INTO approval_requests (`+requestColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)`,
		r.ID, r.RunID, r.Fingerprint, r.Rule, r.PolicyRevision, r.Risk, r.Role, r.Count,
		r.SelfApproval, r.Edit, r.RequesterID, millis(r.Deadline), r.Status, r.DecidedBy,
		millis(r.DecidedAt), r.Channel, r.MessageTS, millis(r.CreatedAt))
	if err != nil {
		return fmt.Errorf("insert approval request %s: %w", r.ID, interpretError(err))
	}
	r.Version = 1
	return nil
}

func (t *tx) Request(ctx context.Context, id string) (*workflow.ApprovalRequest, error) {
	r, err := scanRequest(t.q.QueryRowContext(ctx,
		`SELECT `+requestColumns+` FROM approval_requests WHERE id = ?`, id))
	if err != nil {
		return nil, fmt.Errorf("load approval request %s: %w", id, interpretError(err))
	}
	return r, nil
}

func (t *tx) RequestsForRun(ctx context.Context, runID string) ([]*workflow.ApprovalRequest, error) {
	rs, err := queryAll(ctx, t.q, scanRequest, `SELECT `+requestColumns+`
		FROM approval_requests WHERE run_id = ? ORDER BY created_at, id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list approval requests of run %s: %w", runID, err)
	}
	return rs, nil
}

func (t *tx) UpdateRequest(ctx context.Context, r *workflow.ApprovalRequest) error {
	err := t.compareAndSet(ctx, "approval_requests", "id", r.ID, `UPDATE approval_requests SET
		run_id = ?, fingerprint = ?, rule = ?, policy_revision = ?, risk = ?, role = ?, count = ?,
		self_approval = ?, edit = ?, requester_id = ?, deadline = ?, status = ?, decided_by = ?,
		decided_at = ?, channel = ?, message_ts = ?, version = version + 1, created_at = ?
		WHERE id = ? AND version = ?`,
		r.RunID, r.Fingerprint, r.Rule, r.PolicyRevision, r.Risk, r.Role, r.Count,
		r.SelfApproval, r.Edit, r.RequesterID, millis(r.Deadline), r.Status, r.DecidedBy,
		millis(r.DecidedAt), r.Channel, r.MessageTS, millis(r.CreatedAt), r.ID, r.Version)
	if err != nil {
		return fmt.Errorf("update approval request %s (version %d): %w", r.ID, r.Version, err)
	}
	r.Version++
	return nil
}

// --- decisions

func scanDecision(s scanner) (*workflow.Decision, error) {
	var (
		d  workflow.Decision
		at int64
	)
	err := s.Scan(&d.ID, &d.RequestID, &d.RunID, &d.ApproverID, &d.ApproverName, &d.Role,
		&d.Verdict, &d.Reason, &d.EditedArgs, &d.Via, &d.PayloadDigest, &at)
	if err != nil {
		return nil, err
	}
	d.At = fromMillis(at)
	return &d, nil
}

func (t *tx) InsertDecision(ctx context.Context, d *workflow.Decision) error {
	res, err := t.q.ExecContext(ctx, `INSERT INTO decisions
		(request_id, run_id, approver_id, approver_name, role, verdict, reason, edited_args,
		 via, payload_digest, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.RequestID, d.RunID, d.ApproverID, d.ApproverName, d.Role, d.Verdict, d.Reason,
		d.EditedArgs, d.Via, d.PayloadDigest, millis(d.At))
	if err != nil {
		return fmt.Errorf("insert decision of %s on request %s: %w", d.ApproverID, d.RequestID, interpretError(err))
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("insert decision of %s on request %s: %w", d.ApproverID, d.RequestID, err)
	}
	d.ID = id
	return nil
}

func (t *tx) Decisions(ctx context.Context, runID string) ([]*workflow.Decision, error) {
	ds, err := queryAll(ctx, t.q, scanDecision, `SELECT
		id, request_id, run_id, approver_id, approver_name, role, verdict, reason, edited_args,
		via, payload_digest, at
		FROM decisions WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list decisions of run %s: %w", runID, err)
	}
	return ds, nil
}

// --- operations

const operationColumns = `op_key, run_id, idx, action, args_digest, status, attempts, receipt,
	error, version, created_at, updated_at`

func scanOperation(s scanner) (*workflow.Operation, error) {
	var (
		op               workflow.Operation
		created, updated int64
	)
	err := s.Scan(&op.Key, &op.RunID, &op.Index, &op.Action, &op.ArgsDigest, &op.Status,
		&op.Attempts, &op.Receipt, &op.Error, &op.Version, &created, &updated)
	if err != nil {
		return nil, err
	}
	op.CreatedAt = fromMillis(created)
	op.UpdatedAt = fromMillis(updated)
	return &op, nil
}

func (t *tx) InsertOperation(ctx context.Context, op *workflow.Operation) error {
	_, err := t.q.ExecContext(ctx, `INSERT INTO operations (`+operationColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
		op.Key, op.RunID, op.Index, op.Action, op.ArgsDigest, op.Status, op.Attempts,
		op.Receipt, op.Error, millis(op.CreatedAt), millis(op.UpdatedAt))
	if err != nil {
		return fmt.Errorf("insert operation %s: %w", op.Key, interpretError(err))
	}
	op.Version = 1
	return nil
}

func (t *tx) Operation(ctx context.Context, key string) (*workflow.Operation, error) {
	op, err := scanOperation(t.q.QueryRowContext(ctx,
		`SELECT `+operationColumns+` FROM operations WHERE op_key = ?`, key))
	if err != nil {
		return nil, fmt.Errorf("load operation %s: %w", key, interpretError(err))
	}
	return op, nil
}

func (t *tx) Operations(ctx context.Context, runID string) ([]*workflow.Operation, error) {
	ops, err := queryAll(ctx, t.q, scanOperation, `SELECT `+operationColumns+`
		FROM operations WHERE run_id = ? ORDER BY idx, op_key`, runID)
	if err != nil {
		return nil, fmt.Errorf("list operations of run %s: %w", runID, err)
	}
	return ops, nil
}

func (t *tx) UpdateOperation(ctx context.Context, op *workflow.Operation) error {
	err := t.compareAndSet(ctx, "operations", "op_key", op.Key, `UPDATE operations SET
		run_id = ?, idx = ?, action = ?, args_digest = ?, status = ?, attempts = ?, receipt = ?,
		error = ?, version = version + 1, created_at = ?, updated_at = ?
		WHERE op_key = ? AND version = ?`,
		op.RunID, op.Index, op.Action, op.ArgsDigest, op.Status, op.Attempts, op.Receipt,
		op.Error, millis(op.CreatedAt), millis(op.UpdatedAt), op.Key, op.Version)
	if err != nil {
		return fmt.Errorf("update operation %s (version %d): %w", op.Key, op.Version, err)
	}
	op.Version++
	return nil
}

// --- outbox

func scanOutbox(s scanner) (*workflow.OutboxMessage, error) {
	var (
		m                          workflow.OutboxMessage
		next, delivered, createdAt int64
	)
	err := s.Scan(&m.ID, &m.RunID, &m.Kind, &m.Payload, &m.Attempts, &next, &delivered,
		&m.LastError, &m.Version, &createdAt)
	if err != nil {
		return nil, err
	}
	m.NextAttempt = fromMillis(next)
	m.DeliveredAt = fromMillis(delivered)
	m.CreatedAt = fromMillis(createdAt)
	return &m, nil
}

func (t *tx) EnqueueOutbox(ctx context.Context, m *workflow.OutboxMessage) error {
	res, err := t.q.ExecContext(ctx, `INSERT INTO outbox
		(run_id, kind, payload, attempts, next_attempt, delivered_at, last_error, version, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)`,
		m.RunID, m.Kind, m.Payload, m.Attempts, millis(m.NextAttempt), millis(m.DeliveredAt),
		m.LastError, millis(m.CreatedAt))
	if err != nil {
		return fmt.Errorf("enqueue %s message of run %s: %w", m.Kind, m.RunID, interpretError(err))
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("enqueue %s message of run %s: %w", m.Kind, m.RunID, err)
	}
	m.ID = id
	m.Version = 1
	return nil
}

func (t *tx) DueOutbox(ctx context.Context, now time.Time, limit int) ([]*workflow.OutboxMessage, error) {
	// "delivered_at = 0" is spelled as in the partial index outbox_due, so that
	// the planner may use it. A limit of 0 or less means no limit, as in RunFilter.
	q := `SELECT id, run_id, kind, payload, attempts, next_attempt, delivered_at, last_error,
		version, created_at
		FROM outbox WHERE delivered_at = 0 AND next_attempt <= ? ORDER BY id`
	args := []any{millis(now)}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	ms, err := queryAll(ctx, t.q, scanOutbox, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list due outbox messages: %w", err)
	}
	return ms, nil
}

func (t *tx) UpdateOutbox(ctx context.Context, m *workflow.OutboxMessage) error {
	err := t.compareAndSet(ctx, "outbox", "id", m.ID, `UPDATE outbox SET
		run_id = ?, kind = ?, payload = ?, attempts = ?, next_attempt = ?, delivered_at = ?,
		last_error = ?, version = version + 1, created_at = ?
		WHERE id = ? AND version = ?`,
		m.RunID, m.Kind, m.Payload, m.Attempts, millis(m.NextAttempt), millis(m.DeliveredAt),
		m.LastError, millis(m.CreatedAt), m.ID, m.Version)
	if err != nil {
		return fmt.Errorf("update outbox message %d (version %d): %w", m.ID, m.Version, err)
	}
	m.Version++
	return nil
}

// --- audit

func scanAudit(s scanner) (*workflow.AuditEvent, error) {
	var (
		e  workflow.AuditEvent
		at int64
	)
	if err := s.Scan(&e.Seq, &e.RunID, &e.Actor, &e.Action, &e.Detail, &at, &e.PrevHash, &e.Hash); err != nil {
		return nil, err
	}
	e.At = fromMillis(at)
	return &e, nil
}

func (t *tx) AppendAudit(ctx context.Context, e *workflow.AuditEvent) error {
	// The write transaction holds the file's write lock, so no other writer can
	// append between this read and the insert: the chain stays linear.
	var (
		lastSeq  int64
		lastHash string
	)
	err := t.q.QueryRowContext(ctx, `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&lastSeq, &lastHash)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("append audit %s of run %s: read chain head: %w", e.Action, e.RunID, interpretError(err))
	}
	next := *e
	next.Seq = lastSeq + 1
	next.PrevHash = lastHash
	next.Hash = workflow.AuditHash(&next)
	_, err = t.q.ExecContext(ctx, `INSERT INTO audit (seq, run_id, actor, action, detail, at, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		next.Seq, next.RunID, next.Actor, next.Action, next.Detail, millis(next.At), next.PrevHash, next.Hash)
	if err != nil {
		return fmt.Errorf("append audit %s of run %s: %w", e.Action, e.RunID, interpretError(err))
	}
	*e = next
	return nil
}

func (t *tx) AuditEvents(ctx context.Context, f workflow.AuditFilter) ([]*workflow.AuditEvent, error) {
	q := `SELECT seq, run_id, actor, action, detail, at, prev_hash, hash FROM audit WHERE seq > ?`
	args := []any{f.AfterSeq}
	if f.RunID != "" {
		q += ` AND run_id = ?`
		args = append(args, f.RunID)
	}
	q += ` ORDER BY seq`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	es, err := queryAll(ctx, t.q, scanAudit, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	return es, nil
}

// queryAll runs a query and scans every row with scan.
func queryAll[T any](ctx context.Context, q *sql.Tx, scan func(scanner) (*T, error), query string, args ...any) ([]*T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, interpretError(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err)
	}
	return out, nil
}
