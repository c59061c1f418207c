package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/sqlstore"
)

// EditAuditEvents hands every audit event of the store db holds to edit,
// in seq order, as stored: a row of audit, or one of the events a
// checkpoint's row keeps (its run and checkpoint are the row's, and stay
// so). Each is written back as edit leaves it, or deleted when edit
// returns false; a checkpoint row left with none keeps none. It is what a
// person with the file can do behind the engine's back, for the tests that
// show what the verifier catches and for tools that mend a store, and it
// checks nothing: db is a store's file opened with OpenDB, no store open
// on it.
func EditAuditEvents(ctx context.Context, db *sql.DB, edit func(e *record.AuditEvent) (keep bool)) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("edit audit events: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	rows, err := eventRows(ctx, tx)
	if err != nil {
		return fmt.Errorf("edit audit events: %w", err)
	}
	for _, r := range rows {
		if err := r.edit(ctx, tx, edit); err != nil {
			return fmt.Errorf("edit audit events: %w", err)
		}
	}
	return tx.Commit()
}

// eventRow is a row that holds audit events: a row of audit (cp nil, one
// event) or a checkpoint's row.
type eventRow struct {
	events []*record.AuditEvent
	cp     *record.Checkpoint // RunID, Seq and Hash of the checkpoint's row
}

// eventRows are the rows holding events, by the seq of their first event.
func eventRows(ctx context.Context, tx *sql.Tx) ([]*eventRow, error) {
	var out []*eventRow
	rows, err := tx.QueryContext(ctx, `SELECT seq, run_id, actor, action, detail, at, prev_hash, hash, checkpoint_seq,
		checkpoint_hash, key_id, mac, format FROM audit`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var e record.AuditEvent
		var at int64
		if err := rows.Scan(&e.Seq, &e.RunID, &e.Actor, &e.Action, &e.Detail, &at, &e.PrevHash, &e.Hash,
			&e.CheckpointSeq, &e.CheckpointHash, &e.KeyID, &e.MAC, &e.Format); err != nil {
			rows.Close()
			return nil, err
		}
		if at != 0 {
			e.At = time.UnixMilli(at).UTC()
		}
		out = append(out, &eventRow{events: []*record.AuditEvent{&e}})
	}
	if err := closeRows(rows); err != nil {
		return nil, err
	}
	rows, err = tx.QueryContext(ctx, `SELECT run_id, seq, hash, events FROM checkpoints WHERE last_event_seq > 0`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var cp record.Checkpoint
		var b []byte
		if err := rows.Scan(&cp.RunID, &cp.Seq, &cp.Hash, &b); err != nil {
			rows.Close()
			return nil, err
		}
		evs, err := sqlstore.DecodeEvents(cp.RunID, cp.Seq, cp.Hash, b)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, &eventRow{events: evs, cp: &cp})
	}
	if err := closeRows(rows); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *eventRow) int { return int(a.events[0].Seq - b.events[0].Seq) })
	return out, nil
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// edit hands r's events to edit and writes back what it leaves.
func (r *eventRow) edit(ctx context.Context, tx *sql.Tx, edit func(*record.AuditEvent) bool) error {
	if r.cp == nil {
		e := r.events[0]
		seq := e.Seq
		if !edit(e) {
			_, err := tx.ExecContext(ctx, `DELETE FROM audit WHERE seq = ?`, seq)
			return err
		}
		var at int64
		if !e.At.IsZero() {
			at = e.At.UnixMilli()
		}
		_, err := tx.ExecContext(ctx, `UPDATE audit SET seq = ?, run_id = ?, actor = ?, action = ?, detail = ?, at = ?, prev_hash = ?,
			hash = ?, checkpoint_seq = ?, checkpoint_hash = ?, key_id = ?, mac = ?, format = ? WHERE seq = ?`,
			e.Seq, e.RunID, e.Actor, e.Action, e.Detail, at, e.PrevHash, e.Hash, e.CheckpointSeq, e.CheckpointHash,
			e.KeyID, e.MAC, e.Format, seq)
		return err
	}
	var kept []*record.AuditEvent
	for _, e := range r.events {
		if edit(e) {
			kept = append(kept, e)
		}
	}
	var (
		b    []byte
		last int64
	)
	if len(kept) > 0 {
		b, last = sqlstore.EncodeEvents(kept), kept[len(kept)-1].Seq
	}
	_, err := tx.ExecContext(ctx, `UPDATE checkpoints SET events = ?, last_event_seq = ? WHERE run_id = ? AND seq = ?`, b, last, r.cp.RunID, r.cp.Seq)
	return err
}
