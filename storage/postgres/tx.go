package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/signoff-dev/signoff/workflow"
)

// SQLSTATE codes that become sentinels of workflow.Store.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
)

// interpretError is the one place where native errors become the sentinels of
// workflow.Store. The native error stays in the chain, for the message.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return workflow.ErrNotFound
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case codeUniqueViolation:
			return fmt.Errorf("%w: %w", workflow.ErrDuplicate, err)
		case codeForeignKeyViolation:
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
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// statusNames is statuses as the text array that = ANY($n) takes.
func statusNames(statuses []workflow.Status) []string {
	out := make([]string, len(statuses))
	for i, s := range statuses {
		out[i] = string(s)
	}
	return out
}

// scanner is pgx.Row or pgx.Rows.
type scanner interface{ Scan(dest ...any) error }

// tx is workflow.Tx on one pgx transaction. Byte slices are bound as they are:
// pgx sends nil as NULL and reads NULL back as nil, and an empty slice as a
// zero-length BYTEA read back as an empty, non-nil slice.
type tx struct {
	q pgx.Tx
	// write is set inside Update. There, reading a run locks its row until
	// commit: at READ COMMITTED each statement sees the latest commits, so
	// without the lock a decision committed by another replica between reading
	// the run and reading its checkpoints would look like a damaged chain.
	// Every write transaction reads its run before anything else, so the lock
	// order is always run first, then audit_head: no deadlock between them.
	write bool
}

var _ workflow.Tx = (*tx)(nil)

// PostgreSQL aborts a whole transaction on any failed statement, where SQLite
// fails only the statement. The contract promises that a transaction goes on
// after ErrDuplicate or ErrNotFound (submit tries an insert and reads the run
// that holds the key), so the statements that can fail on a constraint run
// inside a savepoint, and a failure rolls back to it and nothing more.
//
// SAVEPOINT, the statement and RELEASE travel in one pipeline (a pgx batch), so a
// guarded statement costs one round trip, like an unguarded one; only a failure
// costs a second (ROLLBACK TO). The price is a subtransaction on the server per
// guarded write: a handful per transaction, well below the 64 that PostgreSQL
// caches per backend before subtransactions get slow for everyone.
//
// Statements that cannot fail on a constraint (reads, the claim, the outbox and
// the audit chain, which have no unique key a caller could hit) are not guarded:
// if one fails, something is wrong beyond the contract, and the transaction is
// lost anyway.

const savepoint = "signoff_stmt"

// guard runs query inside a savepoint. scan reads its one row of results; nil
// means the statement returns none.
func (t *tx) guard(ctx context.Context, scan func(pgx.Row) error, query string, args ...any) error {
	b := &pgx.Batch{}
	b.Queue("SAVEPOINT " + savepoint)
	b.Queue(query, args...)
	b.Queue("RELEASE SAVEPOINT " + savepoint)
	br := t.q.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		if scan != nil {
			err = scan(br.QueryRow())
		} else {
			_, err = br.Exec()
		}
	}
	if err == nil {
		_, err = br.Exec()
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		return nil
	}
	// Back to the state before the statement, and the savepoint forgotten, so
	// that the next guarded statement starts clean. One simple-protocol round trip.
	if _, rbErr := t.q.Exec(ctx, "ROLLBACK TO SAVEPOINT "+savepoint+"; RELEASE SAVEPOINT "+savepoint); rbErr != nil {
		return errors.Join(interpretError(err), fmt.Errorf("roll back to savepoint: %w", rbErr))
	}
	return interpretError(err)
}

// compareAndSet runs update, an UPDATE … WHERE <key> = $1 AND version = $2, in a
// savepoint, and turns zero rows changed into ErrNotFound (no such row) or
// ErrConflict (the row moved on). One statement answers both questions: the
// UPDATE in a CTE, and an EXISTS over the statement's snapshot, which still
// holds the row if it was there, whoever changed it since.
func (t *tx) compareAndSet(ctx context.Context, table, keyColumn, update string, args ...any) error {
	query := `WITH changed AS (` + update + ` RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM changed), EXISTS (SELECT 1 FROM ` + table + ` WHERE ` + keyColumn + ` = $1)`
	var changed, exists bool
	err := t.guard(ctx, func(r pgx.Row) error { return r.Scan(&changed, &exists) }, query, args...)
	switch {
	case err != nil:
		return err
	case changed:
		return nil
	case exists:
		return workflow.ErrConflict
	}
	return workflow.ErrNotFound
}

// params numbers the placeholders of a query built piece by piece.
type params []any

func (p *params) add(v any) string {
	*p = append(*p, v)
	return "$" + strconv.Itoa(len(*p))
}

// --- runs

const runColumns = `id, workflow, task_id, status, step, seq, version, requester_id, idempotency_key,
	fingerprint, reason, deadline, parent_id, parent_seq, lease_owner, lease_until, fence,
	created_at, updated_at`

func scanRun(s scanner) (*workflow.Run, error) {
	var (
		r                                      workflow.Run
		key                                    *string
		deadline, leaseUntil, created, updated int64
	)
	err := s.Scan(&r.ID, &r.Workflow, &r.TaskID, &r.Status, &r.Step, &r.Seq, &r.Version,
		&r.RequesterID, &key, &r.Fingerprint, &r.Reason, &deadline, &r.ParentID, &r.ParentSeq,
		&r.LeaseOwner, &leaseUntil, &r.Fence, &created, &updated)
	if err != nil {
		return nil, err
	}
	if key != nil {
		r.IdempotencyKey = *key
	}
	r.Deadline = fromMillis(deadline)
	r.LeaseUntil = fromMillis(leaseUntil)
	r.CreatedAt = fromMillis(created)
	r.UpdatedAt = fromMillis(updated)
	return &r, nil
}

func (t *tx) InsertRun(ctx context.Context, r *workflow.Run) error {
	err := t.guard(ctx, nil, `INSERT INTO runs (`+runColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
		r.ID, r.Workflow, r.TaskID, string(r.Status), r.Step, r.Seq, r.RequesterID,
		nullIfEmpty(r.IdempotencyKey), r.Fingerprint, r.Reason, millis(r.Deadline), r.ParentID,
		r.ParentSeq, r.LeaseOwner, millis(r.LeaseUntil), r.Fence, millis(r.CreatedAt),
		millis(r.UpdatedAt))
	if err != nil {
		return fmt.Errorf("insert run %s: %w", r.ID, err)
	}
	r.Version = 1
	return nil
}

func (t *tx) Run(ctx context.Context, id string) (*workflow.Run, error) {
	q := `SELECT ` + runColumns + ` FROM runs WHERE id = $1`
	if t.write {
		q += ` FOR UPDATE`
	}
	r, err := scanRun(t.q.QueryRow(ctx, q, id))
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, interpretError(err))
	}
	return r, nil
}

func (t *tx) RunByIdempotencyKey(ctx context.Context, key string) (*workflow.Run, error) {
	// "" is stored as NULL and so matches nothing: an empty key names no run.
	r, err := scanRun(t.q.QueryRow(ctx,
		`SELECT `+runColumns+` FROM runs WHERE idempotency_key = $1`, key))
	if err != nil {
		return nil, fmt.Errorf("load run by idempotency key %q: %w", key, interpretError(err))
	}
	return r, nil
}

func (t *tx) ListRuns(ctx context.Context, f workflow.RunFilter) ([]*workflow.Run, error) {
	var (
		where []string
		args  params
	)
	if len(f.Statuses) > 0 {
		where = append(where, "status = ANY("+args.add(statusNames(f.Statuses))+")")
	}
	if !f.DeadlineBefore.IsZero() {
		where = append(where, "deadline <> 0 AND deadline < "+args.add(millis(f.DeadlineBefore)))
	}
	if !f.AfterCreated.IsZero() || f.AfterID != "" {
		where = append(where, "(created_at, id) > ("+args.add(millis(f.AfterCreated))+", "+args.add(f.AfterID)+")")
	}
	q := `SELECT ` + runColumns + ` FROM runs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY created_at, id`
	if f.Limit > 0 {
		q += ` LIMIT ` + args.add(f.Limit)
	}
	runs, err := queryAll(ctx, t.q, scanRun, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

func (t *tx) UpdateRun(ctx context.Context, r *workflow.Run) error {
	err := t.compareAndSet(ctx, "runs", "id", `UPDATE runs SET
		workflow = $3, task_id = $4, status = $5, step = $6, seq = $7, version = version + 1,
		requester_id = $8, idempotency_key = $9, fingerprint = $10, reason = $11, deadline = $12,
		parent_id = $13, parent_seq = $14, lease_owner = $15, lease_until = $16, fence = $17,
		created_at = $18, updated_at = $19
		WHERE id = $1 AND version = $2`,
		r.ID, r.Version, r.Workflow, r.TaskID, string(r.Status), r.Step, r.Seq, r.RequesterID,
		nullIfEmpty(r.IdempotencyKey), r.Fingerprint, r.Reason, millis(r.Deadline),
		r.ParentID, r.ParentSeq, r.LeaseOwner, millis(r.LeaseUntil), r.Fence,
		millis(r.CreatedAt), millis(r.UpdatedAt))
	if err != nil {
		return fmt.Errorf("update run %s (version %d): %w", r.ID, r.Version, err)
	}
	r.Version++
	return nil
}

func (t *tx) ClaimRuns(ctx context.Context, owner string, statuses []workflow.Status, now, until time.Time, limit int) ([]*workflow.Run, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	var lim *int // LIMIT NULL is no limit
	if limit > 0 {
		lim = &limit
	}
	// FOR UPDATE SKIP LOCKED: a run another claimer has locked is passed over,
	// not waited for, so claimers on several replicas share the work instead of
	// queueing on the same rows. A run whose lease another claimer committed
	// since this statement's snapshot is re-checked against its new row
	// (lease_until is then in the future) and left out. MATERIALIZED keeps the
	// locking SELECT a single step that runs once, whatever the planner prefers.
	rows, err := t.q.Query(ctx, `WITH picked AS MATERIALIZED (
			SELECT id AS picked_id FROM runs
			WHERE status = ANY($3) AND lease_until <= $4
			ORDER BY updated_at, id
			LIMIT $5
			FOR UPDATE SKIP LOCKED
		)
		UPDATE runs SET lease_owner = $1, lease_until = $2, fence = fence + 1, version = version + 1
		FROM picked WHERE id = picked_id
		RETURNING `+runColumns,
		owner, millis(until), statusNames(statuses), millis(now), lim)
	if err != nil {
		return nil, fmt.Errorf("claim runs for %s: %w", owner, interpretError(err))
	}
	out, err := collect(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("claim runs for %s: %w", owner, err)
	}
	// RETURNING gives rows in no promised order.
	slices.SortFunc(out, func(a, b *workflow.Run) int {
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
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

func (t *tx) AppendCheckpoint(ctx context.Context, c *workflow.Checkpoint) error {
	err := t.guard(ctx, nil, `INSERT INTO checkpoints
		(run_id, seq, schema_version, state, prev_hash, hash, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		c.RunID, c.Seq, c.SchemaVersion, c.State, c.PrevHash, c.Hash, millis(c.CreatedAt))
	if err != nil {
		return fmt.Errorf("append checkpoint %s/%d: %w", c.RunID, c.Seq, err)
	}
	return nil
}

func (t *tx) Checkpoints(ctx context.Context, runID string) ([]*workflow.Checkpoint, error) {
	cs, err := queryAll(ctx, t.q, scanCheckpoint, `SELECT
		run_id, seq, schema_version, state, prev_hash, hash, created_at
		FROM checkpoints WHERE run_id = $1 ORDER BY seq`, runID)
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
	err := t.guard(ctx, nil, `INSERT INTO approval_requests (`+requestColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, 1, $18)`,
		r.ID, r.RunID, r.Fingerprint, r.Rule, r.PolicyRevision, r.Risk, r.Role, r.Count,
		r.SelfApproval, r.Edit, r.RequesterID, millis(r.Deadline), string(r.Status), r.DecidedBy,
		millis(r.DecidedAt), r.Channel, r.MessageTS, millis(r.CreatedAt))
	if err != nil {
		return fmt.Errorf("insert approval request %s: %w", r.ID, err)
	}
	r.Version = 1
	return nil
}

func (t *tx) Request(ctx context.Context, id string) (*workflow.ApprovalRequest, error) {
	r, err := scanRequest(t.q.QueryRow(ctx,
		`SELECT `+requestColumns+` FROM approval_requests WHERE id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("load approval request %s: %w", id, interpretError(err))
	}
	return r, nil
}

func (t *tx) RequestsForRun(ctx context.Context, runID string) ([]*workflow.ApprovalRequest, error) {
	rs, err := queryAll(ctx, t.q, scanRequest, `SELECT `+requestColumns+`
		FROM approval_requests WHERE run_id = $1 ORDER BY created_at, id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list approval requests of run %s: %w", runID, err)
	}
	return rs, nil
}

func (t *tx) UpdateRequest(ctx context.Context, r *workflow.ApprovalRequest) error {
	err := t.compareAndSet(ctx, "approval_requests", "id", `UPDATE approval_requests SET
		run_id = $3, fingerprint = $4, rule = $5, policy_revision = $6, risk = $7, role = $8,
		count = $9, self_approval = $10, edit = $11, requester_id = $12, deadline = $13,
		status = $14, decided_by = $15, decided_at = $16, channel = $17, message_ts = $18,
		version = version + 1, created_at = $19
		WHERE id = $1 AND version = $2`,
		r.ID, r.Version, r.RunID, r.Fingerprint, r.Rule, r.PolicyRevision, r.Risk, r.Role, r.Count,
		r.SelfApproval, r.Edit, r.RequesterID, millis(r.Deadline), string(r.Status), r.DecidedBy,
		millis(r.DecidedAt), r.Channel, r.MessageTS, millis(r.CreatedAt))
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
	var id int64
	err := t.guard(ctx, func(r pgx.Row) error { return r.Scan(&id) }, `INSERT INTO decisions
		(request_id, run_id, approver_id, approver_name, role, verdict, reason, edited_args,
		 via, payload_digest, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		RETURNING id`,
		d.RequestID, d.RunID, d.ApproverID, d.ApproverName, d.Role, string(d.Verdict), d.Reason,
		d.EditedArgs, d.Via, d.PayloadDigest, millis(d.At))
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
		FROM decisions WHERE run_id = $1 ORDER BY id`, runID)
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
	err := t.guard(ctx, nil, `INSERT INTO operations (`+operationColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1, $10, $11)`,
		op.Key, op.RunID, op.Index, op.Action, op.ArgsDigest, string(op.Status), op.Attempts,
		op.Receipt, op.Error, millis(op.CreatedAt), millis(op.UpdatedAt))
	if err != nil {
		return fmt.Errorf("insert operation %s: %w", op.Key, err)
	}
	op.Version = 1
	return nil
}

func (t *tx) Operation(ctx context.Context, key string) (*workflow.Operation, error) {
	op, err := scanOperation(t.q.QueryRow(ctx,
		`SELECT `+operationColumns+` FROM operations WHERE op_key = $1`, key))
	if err != nil {
		return nil, fmt.Errorf("load operation %s: %w", key, interpretError(err))
	}
	return op, nil
}

func (t *tx) Operations(ctx context.Context, runID string) ([]*workflow.Operation, error) {
	ops, err := queryAll(ctx, t.q, scanOperation, `SELECT `+operationColumns+`
		FROM operations WHERE run_id = $1 ORDER BY idx, op_key`, runID)
	if err != nil {
		return nil, fmt.Errorf("list operations of run %s: %w", runID, err)
	}
	return ops, nil
}

func (t *tx) UpdateOperation(ctx context.Context, op *workflow.Operation) error {
	err := t.compareAndSet(ctx, "operations", "op_key", `UPDATE operations SET
		run_id = $3, idx = $4, action = $5, args_digest = $6, status = $7, attempts = $8,
		receipt = $9, error = $10, version = version + 1, created_at = $11, updated_at = $12
		WHERE op_key = $1 AND version = $2`,
		op.Key, op.Version, op.RunID, op.Index, op.Action, op.ArgsDigest, string(op.Status),
		op.Attempts, op.Receipt, op.Error, millis(op.CreatedAt), millis(op.UpdatedAt))
	if err != nil {
		return fmt.Errorf("update operation %s (version %d): %w", op.Key, op.Version, err)
	}
	op.Version++
	return nil
}

// --- outbox

const outboxColumns = `id, run_id, kind, payload, attempts, next_attempt, delivered_at, last_error,
	version, created_at`

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
	// Not guarded: the outbox has no key a caller could collide with and no
	// foreign key.
	var id int64
	err := t.q.QueryRow(ctx, `INSERT INTO outbox
		(run_id, kind, payload, attempts, next_attempt, delivered_at, last_error, version, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8)
		RETURNING id`,
		m.RunID, m.Kind, m.Payload, m.Attempts, millis(m.NextAttempt), millis(m.DeliveredAt),
		m.LastError, millis(m.CreatedAt)).Scan(&id)
	if err != nil {
		return fmt.Errorf("enqueue %s message of run %s: %w", m.Kind, m.RunID, interpretError(err))
	}
	m.ID = id
	m.Version = 1
	return nil
}

func (t *tx) DueOutbox(ctx context.Context, now time.Time, limit int) ([]*workflow.OutboxMessage, error) {
	// "delivered_at = 0" is spelled as in the partial index outbox_due, so that
	// the planner may use it. A limit of 0 or less means no limit, as in RunFilter.
	args := params{}
	q := `SELECT ` + outboxColumns + ` FROM outbox
		WHERE delivered_at = 0 AND next_attempt <= ` + args.add(millis(now)) + ` ORDER BY id`
	if limit > 0 {
		q += ` LIMIT ` + args.add(limit)
	}
	ms, err := queryAll(ctx, t.q, scanOutbox, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list due outbox messages: %w", err)
	}
	return ms, nil
}

func (t *tx) UpdateOutbox(ctx context.Context, m *workflow.OutboxMessage) error {
	err := t.compareAndSet(ctx, "outbox", "id", `UPDATE outbox SET
		run_id = $3, kind = $4, payload = $5, attempts = $6, next_attempt = $7, delivered_at = $8,
		last_error = $9, version = version + 1, created_at = $10
		WHERE id = $1 AND version = $2`,
		m.ID, m.Version, m.RunID, m.Kind, m.Payload, m.Attempts, millis(m.NextAttempt),
		millis(m.DeliveredAt), m.LastError, millis(m.CreatedAt))
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

// AppendAudit serialises appends on the row of audit_head: the SELECT … FOR
// UPDATE waits for any other transaction that appended and has not ended, then
// reads the head that transaction committed (READ COMMITTED re-reads a row it
// waited for). So two transactions never take the same seq or the same previous
// hash, on one replica or several.
//
// The cost: the lock is held from the append until COMMIT, flush included, so
// transactions that append to the audit chain run one at a time from that point
// on, and PostgreSQL cannot group their commits into one flush. Their rate is
// bounded by about one commit latency each, as with SQLite's single writer;
// transactions that do not append (claims, reads, outbox deliveries) are not
// held up. Appending late in a transaction keeps the held part short.
func (t *tx) AppendAudit(ctx context.Context, e *workflow.AuditEvent) error {
	next := *e
	var lastHash string
	err := t.q.QueryRow(ctx, `SELECT seq, hash FROM audit_head FOR UPDATE`).Scan(&next.Seq, &lastHash)
	if err != nil {
		return fmt.Errorf("append audit %s of run %s: read chain head: %w", e.Action, e.RunID, interpretError(err))
	}
	next.Seq++
	next.PrevHash = lastHash
	next.Hash = workflow.AuditHash(&next)
	_, err = t.q.Exec(ctx, `WITH head AS (UPDATE audit_head SET seq = $1, hash = $8)
		INSERT INTO audit (seq, run_id, actor, action, detail, at, prev_hash, hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		next.Seq, next.RunID, next.Actor, next.Action, next.Detail, millis(next.At), next.PrevHash, next.Hash)
	if err != nil {
		return fmt.Errorf("append audit %s of run %s: %w", e.Action, e.RunID, interpretError(err))
	}
	*e = next
	return nil
}

func (t *tx) AuditEvents(ctx context.Context, f workflow.AuditFilter) ([]*workflow.AuditEvent, error) {
	args := params{}
	q := `SELECT seq, run_id, actor, action, detail, at, prev_hash, hash FROM audit WHERE seq > ` + args.add(f.AfterSeq)
	if f.RunID != "" {
		q += ` AND run_id = ` + args.add(f.RunID)
	}
	q += ` ORDER BY seq`
	if f.Limit > 0 {
		q += ` LIMIT ` + args.add(f.Limit)
	}
	es, err := queryAll(ctx, t.q, scanAudit, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	return es, nil
}

// queryAll runs a query and scans every row with scan.
func queryAll[T any](ctx context.Context, q pgx.Tx, scan func(scanner) (*T, error), query string, args ...any) ([]*T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, interpretError(err)
	}
	return collect(rows, scan)
}

// collect scans every row of rows with scan and closes rows.
func collect[T any](rows pgx.Rows, scan func(scanner) (*T, error)) ([]*T, error) {
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
