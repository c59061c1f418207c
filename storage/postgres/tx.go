package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlstore"
)

// SQLSTATE codes that become sentinels of storage.Store.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	// codeDivisionByZero is a guarded write's refusal (see
	// dialect.GuardedUpdate): the row it was to change had changed.
	codeDivisionByZero = "22012"
)

// interpretError is the one place where native errors become the sentinels of
// storage.Store. The native error stays in the chain, for the message.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.ErrNotFound
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case codeUniqueViolation:
			return fmt.Errorf("%w: %w", storage.ErrDuplicate, err)
		case codeForeignKeyViolation:
			// The record refers to one that does not exist (a checkpoint of an
			// unknown run): the caller's "not found", not a storage failure.
			return fmt.Errorf("%w: a record it refers to does not exist: %w", storage.ErrNotFound, err)
		}
	}
	return err
}

// newTx is storage.Tx on one pgx transaction. Byte slices are bound as they
// are: pgx sends nil as NULL and reads NULL back as nil, and an empty slice as
// a zero-length BYTEA read back as an empty, non-nil slice.
func newTx(q *lazyTx, write bool) *sqlstore.Tx {
	if write {
		return sqlstore.NewWriteTx(&conn{q: q}, dialect{})
	}
	return sqlstore.NewReadTx(&conn{q: q}, dialect{})
}

// conn is sqlstore.Conn on a transaction.
type conn struct {
	q *lazyTx
}

func (c *conn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.q.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (c *conn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := c.q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (c *conn) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return c.q.QueryRow(ctx, query, args...)
}

// pgxTx is the transaction under c, for the savepoint pipeline, which needs
// pgx's batches. Only this package makes a Tx with dialect, always on a *conn.
func pgxTx(c sqlstore.Conn) *lazyTx { return c.(*conn).q }

// dialect is what PostgreSQL does differently.
type dialect struct{}

func (dialect) Err(err error) error { return interpretError(err) }

// Bind numbers the ? placeholders $1, $2, … in order.
func (dialect) Bind(query string) string {
	n := strings.Count(query, "?")
	if n == 0 {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 3*n)
	for i := 1; ; i++ {
		j := strings.IndexByte(query, '?')
		if j < 0 {
			break
		}
		b.WriteString(query[:j])
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(i))
		query = query[j+1:]
	}
	b.WriteString(query)
	return b.String()
}

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
//
// SaveRun is the exception the contract makes: a transition's writes travel
// in one pipeline without savepoints (see Pipeline), and after a failure the
// transaction is rolled back (Store.Update checks sqlstore.Tx.Lost).

const savepoint = "signoff_stmt"

// Guarded runs query inside a savepoint.
func (d dialect) Guarded(ctx context.Context, c sqlstore.Conn, scan func(sqlstore.Row) error, query string, args ...any) error {
	_, err := d.Pipeline(ctx, c, []sqlstore.Write{
		{SQL: "SAVEPOINT " + savepoint},
		{SQL: query, Args: args, Row: scan},
		{SQL: "RELEASE SAVEPOINT " + savepoint},
	})
	if err == nil || pgxTx(c).lost != nil {
		// BEGIN or a write sent ahead of the statement failed before its
		// savepoint was made: the transaction is lost, with nothing to roll
		// back to.
		return err
	}
	// Back to the state before the statement, and the savepoint forgotten, so
	// that the next guarded statement starts clean. One simple-protocol round trip.
	if _, rbErr := pgxTx(c).Exec(ctx, "ROLLBACK TO SAVEPOINT "+savepoint+"; RELEASE SAVEPOINT "+savepoint); rbErr != nil {
		return errors.Join(err, fmt.Errorf("roll back to savepoint: %w", rbErr))
	}
	return err
}

// CompareAndSet runs update in a savepoint (see CompareAndSetWrite).
func (d dialect) CompareAndSet(ctx context.Context, c sqlstore.Conn, table, keyColumn string, key any, update string, args ...any) error {
	w := d.CompareAndSetWrite(table, keyColumn, key, update, args...)
	// Zero rows changed is an answer, not a failed statement: the savepoint
	// is released as after a change.
	var answer error
	err := d.Guarded(ctx, c, func(r sqlstore.Row) error {
		answer = w.Row(r)
		if errors.Is(answer, storage.ErrConflict) || errors.Is(answer, storage.ErrNotFound) {
			return nil
		}
		return answer
	}, w.SQL, w.Args...)
	if err != nil {
		return err
	}
	return answer
}

var _ sqlstore.Pipeliner = dialect{}

// CompareAndSetWrite answers both questions in one statement: the UPDATE in
// a CTE, and an EXISTS over the statement's snapshot, which still holds the
// row if it was there, whoever changed it since.
func (dialect) CompareAndSetWrite(table, keyColumn string, key any, update string, args ...any) sqlstore.Write {
	return sqlstore.Write{
		SQL: `WITH changed AS (` + update + ` RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM changed), EXISTS (SELECT 1 FROM ` + table + ` WHERE ` + keyColumn +
			` = $` + strconv.Itoa(len(args)+1) + `)`,
		Args: append(args, key),
		Row: func(r sqlstore.Row) error {
			var changed, exists bool
			switch err := r.Scan(&changed, &exists); {
			case err != nil:
				return err
			case changed:
				return nil
			case exists:
				return storage.ErrConflict
			}
			return storage.ErrNotFound
		},
	}
}

// Pipeline sends ws as one pgx batch (see sendBatch).
func (dialect) Pipeline(ctx context.Context, c sqlstore.Conn, ws []sqlstore.Write) (int, error) {
	b := &pgx.Batch{}
	for _, w := range ws {
		b.Queue(w.SQL, w.Args...)
	}
	return sendBatch(ctx, c, b, func(i int, br pgx.BatchResults) error {
		if ws[i].Row != nil {
			return ws[i].Row(br.QueryRow())
		}
		_, err := br.Exec()
		return err
	})
}

// sendBatch sends b in one round trip (with BEGIN when it is the
// transaction's first, see lazyTx) and hands each statement's result to
// read, in order, up to the first error: it returns that statement's index
// (-1 when closing the batch failed) and the error, mapped.
func sendBatch(ctx context.Context, c sqlstore.Conn, b *pgx.Batch, read func(i int, br pgx.BatchResults) error) (int, error) {
	br := pgxTx(c).SendBatch(ctx, b)
	failed, err := -1, error(nil)
	for i := range b.Len() {
		if err = read(i, br); err != nil {
			failed = i
			break
		}
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	return failed, interpretError(err)
}

// statusNames is statuses as the text array that = ANY($n) takes.
func statusNames(statuses []record.Status) []string {
	out := make([]string, len(statuses))
	for i, s := range statuses {
		out[i] = string(s)
	}
	return out
}

func (dialect) ClaimRuns(ctx context.Context, c sqlstore.Conn, columns, owner string, statuses []record.Status, now, until int64, limit int) (sqlstore.Rows, error) {
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
	rows, err := c.Query(ctx, `WITH picked AS MATERIALIZED (
			SELECT id AS picked_id FROM runs
			WHERE status = ANY($3) AND lease_until <= $4
			ORDER BY updated_at, id
			LIMIT $5
			FOR UPDATE SKIP LOCKED
		)
		UPDATE runs SET lease_owner = $1, lease_until = $2, fence = fence + 1, version = version + 1
		FROM picked WHERE id = picked_id
		RETURNING `+columns,
		owner, until, statusNames(statuses), now, lim)
	return rows, interpretError(err)
}

// LockRow: inside Update, reading a run locks its row until commit. At READ
// COMMITTED each statement sees the latest commits, so without the lock a
// decision committed by another replica between reading the run and reading
// its checkpoints would look like a damaged chain. Every write transaction
// reads its run before anything else, so the lock order is always run first,
// then the run's audit head: no deadlock between them.
func (dialect) LockRow() string { return " FOR UPDATE" }

// AuditRunHead serialises appends to one run on that run's row of
// audit_heads: the SELECT … FOR UPDATE waits for any other transaction that
// appended to the run and has not ended, then reads the head it committed
// (READ COMMITTED re-reads a row it waited for). The INSERT before it makes
// sure the row exists to be locked: a second transaction's INSERT of the same
// run waits for the first's and then does nothing, so two first appends to a
// run (refusals about no run, say) take turns too. Both statements and
// nextval travel in one pipeline: one round trip.
//
// Appends to different runs lock different rows, so replicas no longer wait
// for each other's commits; and every transition already holds its run's row
// (LockRow), so the head's lock adds no wait there. seq comes from a sequence:
// unique and increasing, not gap-free (a rollback loses its number), and not
// in commit order across runs, which is why the chain is per run.
func (d dialect) AuditRunHead(ctx context.Context, c sqlstore.Conn, runID string) (int64, string, error) {
	var (
		seq  int64
		hash string
	)
	var spare int64
	if _, err := d.Pipeline(ctx, c, d.AuditHeadWrites(runID, &seq, &spare, &hash)); err != nil {
		return 0, "", err
	}
	return seq, hash, nil
}

// AuditHeadWrites are AuditRunHead's two statements. The SELECT takes two
// seqs: the second is for a next event of the run in the same transaction
// (a receipt's transition and its finish), which then needs no round trip
// of its own.
func (dialect) AuditHeadWrites(runID string, seq, spare *int64, hash *string) []sqlstore.Write {
	return []sqlstore.Write{
		{SQL: `INSERT INTO audit_heads (run_id, seq, hash) VALUES ($1, 0, '') ON CONFLICT (run_id) DO NOTHING`, Args: []any{runID}},
		{SQL: `SELECT nextval('audit_seq'), nextval('audit_seq'), hash FROM audit_heads WHERE run_id = $1 FOR UPDATE`, Args: []any{runID},
			Row: func(r sqlstore.Row) error {
				if err := r.Scan(seq, spare, hash); err != nil {
					return err
				}
				// Whatever order the server evaluated them in, the event
				// appended first takes the smaller.
				*seq, *spare = min(*seq, *spare), max(*seq, *spare)
				return nil
			}},
	}
}

var _ sqlstore.Ender = dialect{}

// EndWithNext ends c's transaction, a View's, with its next statement (see
// lazyTx.EndWithNext).
func (dialect) EndWithNext(c sqlstore.Conn) { pgxTx(c).EndWithNext() }

var _ sqlstore.Deferrer = dialect{}

// Defer queues the write on c's transaction (see lazyTx.Defer).
func (dialect) Defer(c sqlstore.Conn, what, query string, args ...any) {
	pgxTx(c).Defer(what, query, args...)
}

// AuditMoveHead moves the run's audit head in the statement that inserts
// its events, once, to the last.
func (dialect) AuditMoveHead(n int) string { return moveHeadClauses(n).move }

// headClauses are the WITH clauses that move a run's head to the last of n
// events an INSERT names (see sqlstore.Dialect.AuditMoveHead), for each way
// it may move.
type headClauses struct{ move, guarded, make string }

// headClausesOf are the clauses of one and two events, made once: a
// transition appends one or two.
var headClausesOf = [...]headClauses{1: makeHeadClauses(1), 2: makeHeadClauses(2)}

func moveHeadClauses(n int) headClauses {
	if n < len(headClausesOf) {
		return headClausesOf[n]
	}
	return makeHeadClauses(n)
}

// makeHeadClauses numbers the clauses' arguments for n events: the last
// event's seq and hash, the run id of the first ($2), then, after every
// event's 13, the head's key id and MAC and the hash a guarded move finds.
func makeHeadClauses(n int) headClauses {
	seq, hash := 13*(n-1)+1, 13*(n-1)+8
	key, mac, from := 13*n+1, 13*n+2, 13*n+3
	set := fmt.Sprintf(`seq = $%d, hash = $%d, key_id = $%d, mac = $%d`, seq, hash, key, mac)
	return headClauses{
		move:    `WITH head AS (UPDATE audit_heads SET ` + set + ` WHERE run_id = $2) `,
		guarded: fmt.Sprintf(`WITH head AS (UPDATE audit_heads SET %s WHERE run_id = $2 AND hash = $%d RETURNING 1) `, set, from),
		// A head made empty by a read that wrote nothing is taken as none.
		make: fmt.Sprintf(`WITH head AS (INSERT INTO audit_heads (run_id, seq, hash, key_id, mac) VALUES ($2, $%d, $%d, $%d, $%d)
			ON CONFLICT (run_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash, key_id = EXCLUDED.key_id, mac = EXCLUDED.mac
			WHERE audit_heads.hash = '' RETURNING 1) `, seq, hash, key, mac),
	}
}

// Batch sends qs as one pgx batch: one round trip for them all.
func (dialect) Batch(ctx context.Context, c sqlstore.Conn, qs []sqlstore.Query) error {
	b := &pgx.Batch{}
	for _, q := range qs {
		b.Queue(q.SQL, q.Args...)
	}
	_, err := sendBatch(ctx, c, b, func(i int, br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		err = qs[i].Rows(rows)
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
		return err
	})
	return err
}

// RunWritten queues a notification on the channel the feed (feed.go) listens
// to, with the run's id as its payload, sent in one pipeline with COMMIT (see
// lazyTx). PostgreSQL delivers it when the transaction commits and never when
// it rolls back, so a listener that wakes reads the committed run.
func (dialect) RunWritten(_ context.Context, c sqlstore.Conn, runID string) error {
	t := pgxTx(c)
	if !slices.Contains(t.notify, runID) {
		t.notify = append(t.notify, runID)
	}
	return nil
}

var _ sqlstore.Reserver = dialect{}

// ReserveQuery takes two seqs and reads the run's audit head without a
// lock, in a View before the transaction that appends after it. nextval is
// refused in a READ ONLY transaction, so the View that reserves begins
// without READ ONLY (it still writes nothing: a sequence is not rolled
// back); a View that began already cannot reserve. It takes
// seqsAfterReserved more for the store's pool (see seqPool), and while
// the pool runs low a few more again.
func (dialect) ReserveQuery(c sqlstore.Conn, runID string, into *storage.AuditReservation) (sqlstore.Query, bool) {
	t := pgxTx(c)
	if !t.writable() {
		return sqlstore.Query{}, false
	}
	extra := 0
	if t.seqs != nil {
		extra = seqsAfterReserved + t.seqs.topUp()
	}
	return sqlstore.Query{
		SQL: `SELECT nextval('audit_seq'), nextval('audit_seq'), COALESCE((SELECT hash FROM audit_heads WHERE run_id = $1), ''),
			ARRAY(SELECT nextval('audit_seq') FROM generate_series(1, $2))`,
		Args: []any{runID, extra},
		Rows: func(rows sqlstore.Rows) error {
			for rows.Next() {
				var a, b int64
				var pooled []int64
				if err := rows.Scan(&a, &b, &into.Hash, &pooled); err != nil {
					return err
				}
				into.RunID, into.Seq, into.Spare = runID, min(a, b), max(a, b)
				t.seqs.put(pooled...)
			}
			return rows.Err()
		},
	}, true
}

// seqsAfterReserved is how many seqs a reserving read pools beside its
// own, taken after them: the write after the one it reserves for (a
// receipt after its intent) follows the head that one leaves
// (RunWrite.Follows) and takes seqs larger than its events', which older
// pooled seqs are not.
const seqsAfterReserved = 2

var _ sqlstore.SeqPooler = dialect{}

// PooledSeqs takes two seqs larger than after from the store's pool (see
// seqPool) for a write whose head is known (a new run's, or
// RunWrite.Follows), or ok false when it holds none fresh.
func (dialect) PooledSeqs(c sqlstore.Conn, after int64) (seq, spare int64, ok bool) {
	t := pgxTx(c)
	if t.seqs == nil || !t.writable() {
		return 0, 0, false
	}
	return t.seqs.take(after)
}

// TopUp takes seqs for the store's pool (as many as seqPool.topUp says) in
// the round trip of a write that found none pooled: a store that only
// takes submissions has no reserving read to top the pool up.
func (dialect) TopUp(c sqlstore.Conn) (sqlstore.Write, bool) {
	t := pgxTx(c)
	if t.seqs == nil || !t.writable() {
		return sqlstore.Write{}, false
	}
	n := t.seqs.topUp()
	if n == 0 {
		return sqlstore.Write{}, false
	}
	return sqlstore.Write{
		SQL:  `SELECT ARRAY(SELECT nextval('audit_seq') FROM generate_series(1, $1))`,
		Args: []any{n},
		Row: func(r sqlstore.Row) error {
			var pooled []int64
			if err := r.Scan(&pooled); err != nil {
				return err
			}
			t.seqs.put(pooled...)
			return nil
		},
	}, true
}

// AuditMakeHead makes a new run's head at the last of its first events,
// in the statement that inserts them: where the run has a head already
// (events about its id written before it), only an empty one is moved,
// and the insert after it divides its seq by the heads made.
func (dialect) AuditMakeHead(n int) string { return moveHeadClauses(n).make }

// GuardedUpdate: the number of rows update changed divides one, so that
// none fails the statement (division by zero, codeDivisionByZero), which
// DeferGuarded reads as storage.ErrConflict. The divisor is a subquery, so
// the planner cannot fold it into an error of its own.
func (dialect) GuardedUpdate(update string) string {
	return `WITH changed AS (` + update + ` RETURNING 1) SELECT 1 / (SELECT count(*) FROM changed)`
}

// DeferGuarded queues the write on c's transaction (see lazyTx.DeferGuarded).
func (dialect) DeferGuarded(c sqlstore.Conn, what string, refused error, query string, args ...any) {
	pgxTx(c).DeferGuarded(what, refused, query, args...)
}

// GuardedAuditMoveHead moves the run's head only from the hash reserved;
// the insert after it divides its seq by the heads moved.
func (dialect) GuardedAuditMoveHead(n int) string { return moveHeadClauses(n).guarded }
