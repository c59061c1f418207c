package sqlstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// queryRow binds query and runs it for one row.
func (t *Tx) queryRow(ctx context.Context, query string, args ...any) Row {
	return t.c.QueryRow(ctx, t.d.Bind(query), args...)
}

// guarded binds query and runs it with Dialect.Guarded.
func (t *Tx) guarded(ctx context.Context, scan func(Row) error, query string, args ...any) error {
	return t.d.Guarded(ctx, t.c, scan, t.d.Bind(query), args...)
}

// compareAndSet binds update and runs it with Dialect.CompareAndSet.
func (t *Tx) compareAndSet(ctx context.Context, table, keyColumn string, key any, update string, args ...any) error {
	return t.d.CompareAndSet(ctx, t.c, table, keyColumn, key, t.d.Bind(update), args...)
}

// queryAll binds query, runs it and scans every row with scan.
func queryAll[T any](ctx context.Context, t *Tx, scan func(Row) (*T, error), query string, args ...any) ([]*T, error) {
	rows, err := t.c.Query(ctx, t.d.Bind(query), args...)
	if err != nil {
		return nil, t.d.Err(err)
	}
	return collect(t.d, rows, scan)
}

// collect scans every row of rows with scan and closes rows.
func collect[T any](d Dialect, rows Rows, scan func(Row) (*T, error)) ([]*T, error) {
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, d.Err(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, d.Err(err)
	}
	return out, nil
}

// marks is n placeholders separated by commas, for IN (…).
func marks(n int) string {
	return "?" + strings.Repeat(", ?", n-1)
}

// --- runs

const runColumns = `id, workflow, task_id, status, step, seq, version, requester_id, idempotency_key,
	fingerprint, reason, deadline, parent_id, parent_seq, lease_owner, lease_until, fence,
	created_at, updated_at, pruned_at, callback_url`

func scanRun(s Row) (*record.Run, error) {
	var (
		r                                              record.Run
		key                                            *string
		deadline, leaseUntil, created, updated, pruned int64
	)
	err := s.Scan(&r.ID, &r.Workflow, &r.TaskID, &r.Status, &r.Step, &r.Seq, &r.Version,
		&r.RequesterID, &key, &r.Fingerprint, &r.Reason, &deadline, &r.ParentID, &r.ParentSeq,
		&r.LeaseOwner, &leaseUntil, &r.Fence, &created, &updated, &pruned, &r.CallbackURL)
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
	r.PrunedAt = fromMillis(pruned)
	return &r, nil
}

// insertRun is InsertRun's statement.
func insertRun(r *record.Run) (string, []any) {
	return `INSERT INTO runs (` + runColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		[]any{r.ID, r.Workflow, r.TaskID, string(r.Status), r.Step, r.Seq, r.RequesterID,
			nullIfEmpty(r.IdempotencyKey), r.Fingerprint, r.Reason, millis(r.Deadline), r.ParentID,
			r.ParentSeq, r.LeaseOwner, millis(r.LeaseUntil), r.Fence, millis(r.CreatedAt),
			millis(r.UpdatedAt), millis(r.PrunedAt), r.CallbackURL}
}

func (t *Tx) InsertRun(ctx context.Context, r *record.Run) error {
	q, args := insertRun(r)
	err := t.guarded(ctx, nil, q, args...)
	if err != nil {
		return fmt.Errorf("insert run %s: %w", r.ID, err)
	}
	return t.runWritten(ctx, r, true)
}

// runWritten follows a statement that inserted (inserted) or updated r's
// row: it tells the dialect (RunWritten) and sets r.Version to the stored one.
func (t *Tx) runWritten(ctx context.Context, r *record.Run, inserted bool) error {
	if err := t.d.RunWritten(ctx, t.c, r.ID); err != nil {
		return fmt.Errorf("write run %s: %w", r.ID, err)
	}
	if inserted {
		r.Version = 1
	} else {
		r.Version++
	}
	return nil
}

func (t *Tx) Run(ctx context.Context, id string) (*record.Run, error) {
	q := `SELECT ` + runColumns + ` FROM runs WHERE id = ?`
	if t.write {
		q += t.d.LockRow()
	}
	r, err := scanRun(t.queryRow(ctx, q, id))
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, t.d.Err(err))
	}
	return r, nil
}

func (t *Tx) RunByIdempotencyKey(ctx context.Context, requesterID, key string) (*record.Run, error) {
	// "" is stored as NULL and so matches nothing: an empty key names no run.
	r, err := scanRun(t.queryRow(ctx,
		`SELECT `+runColumns+` FROM runs WHERE requester_id = ? AND idempotency_key = ?`, requesterID, key))
	if err != nil {
		return nil, fmt.Errorf("load run of %q by idempotency key %q: %w", requesterID, key, t.d.Err(err))
	}
	return r, nil
}

func (t *Tx) ListRuns(ctx context.Context, f storage.RunFilter) ([]*record.Run, error) {
	where, args := runFilter(f, "")
	q := `SELECT ` + runColumns + ` FROM runs` + where + ` ORDER BY created_at, id`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	runs, err := queryAll(ctx, t, scanRun, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

// endedStatuses is the terminal statuses spelled as in the partial index
// runs_prunable (004_retention), so that the planner may use it.
const endedStatuses = `'done', 'failed', 'rejected', 'expired', 'cancelled'`

func (t *Tx) EndedRuns(ctx context.Context, f storage.EndedFilter) ([]*record.Run, error) {
	// created_at < before holds for every run that ended before it, and
	// bounds the range of the index read.
	q := `SELECT ` + runColumns + ` FROM runs
		WHERE pruned_at = 0 AND status IN (` + endedStatuses + `)
		AND created_at < ? AND updated_at < ? AND (created_at, id) > (?, ?)
		ORDER BY created_at, id`
	args := []any{millis(f.Before), millis(f.Before), millis(f.AfterCreated), f.AfterID}
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	runs, err := queryAll(ctx, t, scanRun, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs ended before %s: %w", f.Before.UTC().Format(time.RFC3339), err)
	}
	return runs, nil
}

type statusCount struct {
	status record.Status
	n      int
}

func (t *Tx) CountRuns(ctx context.Context) (map[record.Status]int, error) {
	// GROUP BY status reads only the index runs_status_created, not the table.
	counts, err := queryAll(ctx, t, func(r Row) (*statusCount, error) {
		var c statusCount
		return &c, r.Scan(&c.status, &c.n)
	}, `SELECT status, COUNT(*) FROM runs GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count runs by status: %w", err)
	}
	out := make(map[record.Status]int, len(counts))
	for _, c := range counts {
		out[c.status] = c.n
	}
	return out, nil
}

// likeEscaper makes a text match itself in a LIKE pattern with ESCAPE '!'.
var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

// runFilter is the WHERE clause of f (or "") and its arguments, its columns
// qualified with prefix.
func runFilter(f storage.RunFilter, prefix string) (string, []any) {
	var (
		where []string
		args  []any
	)
	if len(f.Statuses) > 0 {
		where = append(where, prefix+"status IN ("+marks(len(f.Statuses))+")")
		for _, s := range f.Statuses {
			args = append(args, string(s))
		}
	}
	if f.TaskID != "" {
		where = append(where, prefix+"task_id = ?")
		args = append(args, f.TaskID)
	}
	if f.RequesterID != "" {
		where = append(where, prefix+"requester_id = ?")
		args = append(args, f.RequesterID)
	}
	// The subqueries name the run by its table: an unqualified id would be
	// the request's.
	run := prefix
	if run == "" {
		run = "runs."
	}
	if f.Rule != "" {
		// approval_requests_run serves the lookup for each run read.
		where = append(where, "EXISTS (SELECT 1 FROM approval_requests q WHERE q.run_id = "+run+"id AND q.rule = ?)")
		args = append(args, f.Rule)
	}
	if f.Text != "" {
		like := "%" + likeEscaper.Replace(strings.ToLower(f.Text)) + "%"
		where = append(where, "(lower("+prefix+"id) LIKE ? ESCAPE '!' OR lower("+prefix+"task_id) LIKE ? ESCAPE '!' OR lower("+prefix+
			"requester_id) LIKE ? ESCAPE '!' OR EXISTS (SELECT 1 FROM approval_requests t WHERE t.run_id = "+run+"id AND lower(t.rule) LIKE ? ESCAPE '!'))")
		args = append(args, like, like, like, like)
	}
	if !f.DeadlineBefore.IsZero() {
		where = append(where, prefix+"deadline <> 0 AND "+prefix+"deadline < ?")
		args = append(args, millis(f.DeadlineBefore))
	}
	if !f.AfterCreated.IsZero() || f.AfterID != "" {
		where = append(where, "("+prefix+"created_at, "+prefix+"id) > (?, ?)")
		args = append(args, millis(f.AfterCreated), f.AfterID)
	}
	if len(where) == 0 {
		return "", nil
	}
	return ` WHERE ` + strings.Join(where, " AND "), args
}

// runHeadColumns are the run's columns, its latest checkpoint's and that
// checkpoint's base's. The outer joins leave a missing checkpoint's columns
// NULL; COALESCE gives them their zero values instead, so that a page of
// heads scans into plain values (a pointer per nullable column and row was
// most of a page's allocations) and a missing checkpoint has run_id ”.
var runHeadColumns = qualified("r.", runColumns) + ", " + joinedCheckpoint("c.") + ", " + joinedCheckpoint("b.")

func qualified(prefix, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// joinedCheckpoint is checkpointColumns from an outer join, each NULL
// column its zero value but the state's (a NULL state scans as nil).
func joinedCheckpoint(prefix string) string {
	cols := strings.Split(checkpointColumns, ",")
	for i, c := range cols {
		c = prefix + strings.TrimSpace(c)
		switch {
		case strings.HasSuffix(c, ".state"):
		case textCheckpointColumns[strings.TrimPrefix(c, prefix)]:
			c = "COALESCE(" + c + ", '')"
		default:
			c = "COALESCE(" + c + ", 0)"
		}
		cols[i] = c
	}
	return strings.Join(cols, ", ")
}

var textCheckpointColumns = map[string]bool{"run_id": true, "prev_hash": true, "hash": true, "key_id": true, "mac": true}

// joinedCheckpointRow scans joinedCheckpoint's columns.
type joinedCheckpointRow struct {
	c               record.Checkpoint
	schema          int64
	created, pruned int64
}

func (n *joinedCheckpointRow) dest() []any {
	c := &n.c
	return []any{&c.RunID, &c.Seq, &n.schema, &c.State, &c.PrevHash, &c.Hash, &n.created, &c.Seal.KeyID, &c.Seal.MAC, &n.pruned, &c.BaseSeq}
}

// checkpoint is the scanned checkpoint, nil when the join found none.
func (n *joinedCheckpointRow) checkpoint() *record.Checkpoint {
	if n.c.RunID == "" {
		return nil
	}
	n.c.SchemaVersion, n.c.CreatedAt, n.c.PrunedAt = int(n.schema), fromMillis(n.created), fromMillis(n.pruned)
	n.c.State = unpackState(n.c.State)
	return &n.c
}

// runHeadRow is one row of a page of heads: one allocation for what a row
// scans into, which escapes through Scan's []any.
type runHeadRow struct {
	r                                              record.Run
	key                                            *string
	deadline, leaseUntil, created, updated, pruned int64
	head, base                                     joinedCheckpointRow
	dest                                           [43]any
}

func scanRunHead(s Row) (*storage.RunHead, error) {
	row := &runHeadRow{}
	r := &row.r
	dest := append(row.dest[:0], &r.ID, &r.Workflow, &r.TaskID, &r.Status, &r.Step, &r.Seq, &r.Version,
		&r.RequesterID, &row.key, &r.Fingerprint, &r.Reason, &row.deadline, &r.ParentID, &r.ParentSeq,
		&r.LeaseOwner, &row.leaseUntil, &r.Fence, &row.created, &row.updated, &row.pruned, &r.CallbackURL)
	dest = append(append(dest, row.head.dest()...), row.base.dest()...)
	if err := s.Scan(dest...); err != nil {
		return nil, err
	}
	if row.key != nil {
		r.IdempotencyKey = *row.key
	}
	r.Deadline = fromMillis(row.deadline)
	r.LeaseUntil = fromMillis(row.leaseUntil)
	r.CreatedAt = fromMillis(row.created)
	r.UpdatedAt = fromMillis(row.updated)
	r.PrunedAt = fromMillis(row.pruned)
	return &storage.RunHead{Run: r, Head: row.head.checkpoint(), Base: row.base.checkpoint()}, nil
}

// ListRunHeadsQuery is the query ListRunHeads runs for f, with ?
// placeholders: drivers test its plan (a page must walk an index, not scan).
// A whole checkpoint has no base (base_seq 0): NULLIF makes the base's key
// NULL, which no index probe is made for, where "AND c.base_seq <> 0" was a
// filter PostgreSQL applied after probing for seq 0 (three pages a run).
func ListRunHeadsQuery(f storage.RunFilter) (string, []any) {
	where, args := runFilter(f, "r.")
	q := `SELECT ` + runHeadColumns + ` FROM runs r
		LEFT JOIN checkpoints c ON c.run_id = r.id AND c.seq = r.seq
		LEFT JOIN checkpoints b ON b.run_id = r.id AND b.seq = NULLIF(c.base_seq, 0)` + where + ` ORDER BY r.created_at, r.id`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return q, args
}

func (t *Tx) ListRunHeads(ctx context.Context, f storage.RunFilter) ([]*storage.RunHead, error) {
	q, args := ListRunHeadsQuery(f)
	heads, err := queryAll(ctx, t, scanRunHead, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs with their latest checkpoints: %w", err)
	}
	return heads, nil
}

// updateRun is UpdateRun's compare-and-set: only the columns a run's life
// changes. What identifies the run (its workflow, task, requester,
// idempotency key, parent, creation time, callback URL) is written once by
// InsertRun, and leaving it out of the SET spares the indexes on those
// columns a rewrite on every transition.
func updateRun(r *record.Run) (string, []any) {
	return `UPDATE runs SET
		status = ?, step = ?, seq = ?, version = version + 1, fingerprint = ?, reason = ?,
		deadline = ?, lease_owner = ?, lease_until = ?, fence = ?, updated_at = ?, pruned_at = ?
		WHERE id = ? AND version = ?`,
		[]any{string(r.Status), r.Step, r.Seq, r.Fingerprint, r.Reason, millis(r.Deadline),
			r.LeaseOwner, millis(r.LeaseUntil), r.Fence, millis(r.UpdatedAt), millis(r.PrunedAt), r.ID, r.Version}
}

// runAuditColumns are the run row's audit head (see RunHeads).
const runAuditColumns = `audit_seq, audit_hash, audit_key_id, audit_mac`

// writeRunHead inserts or updates (compare-and-set) r's row as InsertRun or
// UpdateRun does, with its audit head moved to h in the same statement.
func (t *Tx) writeRunHead(ctx context.Context, r *record.Run, h *record.AuditRunHead) error {
	headArgs := []any{h.Seq, h.Hash, h.KeyID, h.MAC}
	if r.Version == 0 {
		q, args := insertRun(r)
		q = addColumns(q, runAuditColumns)
		if err := t.guarded(ctx, nil, q, append(args, headArgs...)...); err != nil {
			return fmt.Errorf("insert run %s: %w", r.ID, err)
		}
		return t.runWritten(ctx, r, true)
	}
	q, args := updateRun(r)
	q = strings.Replace(q, `WHERE id = ?`, `, audit_seq = ?, audit_hash = ?, audit_key_id = ?, audit_mac = ?
		WHERE id = ?`, 1)
	n := len(args)
	args = append(append(args[:n-2:n-2], headArgs...), args[n-2:]...)
	if err := t.compareAndSet(ctx, "runs", "id", r.ID, q, args...); err != nil {
		return fmt.Errorf("update run %s (version %d): %w", r.ID, r.Version, err)
	}
	return t.runWritten(ctx, r, false)
}

// addColumns is insert, an INSERT INTO t (…) VALUES (…), with the columns
// cols added after its own and a ? for each after its values.
func addColumns(insert, cols string) string {
	i, j := strings.Index(insert, ")"), strings.LastIndex(insert, ")")
	return insert[:i] + ", " + cols + insert[i:j] + strings.Repeat(", ?", strings.Count(cols, ",")+1) + insert[j:]
}

// dropHeadRow deletes runID's row of audit_heads, whose head its run row
// now holds (RunHeads).
func (t *Tx) dropHeadRow(ctx context.Context, runID string) error {
	if _, err := t.c.Exec(ctx, t.d.Bind(`DELETE FROM audit_heads WHERE run_id = ?`), runID); err != nil {
		return fmt.Errorf("move the audit head of run %s into its row: %w", runID, t.d.Err(err))
	}
	return nil
}

func (t *Tx) UpdateRun(ctx context.Context, r *record.Run) error {
	q, args := updateRun(r)
	if err := t.compareAndSet(ctx, "runs", "id", r.ID, q, args...); err != nil {
		return fmt.Errorf("update run %s (version %d): %w", r.ID, r.Version, err)
	}
	return t.runWritten(ctx, r, false)
}

func (t *Tx) ClaimRuns(ctx context.Context, owner string, statuses []record.Status, now, until time.Time, limit int) ([]*record.Run, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	rows, err := t.d.ClaimRuns(ctx, t.c, runColumns, owner, statuses, millis(now), millis(until), limit)
	if err != nil {
		return nil, fmt.Errorf("claim runs for %s: %w", owner, err)
	}
	out, err := collect(t.d, rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("claim runs for %s: %w", owner, err)
	}
	// RETURNING gives rows in no promised order.
	slices.SortFunc(out, func(a, b *record.Run) int {
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// --- checkpoints

const checkpointColumns = `run_id, seq, schema_version, state, prev_hash, hash, created_at, key_id, mac, pruned_at, base_seq`

func scanCheckpoint(s Row) (*record.Checkpoint, error) {
	c, err := scanCheckpointWith(s)
	if err != nil {
		return nil, err
	}
	c.State = unpackState(c.State)
	return c, nil
}

// scanCheckpointWith scans checkpointColumns and then into more, the state
// as stored (scanCheckpoint inflates it; a prune, which drops it, does not).
func scanCheckpointWith(s Row, more ...any) (*record.Checkpoint, error) {
	var (
		c               record.Checkpoint
		created, pruned int64
	)
	into := append([]any{&c.RunID, &c.Seq, &c.SchemaVersion, &c.State, &c.PrevHash, &c.Hash, &created, &c.KeyID, &c.MAC, &pruned, &c.BaseSeq}, more...)
	if err := s.Scan(into...); err != nil {
		return nil, err
	}
	c.CreatedAt = fromMillis(created)
	c.PrunedAt = fromMillis(pruned)
	return &c, nil
}

// prunedEvents are a checkpoint row's events, as stored, while the row is
// pruned (nil: none).
type prunedEvents struct {
	events []byte
	last   int64
}

// scanCheckpointKeepingEvents reads checkpointColumns and the row's
// events, as they are stored.
func scanCheckpointKeepingEvents(s Row) (*record.Checkpoint, *prunedEvents, error) {
	var e prunedEvents
	c, err := scanCheckpointWith(s, &e.events, &e.last)
	return c, &e, err
}

// appendCheckpoint is AppendCheckpoint's statement, its state stored
// packed.
func appendCheckpoint(c *record.Checkpoint) (string, []any) {
	return `INSERT INTO checkpoints (` + checkpointColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		[]any{c.RunID, c.Seq, c.SchemaVersion, packState(c.State), c.PrevHash, c.Hash, millis(c.CreatedAt), c.KeyID, c.MAC, millis(c.PrunedAt), c.BaseSeq}
}

func (t *Tx) AppendCheckpoint(ctx context.Context, c *record.Checkpoint) error {
	return t.appendCheckpointEvents(ctx, c, nil, 0)
}

// appendCheckpointEvents is AppendCheckpoint with the audit events of the
// transition that wrote c in its row (see RunHeads), encoded.
func (t *Tx) appendCheckpointEvents(ctx context.Context, c *record.Checkpoint, events []byte, last int64) error {
	q, args := appendCheckpoint(c)
	if events != nil {
		q = addColumns(q, `events, last_event_seq`)
		args = append(args, events, last)
	}
	if err := t.guarded(ctx, nil, q, args...); err != nil {
		return fmt.Errorf("append checkpoint %s/%d: %w", c.RunID, c.Seq, err)
	}
	return nil
}

func (t *Tx) Checkpoints(ctx context.Context, runID string) ([]*record.Checkpoint, error) {
	cs, err := queryAll(ctx, t, scanCheckpoint, `SELECT `+checkpointColumns+`
		FROM checkpoints WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of run %s: %w", runID, err)
	}
	return cs, nil
}

func (t *Tx) PruneCheckpoints(ctx context.Context, runID string, seq int64, at time.Time) (int, error) {
	// Deleted and stored again without their state rather than updated in
	// place: SQLite frees a page only once it is empty, and rows shrunk in
	// place would leave every page of the table part full and the file as
	// large as before. Stored again, they are appended to the table densely
	// and the pages they left are freed, for incremental_vacuum to give back.
	// Their events (RunHeads) are kept as they were.
	var events []*prunedEvents
	cps, err := queryAll(ctx, t, func(r Row) (*record.Checkpoint, error) {
		c, e, err := scanCheckpointKeepingEvents(r)
		events = append(events, e)
		return c, err
	}, `SELECT `+checkpointColumns+`, events, last_event_seq
		FROM checkpoints WHERE run_id = ? AND seq <= ? AND pruned_at = 0 ORDER BY seq`, runID, seq)
	if err != nil {
		return 0, fmt.Errorf("prune checkpoints of run %s up to %d: %w", runID, seq, err)
	}
	if len(cps) == 0 {
		return 0, nil
	}
	if _, err := t.c.Exec(ctx, t.d.Bind(`DELETE FROM checkpoints WHERE run_id = ? AND seq <= ? AND pruned_at = 0`), runID, seq); err != nil {
		return 0, fmt.Errorf("prune checkpoints of run %s up to %d: %w", runID, seq, t.d.Err(err))
	}
	for i, c := range cps {
		c.State, c.PrunedAt = nil, at
		if err := t.appendCheckpointEvents(ctx, c, events[i].events, events[i].last); err != nil {
			return 0, fmt.Errorf("prune checkpoints of run %s up to %d: %w", runID, seq, err)
		}
	}
	return len(cps), nil
}

// --- approval requests

const requestColumns = `id, run_id, fingerprint, rule, policy_revision, risk, role, count,
	self_approval, edit, requester_id, deadline, status, decided_by, decided_at, version,
	created_at, key_id, mac`

func scanRequest(s Row) (*record.ApprovalRequest, error) {
	var (
		r                          record.ApprovalRequest
		deadline, decided, created int64
	)
	err := s.Scan(&r.ID, &r.RunID, &r.Fingerprint, &r.Rule, &r.PolicyRevision, &r.Risk, &r.Role,
		&r.Count, &r.SelfApproval, &r.Edit, &r.RequesterID, &deadline, &r.Status, &r.DecidedBy,
		&decided, &r.Version, &created, &r.KeyID, &r.MAC)
	if err != nil {
		return nil, err
	}
	r.Deadline = fromMillis(deadline)
	r.DecidedAt = fromMillis(decided)
	r.CreatedAt = fromMillis(created)
	return &r, nil
}

// insertRequest is InsertRequest's statement.
func insertRequest(r *record.ApprovalRequest) (string, []any) {
	return `INSERT INTO approval_requests (` + requestColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)`,
		[]any{r.ID, r.RunID, r.Fingerprint, r.Rule, r.PolicyRevision, r.Risk, r.Role, r.Count,
			r.SelfApproval, r.Edit, r.RequesterID, millis(r.Deadline), string(r.Status), r.DecidedBy,
			millis(r.DecidedAt), millis(r.CreatedAt), r.KeyID, r.MAC}
}

func (t *Tx) InsertRequest(ctx context.Context, r *record.ApprovalRequest) error {
	q, args := insertRequest(r)
	if err := t.guarded(ctx, nil, q, args...); err != nil {
		return fmt.Errorf("insert approval request %s: %w", r.ID, err)
	}
	r.Version = 1
	return nil
}

func (t *Tx) Request(ctx context.Context, id string) (*record.ApprovalRequest, error) {
	r, err := scanRequest(t.queryRow(ctx,
		`SELECT `+requestColumns+` FROM approval_requests WHERE id = ?`, id))
	if err != nil {
		return nil, fmt.Errorf("load approval request %s: %w", id, t.d.Err(err))
	}
	return r, nil
}

func (t *Tx) RequestsForRun(ctx context.Context, runID string) ([]*record.ApprovalRequest, error) {
	rs, err := queryAll(ctx, t, scanRequest, `SELECT `+requestColumns+`
		FROM approval_requests WHERE run_id = ? ORDER BY created_at, id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list approval requests of run %s: %w", runID, err)
	}
	return rs, nil
}

// updateRequest is UpdateRequest's compare-and-set.
func updateRequest(r *record.ApprovalRequest) (string, []any) {
	return `UPDATE approval_requests SET
		run_id = ?, fingerprint = ?, rule = ?, policy_revision = ?, risk = ?, role = ?, count = ?,
		self_approval = ?, edit = ?, requester_id = ?, deadline = ?, status = ?, decided_by = ?,
		decided_at = ?, version = version + 1, created_at = ?,
		key_id = ?, mac = ?
		WHERE id = ? AND version = ?`,
		[]any{r.RunID, r.Fingerprint, r.Rule, r.PolicyRevision, r.Risk, r.Role, r.Count,
			r.SelfApproval, r.Edit, r.RequesterID, millis(r.Deadline), string(r.Status), r.DecidedBy,
			millis(r.DecidedAt), millis(r.CreatedAt), r.KeyID, r.MAC, r.ID, r.Version}
}

func updateRequestName(r *record.ApprovalRequest) string {
	return fmt.Sprintf("update approval request %s (version %d)", r.ID, r.Version)
}

func (t *Tx) UpdateRequest(ctx context.Context, r *record.ApprovalRequest) error {
	q, args := updateRequest(r)
	if err := t.compareAndSet(ctx, "approval_requests", "id", r.ID, q, args...); err != nil {
		return fmt.Errorf("%s: %w", updateRequestName(r), err)
	}
	r.Version++
	return nil
}

// --- message locations

const locationColumns = `request_id, run_id, channel, message_ts, posted_at`

func scanLocation(s Row) (*record.MessageLocation, error) {
	var (
		l      record.MessageLocation
		posted int64
	)
	if err := s.Scan(&l.RequestID, &l.RunID, &l.Channel, &l.TS, &posted); err != nil {
		return nil, err
	}
	l.PostedAt = fromMillis(posted)
	return &l, nil
}

func (t *Tx) InsertMessageLocation(ctx context.Context, l *record.MessageLocation) error {
	err := t.guarded(ctx, nil, `INSERT INTO message_locations (`+locationColumns+`) VALUES (?, ?, ?, ?, ?)`,
		l.RequestID, l.RunID, l.Channel, l.TS, millis(l.PostedAt))
	if err != nil {
		return fmt.Errorf("insert the message location of approval request %s: %w", l.RequestID, err)
	}
	return nil
}

func (t *Tx) MessageLocations(ctx context.Context, runID string) ([]*record.MessageLocation, error) {
	ls, err := queryAll(ctx, t, scanLocation, `SELECT `+locationColumns+`
		FROM message_locations WHERE run_id = ? ORDER BY posted_at, request_id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list message locations of run %s: %w", runID, err)
	}
	return ls, nil
}

// --- decisions

const decisionColumns = `id, request_id, run_id, approver_id, approver_name, role, verdict, reason,
	edited_args, via, payload_digest, at, key_id, mac, on_behalf_of`

func scanDecision(s Row) (*record.Decision, error) {
	var (
		d  record.Decision
		at int64
	)
	err := s.Scan(&d.ID, &d.RequestID, &d.RunID, &d.ApproverID, &d.ApproverName, &d.Role,
		&d.Verdict, &d.Reason, &d.EditedArgs, &d.Via, &d.PayloadDigest, &at, &d.KeyID, &d.MAC, &d.OnBehalfOf)
	if err != nil {
		return nil, err
	}
	d.At = fromMillis(at)
	return &d, nil
}

// insertDecision is InsertDecision's statement. The id comes from the
// database (a sequence, or AUTOINCREMENT), through RETURNING, which both
// databases have.
func insertDecision(d *record.Decision) (string, []any) {
	return `INSERT INTO decisions
		(request_id, run_id, approver_id, approver_name, role, verdict, reason, edited_args,
		 via, payload_digest, at, key_id, mac, on_behalf_of)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		RETURNING id`,
		[]any{d.RequestID, d.RunID, d.ApproverID, d.ApproverName, d.Role, string(d.Verdict), d.Reason,
			d.EditedArgs, d.Via, d.PayloadDigest, millis(d.At), d.KeyID, d.MAC, d.OnBehalfOf}
}

func insertDecisionName(d *record.Decision) string {
	return fmt.Sprintf("insert decision of %s on request %s", d.ApproverID, d.RequestID)
}

func (t *Tx) InsertDecision(ctx context.Context, d *record.Decision) error {
	q, args := insertDecision(d)
	if err := t.guarded(ctx, func(r Row) error { return r.Scan(&d.ID) }, q, args...); err != nil {
		return fmt.Errorf("%s: %w", insertDecisionName(d), err)
	}
	return nil
}

func (t *Tx) Decisions(ctx context.Context, runID string) ([]*record.Decision, error) {
	ds, err := queryAll(ctx, t, scanDecision, `SELECT `+decisionColumns+`
		FROM decisions WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list decisions of run %s: %w", runID, err)
	}
	return ds, nil
}

// --- operations

const operationColumns = `op_key, run_id, idx, action, args_digest, status, attempts, receipt,
	error, version, created_at, updated_at, key_id, mac`

func scanOperation(s Row) (*record.Operation, error) {
	var (
		op               record.Operation
		created, updated int64
	)
	err := s.Scan(&op.Key, &op.RunID, &op.Index, &op.Action, &op.ArgsDigest, &op.Status,
		&op.Attempts, &op.Receipt, &op.Error, &op.Version, &created, &updated, &op.KeyID, &op.MAC)
	if err != nil {
		return nil, err
	}
	op.CreatedAt = fromMillis(created)
	op.UpdatedAt = fromMillis(updated)
	return &op, nil
}

// insertOperation is InsertOperation's statement.
func insertOperation(op *record.Operation) (string, []any) {
	return `INSERT INTO operations (` + operationColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)`,
		[]any{op.Key, op.RunID, op.Index, op.Action, op.ArgsDigest, string(op.Status), op.Attempts,
			op.Receipt, op.Error, millis(op.CreatedAt), millis(op.UpdatedAt), op.KeyID, op.MAC}
}

func insertOperationName(op *record.Operation) string {
	return fmt.Sprintf("insert operation %s", op.Key)
}

func (t *Tx) InsertOperation(ctx context.Context, op *record.Operation) error {
	q, args := insertOperation(op)
	if err := t.guarded(ctx, nil, q, args...); err != nil {
		return fmt.Errorf("%s: %w", insertOperationName(op), err)
	}
	op.Version = 1
	return nil
}

func (t *Tx) Operation(ctx context.Context, key string) (*record.Operation, error) {
	op, err := scanOperation(t.queryRow(ctx,
		`SELECT `+operationColumns+` FROM operations WHERE op_key = ?`, key))
	if err != nil {
		return nil, fmt.Errorf("load operation %s: %w", key, t.d.Err(err))
	}
	return op, nil
}

func (t *Tx) Operations(ctx context.Context, runID string) ([]*record.Operation, error) {
	ops, err := queryAll(ctx, t, scanOperation, `SELECT `+operationColumns+`
		FROM operations WHERE run_id = ? ORDER BY idx, op_key`, runID)
	if err != nil {
		return nil, fmt.Errorf("list operations of run %s: %w", runID, err)
	}
	return ops, nil
}

// updateOperation is UpdateOperation's compare-and-set.
func updateOperation(op *record.Operation) (string, []any) {
	return `UPDATE operations SET
		run_id = ?, idx = ?, action = ?, args_digest = ?, status = ?, attempts = ?, receipt = ?,
		error = ?, version = version + 1, created_at = ?, updated_at = ?, key_id = ?, mac = ?
		WHERE op_key = ? AND version = ?`,
		[]any{op.RunID, op.Index, op.Action, op.ArgsDigest, string(op.Status), op.Attempts, op.Receipt,
			op.Error, millis(op.CreatedAt), millis(op.UpdatedAt), op.KeyID, op.MAC, op.Key, op.Version}
}

func updateOperationName(op *record.Operation) string {
	return fmt.Sprintf("update operation %s (version %d)", op.Key, op.Version)
}

func (t *Tx) UpdateOperation(ctx context.Context, op *record.Operation) error {
	q, args := updateOperation(op)
	if err := t.compareAndSet(ctx, "operations", "op_key", op.Key, q, args...); err != nil {
		return fmt.Errorf("%s: %w", updateOperationName(op), err)
	}
	op.Version++
	return nil
}

// --- outbox

const outboxColumns = `id, run_id, kind, payload, attempts, next_attempt, delivered_at, last_error,
	version, created_at, once_key`

func scanOutbox(s Row) (*record.OutboxMessage, error) {
	var (
		m                          record.OutboxMessage
		next, delivered, createdAt int64
	)
	err := s.Scan(&m.ID, &m.RunID, &m.Kind, &m.Payload, &m.Attempts, &next, &delivered,
		&m.LastError, &m.Version, &createdAt, &m.Once)
	if err != nil {
		return nil, err
	}
	m.NextAttempt = fromMillis(next)
	m.DeliveredAt = fromMillis(delivered)
	m.CreatedAt = fromMillis(createdAt)
	return &m, nil
}

func (t *Tx) EnqueueOutbox(ctx context.Context, m *record.OutboxMessage) error {
	// Guarded: a message with a Once key another holds is ErrDuplicate, and
	// the transaction goes on.
	var id int64
	err := t.guarded(ctx, func(r Row) error { return r.Scan(&id) }, `INSERT INTO outbox
		(run_id, kind, payload, attempts, next_attempt, delivered_at, last_error, version, created_at, once_key)
		VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
		RETURNING id`,
		m.RunID, m.Kind, m.Payload, m.Attempts, millis(m.NextAttempt), millis(m.DeliveredAt),
		m.LastError, millis(m.CreatedAt), m.Once)
	if err != nil {
		return fmt.Errorf("enqueue %s message of run %s: %w", m.Kind, m.RunID, err)
	}
	m.ID = id
	m.Version = 1
	return nil
}

func (t *Tx) DueOutbox(ctx context.Context, now time.Time, limit int) ([]*record.OutboxMessage, error) {
	// "delivered_at = 0" is spelled as in the partial index outbox_due, so that
	// the planner may use it. A limit of 0 or less means no limit, as in RunFilter.
	q := `SELECT ` + outboxColumns + ` FROM outbox
		WHERE delivered_at = 0 AND next_attempt <= ? ORDER BY id`
	args := []any{millis(now)}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	ms, err := queryAll(ctx, t, scanOutbox, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list due outbox messages: %w", err)
	}
	return ms, nil
}

func (t *Tx) ListOutbox(ctx context.Context, f storage.OutboxFilter) ([]*record.OutboxMessage, error) {
	// Undelivered rows only, spelled as in the partial index outbox_due.
	q := `SELECT ` + outboxColumns + ` FROM outbox WHERE delivered_at = 0`
	var args []any
	kinds := ""
	if len(f.Kinds) > 0 {
		kinds = ` AND kind IN (` + marks(len(f.Kinds)) + `)`
		q += kinds
		for _, k := range f.Kinds {
			args = append(args, k)
		}
	}
	if f.Heads {
		// The index outbox_run_undelivered (run_id, id) answers this.
		q += ` AND NOT EXISTS (SELECT 1 FROM outbox older WHERE older.run_id = outbox.run_id
			AND older.delivered_at = 0 AND older.id < outbox.id` + strings.ReplaceAll(kinds, "kind", "older.kind") + `)`
		for _, k := range f.Kinds {
			args = append(args, k)
		}
	}
	if f.RunID != "" {
		q += ` AND run_id = ?`
		args = append(args, f.RunID)
	}
	if !f.DueBy.IsZero() {
		q += ` AND next_attempt <= ?`
		args = append(args, millis(f.DueBy))
	}
	if f.Failing {
		q += ` AND last_error <> ''`
	}
	if f.AfterID > 0 {
		q += ` AND id > ?`
		args = append(args, f.AfterID)
	}
	q += ` ORDER BY id`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	ms, err := queryAll(ctx, t, scanOutbox, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list outbox messages: %w", err)
	}
	return ms, nil
}

func (t *Tx) UpdateOutbox(ctx context.Context, m *record.OutboxMessage) error {
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

func (t *Tx) OutboxForRun(ctx context.Context, runID string) ([]*record.OutboxMessage, error) {
	ms, err := queryAll(ctx, t, scanOutbox, `SELECT `+outboxColumns+` FROM outbox WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list outbox messages of run %s: %w", runID, err)
	}
	return ms, nil
}

func (t *Tx) DeleteDeliveredOutbox(ctx context.Context, runID string) (int, error) {
	n, err := t.c.Exec(ctx, t.d.Bind(`DELETE FROM outbox WHERE run_id = ? AND delivered_at <> 0`), runID)
	if err != nil {
		return 0, fmt.Errorf("delete delivered outbox messages of run %s: %w", runID, t.d.Err(err))
	}
	return int(n), nil
}

// --- audit

const auditColumns = `seq, run_id, actor, action, detail, at, prev_hash, hash, checkpoint_seq,
	checkpoint_hash, key_id, mac, format`

func scanAudit(s Row) (*record.AuditEvent, error) {
	var (
		e  record.AuditEvent
		at int64
	)
	if err := s.Scan(&e.Seq, &e.RunID, &e.Actor, &e.Action, &e.Detail, &at, &e.PrevHash, &e.Hash,
		&e.CheckpointSeq, &e.CheckpointHash, &e.KeyID, &e.MAC, &e.Format); err != nil {
		return nil, err
	}
	e.At = fromMillis(at)
	return &e, nil
}

// AppendAudit reads the run's head under the dialect's lock, so that no other
// transaction appends to the same run between this read and the insert: each
// run's chain stays linear, on one writer or several, while appends to
// different runs do not wait for each other.
func (t *Tx) AppendAudit(ctx context.Context, e *record.AuditEvent, seal func(*record.AuditEvent, *record.AuditRunHead) (record.Seal, record.Seal)) error {
	_, err := t.appendAudits(ctx, []*record.AuditEvent{e}, seal)
	return err
}

// appendAudits is AppendAudit for the first of evs, events of one run in
// order, or for the first two where the head came with a spare seq and one
// deferred statement can insert both and move the head once (PostgreSQL):
// it returns how many it appended, each rewritten as stored.
func (t *Tx) appendAudits(ctx context.Context, evs []*record.AuditEvent, seal func(*record.AuditEvent, *record.AuditRunHead) (record.Seal, record.Seal)) (int, error) {
	e := evs[0]
	if rh, ok := t.d.(RunHeads); ok {
		return 1, t.appendToRun(ctx, rh, e, seal)
	}
	h, err := t.auditRunHead(ctx, e.RunID)
	if err != nil {
		return 0, fmt.Errorf("append audit %s of run %s: read the run's head: %w", e.Action, e.RunID, err)
	}
	d, deferred := t.d.(Deferrer)
	n := 1
	if deferred && h.spare != 0 && len(evs) > 1 && evs[1].RunID == e.RunID && t.d.AuditMoveHead(2) != "" {
		n = 2
	}
	seqs := [2]int64{h.seq, h.spare}
	chained, head := chainEventsAt(evs[:n], func(i int) int64 { return seqs[i] }, h.hash, seal)
	insert, args := t.auditInsert(chained, head, h)
	// Where the insert moves the head itself, it can wait for the
	// transaction's next round trip (Deferrer): the events are final here.
	if deferred && args != nil {
		what := fmt.Sprintf("append audit %s of run %s", e.Action, e.RunID)
		if rv, ok := t.d.(Reserver); ok && h.guarded {
			// The writes before it were as expected, or the transaction
			// failed at them: a refusal here is the head's alone.
			rv.DeferGuarded(t.c, what, storage.ErrHeadMoved, insert, args...)
		} else {
			d.Defer(t.c, what, insert, args...)
		}
		if n == 1 && h.spare != 0 {
			// The transaction holds the head's lock (or checks it, guarded)
			// and has just moved it: a next event of the run links to this
			// one under the spare seq, without asking the server.
			t.head = &auditHead{runID: e.RunID, seq: h.spare, hash: head.Hash, guarded: h.guarded}
		}
	} else if err := t.appendAlone(ctx, chained[0], head); err != nil {
		return 0, err
	}
	for i, c := range chained {
		*evs[i] = *c
	}
	return n, nil
}

// auditInsert is the statement that inserts evs, chained events of one run,
// and moves its head to head in the same statement (from h: guarded when h
// was read before the transaction, made when the run has none), with its
// arguments: each event's, then the head's key id and MAC, then what a
// guarded move checks. nil arguments: the dialect moves no head in an
// insert (appendAlone).
func (t *Tx) auditInsert(evs []*record.AuditEvent, head *record.AuditRunHead, h auditHead) (string, []any) {
	n := len(evs)
	with := t.d.AuditMoveHead(n)
	if with == "" {
		return "", nil
	}
	args := make([]any, 0, 13*n+3)
	for _, e := range evs {
		a := auditArgs(e)
		a[4] = slices.Clone(e.Detail) // sent later: the caller's buffer may be reused by then
		args = append(args, a...)
	}
	args = append(args, head.KeyID, head.MAC)
	values := strings.Repeat(", "+auditValues, n)[2:]
	if rv, ok := t.d.(Reserver); ok && h.guarded {
		if sp, ok := t.d.(SeqPooler); ok && h.fresh {
			with = sp.AuditMakeHead(n)
		} else {
			with = rv.GuardedAuditMoveHead(n)
			args = append(args, h.hash)
		}
		// The first seq divided by the heads moved: itself, or the
		// server's refusal when the head was not where it was read.
		values = guardedAuditValues + values[len(auditValues):]
	}
	return with + t.d.Bind(insertAudit+values), args
}

// appendAlone inserts e and then moves its run's head to h, each by a
// statement of its own (SQLite's audit_heads, where no insert moves a head).
func (t *Tx) appendAlone(ctx context.Context, e *record.AuditEvent, h *record.AuditRunHead) error {
	if _, err := t.c.Exec(ctx, t.d.Bind(insertAudit+auditValues), auditArgs(e)...); err != nil {
		return fmt.Errorf("append audit %s of run %s: %w", e.Action, e.RunID, t.d.Err(err))
	}
	return t.moveHead(ctx, h)
}

// appendToRun is AppendAudit where the run row holds the run's head
// (RunHeads): the head moves in the run row, or in audit_heads when there
// is none (an event about no run, or about a run that does not exist).
func (t *Tx) appendToRun(ctx context.Context, rh RunHeads, e *record.AuditEvent, seal func(*record.AuditEvent, *record.AuditRunHead) (record.Seal, record.Seal)) error {
	seq, prev, inHeads, err := rh.RunAuditHead(ctx, t.c, e.RunID)
	if err != nil {
		return fmt.Errorf("append audit %s of run %s: read the run's head: %w", e.Action, e.RunID, err)
	}
	evs, head := chainEvents([]*record.AuditEvent{e}, seq, prev, seal)
	next := evs[0]
	if _, err := t.c.Exec(ctx, t.d.Bind(insertAudit+auditValues), auditArgs(next)...); err != nil {
		return fmt.Errorf("append audit %s of run %s: %w", e.Action, e.RunID, t.d.Err(err))
	}
	n := int64(0)
	if e.RunID != "" {
		n, err = t.c.Exec(ctx, t.d.Bind(`UPDATE runs SET audit_seq = ?, audit_hash = ?, audit_key_id = ?, audit_mac = ? WHERE id = ?`),
			head.Seq, head.Hash, head.KeyID, head.MAC, head.RunID)
		if err != nil {
			return fmt.Errorf("move the audit head of run %s to %d: %w", head.RunID, head.Seq, t.d.Err(err))
		}
	}
	switch {
	case n == 0:
		err = t.moveHead(ctx, head)
	case inHeads:
		err = t.dropHeadRow(ctx, e.RunID)
	}
	if err != nil {
		return err
	}
	*e = *next
	return nil
}

// insertAudit and auditValues are the insert of one event, auditArgs its
// values.
const (
	insertAudit = `INSERT INTO audit (` + auditColumns + `) VALUES `
	auditValues = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// guardedAuditValues is auditValues with the seq divided by the heads
	// a guarded move moved (see Reserver.GuardedAuditMoveHead).
	guardedAuditValues = `(? / (SELECT count(*) FROM head), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// auditArgs are e's values in auditColumns' order.
func auditArgs(e *record.AuditEvent) []any {
	return []any{e.Seq, e.RunID, e.Actor, e.Action, e.Detail, millis(e.At), e.PrevHash, e.Hash,
		e.CheckpointSeq, e.CheckpointHash, e.KeyID, e.MAC, e.Format}
}

// moveHead moves a run's audit head to h, by a statement of its own (where
// the event's insert does not: AuditMoveHead "").
func (t *Tx) moveHead(ctx context.Context, h *record.AuditRunHead) error {
	_, err := t.c.Exec(ctx, t.d.Bind(`INSERT INTO audit_heads (run_id, seq, hash, key_id, mac) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,
			key_id = excluded.key_id, mac = excluded.mac`),
		h.RunID, h.Seq, h.Hash, h.KeyID, h.MAC)
	if err != nil {
		return fmt.Errorf("move the audit head of run %s to %d: %w", h.RunID, h.Seq, t.d.Err(err))
	}
	return nil
}

// logQuery is query (a SELECT … WHERE) with f's conditions on the seq
// column seq and run_id, its order and its limit.
func logQuery(query, seq string, f storage.AuditFilter) (string, []any) {
	q := query + ` AND ` + seq + ` > ?`
	args := []any{f.AfterSeq}
	if f.RunID != "" {
		q += ` AND run_id = ?`
		args = append(args, f.RunID)
	}
	q += ` ORDER BY ` + seq
	if f.Newest {
		q += ` DESC`
	}
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return q, args
}

func (t *Tx) AuditEvents(ctx context.Context, f storage.AuditFilter) ([]*record.AuditEvent, error) {
	q, args := logQuery(`SELECT `+auditColumns+` FROM audit WHERE TRUE`, "seq", f)
	es, err := queryAll(ctx, t, scanAudit, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	if _, ok := t.d.(RunHeads); !ok {
		return es, nil
	}
	cs, err := t.checkpointEvents(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	all := mergeBySeq(es, cs, f.Newest)
	if f.Limit > 0 && len(all) > f.Limit {
		all = all[:f.Limit]
	}
	return all, nil
}

// checkpointEvents are the events kept in checkpoint rows (RunHeads) that
// f selects, ordered as f asks. A row's events take seqs one after another
// and no other event takes one between them (one writer), so the rows in
// order of their last seq hold the events in order, and f.Limit rows hold
// the first f.Limit events.
func (t *Tx) checkpointEvents(ctx context.Context, f storage.AuditFilter) ([]*record.AuditEvent, error) {
	// "last_event_seq > 0" as in the index checkpoints_last_event_seq.
	q, args := logQuery(`SELECT `+checkpointEventColumns+` FROM checkpoints WHERE last_event_seq > 0`, "last_event_seq", f)
	rows, err := t.c.Query(ctx, t.d.Bind(q), args...)
	if err != nil {
		return nil, t.d.Err(err)
	}
	var evs []*record.AuditEvent
	err = eventsOfCheckpoints(&evs)(rows)
	rows.Close()
	if err != nil {
		return nil, t.d.Err(err)
	}
	out := evs[:0]
	for _, e := range evs {
		if e.Seq > f.AfterSeq {
			out = append(out, e)
		}
	}
	if f.Newest {
		// Each row's events are in order, its rows newest first.
		slices.SortFunc(out, func(a, b *record.AuditEvent) int { return cmp.Compare(b.Seq, a.Seq) })
	}
	return out, nil
}

func scanAuditHead(s Row) (*record.AuditRunHead, error) {
	var h record.AuditRunHead
	if err := s.Scan(&h.RunID, &h.Seq, &h.Hash, &h.KeyID, &h.MAC); err != nil {
		return nil, err
	}
	return &h, nil
}

// auditHeadsQuery selects the audit heads, each run's from its run row or
// audit_heads (see RunHeads), as run_id, seq, hash, key_id, mac; where
// is a condition on run_id and on seq (bound twice: once per side).
func auditHeadsQuery(where string) string {
	return `SELECT id AS run_id, audit_seq AS seq, audit_hash AS hash, audit_key_id AS key_id, audit_mac AS mac FROM runs
		WHERE ` + strings.NewReplacer("run_id", "id", "seq", "audit_seq").Replace(where) + `
		UNION ALL SELECT run_id, seq, hash, key_id, mac FROM audit_heads WHERE ` + where
}

func (t *Tx) AuditRunHead(ctx context.Context, runID string) (*record.AuditRunHead, error) {
	h, err := scanAuditHead(t.queryRow(ctx, auditHeadsQuery(`run_id = ? AND seq > 0`)+` LIMIT 1`, runID, runID))
	if err != nil {
		return nil, fmt.Errorf("load the audit head of run %s: %w", runID, t.d.Err(err))
	}
	return h, nil
}

func (t *Tx) AuditRunHeads(ctx context.Context) ([]*record.AuditRunHead, error) {
	// seq > 0: a head row a rolled-back first append left is no head (see
	// the PostgreSQL dialect's AuditRunHead).
	hs, err := queryAll(ctx, t, scanAuditHead, auditHeadsQuery(`seq > 0`)+` ORDER BY run_id`)
	if err != nil {
		return nil, fmt.Errorf("list audit heads: %w", err)
	}
	return hs, nil
}

// --- anchors

const anchorColumns = `id, at, heads, prev_hash, hash, key_id, mac`

func scanAnchor(s Row) (*record.AuditAnchor, error) {
	var (
		a     record.AuditAnchor
		at    int64
		heads []byte
	)
	if err := s.Scan(&a.ID, &at, &heads, &a.PrevHash, &a.Hash, &a.KeyID, &a.MAC); err != nil {
		return nil, err
	}
	a.At = fromMillis(at)
	if len(heads) > 0 {
		if err := json.Unmarshal(heads, &a.Heads); err != nil {
			// Damage verify reports as the anchor's: its hash no longer matches.
			a.Heads = []record.AnchoredHead{{RunID: "(unreadable: " + err.Error() + ")"}}
		}
	}
	return &a, nil
}

func (t *Tx) LatestAnchor(ctx context.Context) (*record.AuditAnchor, error) {
	if t.write {
		// Row 0 is never read as an anchor: locking it makes anchor writers take turns.
		var id int64
		if err := t.queryRow(ctx, `SELECT id FROM audit_anchors WHERE id = 0`+t.d.LockRow()).Scan(&id); err != nil {
			return nil, fmt.Errorf("lock the anchor chain: %w", t.d.Err(err))
		}
	}
	a, err := scanAnchor(t.queryRow(ctx, `SELECT `+anchorColumns+` FROM audit_anchors WHERE id > 0 ORDER BY id DESC LIMIT 1`))
	if err != nil {
		return nil, fmt.Errorf("load the latest anchor: %w", t.d.Err(err))
	}
	return a, nil
}

func (t *Tx) AnchorHeads(ctx context.Context) ([]record.AnchoredHead, error) {
	var out []record.AnchoredHead
	// The heads in run rows (RunHeads), then the others; each statement is
	// answered by its table's index of heads not yet anchored.
	for _, q := range []string{
		`UPDATE runs SET audit_anchored = audit_seq WHERE audit_anchored <> audit_seq AND audit_seq > 0 RETURNING id, audit_seq, audit_hash`,
		`UPDATE audit_heads SET anchored = seq WHERE anchored <> seq AND seq > 0 RETURNING run_id, seq, hash`,
	} {
		rows, err := t.c.Query(ctx, t.d.Bind(q))
		if err != nil {
			return nil, fmt.Errorf("anchor audit heads: %w", t.d.Err(err))
		}
		hs, err := collect(t.d, rows, func(r Row) (*record.AnchoredHead, error) {
			var h record.AnchoredHead
			return &h, r.Scan(&h.RunID, &h.Seq, &h.Hash)
		})
		if err != nil {
			return nil, fmt.Errorf("anchor audit heads: %w", err)
		}
		for _, h := range hs {
			out = append(out, *h)
		}
	}
	slices.SortFunc(out, func(a, b record.AnchoredHead) int { return strings.Compare(a.RunID, b.RunID) })
	return out, nil
}

func (t *Tx) InsertAnchor(ctx context.Context, a *record.AuditAnchor) error {
	heads, err := json.Marshal(a.Heads)
	if err != nil {
		return fmt.Errorf("insert anchor %d: %w", a.ID, err)
	}
	err = t.guarded(ctx, nil, `INSERT INTO audit_anchors (`+anchorColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		a.ID, millis(a.At), heads, a.PrevHash, a.Hash, a.KeyID, a.MAC)
	if err != nil {
		return fmt.Errorf("insert anchor %d: %w", a.ID, err)
	}
	return nil
}

func (t *Tx) AuditAnchors(ctx context.Context) ([]*record.AuditAnchor, error) {
	as, err := queryAll(ctx, t, scanAnchor, `SELECT `+anchorColumns+` FROM audit_anchors WHERE id > 0 ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list anchors: %w", err)
	}
	return as, nil
}

// --- integrity head

func (t *Tx) IntegrityHead(ctx context.Context) (*record.IntegrityHead, error) {
	var (
		h     record.IntegrityHead
		since int64
	)
	err := t.queryRow(ctx, `SELECT keyed_since, seq, hash, anchor_id, anchor_hash, key_id, mac FROM integrity_head WHERE id = 1`).
		Scan(&since, &h.Seq, &h.Hash, &h.AnchorID, &h.AnchorHash, &h.KeyID, &h.MAC)
	if err != nil {
		return nil, fmt.Errorf("load integrity head: %w", t.d.Err(err))
	}
	h.KeyedSince = fromMillis(since)
	return &h, nil
}

func (t *Tx) PutIntegrityHead(ctx context.Context, h *record.IntegrityHead) error {
	_, err := t.c.Exec(ctx, t.d.Bind(`INSERT INTO integrity_head (id, keyed_since, seq, hash, anchor_id, anchor_hash, key_id, mac)
		VALUES (1, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET keyed_since = excluded.keyed_since, seq = excluded.seq,
			hash = excluded.hash, anchor_id = excluded.anchor_id, anchor_hash = excluded.anchor_hash,
			key_id = excluded.key_id, mac = excluded.mac`),
		millis(h.KeyedSince), h.Seq, h.Hash, h.AnchorID, h.AnchorHash, h.KeyID, h.MAC)
	if err != nil {
		return fmt.Errorf("write integrity head: %w", t.d.Err(err))
	}
	return nil
}
