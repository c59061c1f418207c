package sqlstore

import (
	"context"
	"fmt"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// Query is one statement of a batch (Dialect.Batch): bound, with a function
// that reads all its rows (and must not close them).
type Query struct {
	SQL  string
	Args []any
	Rows func(Rows) error
}

// each is a Query's Rows that scans every row with scan into *out.
func each[T any](scan func(Row) (*T, error), out *[]*T) func(Rows) error {
	return func(rows Rows) error {
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return err
			}
			*out = append(*out, v)
		}
		return rows.Err()
	}
}

// LoadRun reads the run and the parts asked for with one Dialect.Batch: the
// same statements as Run and the list methods, so that a database that
// pipelines them answers in one round trip.
func (t *Tx) LoadRun(ctx context.Context, id string, parts storage.RunParts) (*storage.RunBundle, error) {
	b := &storage.RunBundle{}
	var runs []*record.Run
	var heads []*record.AuditRunHead
	q := `SELECT ` + runColumns + ` FROM runs WHERE id = ?`
	if t.write {
		q += t.d.LockRow()
	}
	qs := []Query{{SQL: q, Args: []any{id}, Rows: each(scanRun, &runs)}}
	add := func(want bool, query string, rows func(Rows) error) {
		if want {
			qs = append(qs, Query{SQL: t.d.Bind(query), Args: []any{id}, Rows: rows})
		}
	}
	add(parts.Checkpoints, `SELECT `+checkpointColumns+` FROM checkpoints WHERE run_id = ? ORDER BY seq`, each(scanCheckpoint, &b.Checkpoints))
	add(parts.Requests, `SELECT `+requestColumns+` FROM approval_requests WHERE run_id = ? ORDER BY created_at, id`, each(scanRequest, &b.Requests))
	add(parts.Decisions, `SELECT `+decisionColumns+` FROM decisions WHERE run_id = ? ORDER BY id`, each(scanDecision, &b.Decisions))
	add(parts.Operations, `SELECT `+operationColumns+` FROM operations WHERE run_id = ? ORDER BY idx, op_key`, each(scanOperation, &b.Operations))
	add(parts.Messages, `SELECT `+locationColumns+` FROM message_locations WHERE run_id = ? ORDER BY posted_at, request_id`, each(scanLocation, &b.Messages))
	add(parts.Audit, `SELECT `+auditColumns+` FROM audit WHERE run_id = ? ORDER BY seq`, each(scanAudit, &b.Audit))
	var inCheckpoints []*record.AuditEvent
	if parts.Audit {
		qs = append(qs, Query{SQL: t.d.Bind(auditHeadsQuery(`run_id = ? AND seq > 0`)), Args: []any{id, id}, Rows: each(scanAuditHead, &heads)})
		if _, ok := t.d.(RunHeads); ok {
			add(true, `SELECT `+checkpointEventColumns+` FROM checkpoints WHERE run_id = ? AND last_event_seq > 0 ORDER BY seq`, eventsOfCheckpoints(&inCheckpoints))
		}
	}
	add(parts.Outbox, `SELECT `+outboxColumns+` FROM outbox WHERE run_id = ? ORDER BY id`, each(scanOutbox, &b.Outbox))
	var res storage.AuditReservation
	if rv, ok := t.d.(Reserver); ok && parts.Reserve {
		if q, ok := rv.ReserveQuery(t.c, id, &res); ok {
			qs = append(qs, q)
		}
	}
	qs[0].SQL = t.d.Bind(qs[0].SQL)
	if err := t.d.Batch(ctx, t.c, qs); err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, err)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("load run %s: %w", id, storage.ErrNotFound)
	}
	b.Run = runs[0]
	if len(inCheckpoints) > 0 {
		b.Audit = mergeBySeq(b.Audit, inCheckpoints, false)
	}
	if res.RunID != "" {
		b.Reserved = &res
	}
	if len(heads) > 0 {
		b.AuditHead = heads[0]
	}
	return b, nil
}

// RunQueries runs qs one after another on c: Dialect.Batch for a database
// with nothing better.
func RunQueries(ctx context.Context, c Conn, d Dialect, qs []Query) error {
	for _, q := range qs {
		if err := runQuery(ctx, c, q); err != nil {
			return d.Err(err)
		}
	}
	return nil
}

// runQuery runs q and closes its rows even if q.Rows panics: rows left open
// on SQLite's write connection would keep it from ever being closed.
func runQuery(ctx context.Context, c Conn, q Query) error {
	rows, err := c.Query(ctx, q.SQL, q.Args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return q.Rows(rows)
}
