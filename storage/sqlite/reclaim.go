package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// reclaimPages is how many free pages one incremental_vacuum step gives back
// (16 MB at the default page size): each step is a short write transaction,
// so a server writing the same file waits for one step, not the whole reclaim.
const reclaimPages = 4096

// ReclaimReport says what Reclaim did.
type ReclaimReport struct {
	// Vacuumed: the file was converted to auto_vacuum=INCREMENTAL by a
	// one-time VACUUM (a store made before signoff set it on new files).
	Vacuumed bool
	// Pages is how many free pages were given back.
	Pages int64
	// Before and After are the file's size in bytes, its WAL folded in.
	Before, After int64
}

// Reclaim gives the pages that deleted rows left free (after signoff prune)
// back to the file system, so the file shrinks. A file made with
// auto_vacuum=INCREMENTAL (every store since migration 004's build) gets
// PRAGMA incremental_vacuum in steps of reclaimPages; an older one is
// converted once with VACUUM, which rewrites the whole file and holds the
// write lock while it does (once, then never again). It runs on a connection
// of its own, as another process would, and finishes by folding the WAL into
// the file.
func (s *Store) Reclaim(ctx context.Context) (*ReclaimReport, error) {
	if s.write == nil {
		return nil, s.readOnly()
	}
	db, err := OpenDB(s.path)
	if err != nil {
		return nil, fmt.Errorf("reclaim space: %w", err)
	}
	defer db.Close()
	rep := &ReclaimReport{}
	if rep.Before, err = fileSize(ctx, db); err != nil {
		return nil, fmt.Errorf("reclaim space: %w", err)
	}
	var mode int
	if err := db.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return nil, fmt.Errorf("reclaim space: read auto_vacuum: %w", err)
	}
	if mode != 2 {
		// The connection asked for INCREMENTAL when it opened (OpenDB); VACUUM
		// is what makes an existing file take it.
		if _, err := db.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`); err != nil {
			return nil, fmt.Errorf("reclaim space: set auto_vacuum: %w", err)
		}
		err := tempFiles(ctx, db, func() error {
			_, err := db.ExecContext(ctx, `VACUUM`)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("reclaim space: convert to incremental vacuum with VACUUM: %w", err)
		}
		rep.Vacuumed = true
	}
	for {
		var free int64
		if err := db.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
			return nil, fmt.Errorf("reclaim space: read freelist_count: %w", err)
		}
		if free == 0 {
			break
		}
		n := min(free, reclaimPages)
		if err := step(ctx, db, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, n)); err != nil {
			return nil, fmt.Errorf("reclaim space: %w", err)
		}
		rep.Pages += n
	}
	if rep.After, err = fileSize(ctx, db); err != nil {
		return nil, fmt.Errorf("reclaim space: %w", err)
	}
	return rep, nil
}

// CheckpointWAL folds the WAL into the database file and truncates it, so
// that the file's size is the store's.
func (s *Store) CheckpointWAL(ctx context.Context) error {
	db, err := OpenDB(s.path)
	if err != nil {
		return fmt.Errorf("checkpoint the WAL: %w", err)
	}
	defer db.Close()
	return checkpointWAL(ctx, db)
}

func checkpointWAL(ctx context.Context, db *sql.DB) error {
	if err := step(ctx, db, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("checkpoint the WAL: %w", err)
	}
	return nil
}

// fileSize checkpoints the WAL and reads the file's size from its pages.
func fileSize(ctx context.Context, db *sql.DB) (int64, error) {
	if err := checkpointWAL(ctx, db); err != nil {
		return 0, err
	}
	var pages, size int64
	if err := db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		return 0, fmt.Errorf("read page_count: %w", err)
	}
	if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size); err != nil {
		return 0, fmt.Errorf("read page_size: %w", err)
	}
	return pages * size, nil
}

// step runs a pragma that does its work row by row (incremental_vacuum
// frees one page a step) to the end.
func step(ctx context.Context, db *sql.DB, pragma string) error {
	rows, err := db.QueryContext(ctx, pragma)
	if err != nil {
		return fmt.Errorf("%s: %w", pragma, err)
	}
	defer rows.Close()
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", pragma, err)
	}
	return nil
}
