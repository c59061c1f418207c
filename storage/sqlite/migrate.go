package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"log/slog"
	"time"

	"github.com/signoff-dev/signoff/storage/schema"
)

// The schema's history: numbered files, append-only. A file that was applied
// somewhere must never change (its checksum is recorded), so a change to the
// schema is always a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration names one step of the schema's history.
type Migration = schema.Migration

var (
	// ErrSchemaTooNew: the database was migrated by a newer build of signoff.
	ErrSchemaTooNew = schema.ErrTooNew
	// ErrMigrationChanged: an applied migration's recorded checksum differs from
	// the file this build embeds.
	ErrMigrationChanged = schema.ErrChanged
)

// migrations is parsed once from the embedded files (schema.MustParse).
var migrations = schema.MustParse(migrationFiles)

// Migrations lists the schema versions this build knows, oldest first, so that
// every driver can be held to the same numbering.
func Migrations() []Migration { return schema.Versions(migrations) }

type appliedMigration struct {
	version  int
	name     string
	checksum string
}

// migrate brings db up to the newest schema this build knows. Each migration runs
// in its own transaction together with its schema_migrations row, so a crash
// leaves either all of it or none. Two processes opening a new file at once are
// safe: BEGIN IMMEDIATE serialises them and each re-reads what is applied inside
// its transaction.
func migrate(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	for _, m := range migrations {
		if err := applyMigration(ctx, db, m, log); err != nil {
			return err
		}
	}
	return nil
}

// createSchemaMigrations runs inside each migration's transaction, never on its
// own: a statement outside a transaction starts as a reader, and a reader that
// must then write after another process committed gets SQLITE_BUSY at once,
// without waiting. BEGIN IMMEDIATE takes the write lock first, and waits for it.
const createSchemaMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER NOT NULL PRIMARY KEY,
	name       TEXT    NOT NULL,
	checksum   TEXT    NOT NULL,
	applied_at INTEGER NOT NULL
)`

func applyMigration(ctx context.Context, db *sql.DB, m schema.File, log *slog.Logger) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %d (%s): %w", m.Version, m.Name, err)
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, createSchemaMigrations); err != nil {
		return fmt.Errorf("migrate %d (%s): create schema_migrations: %w", m.Version, m.Name, err)
	}
	applied, err := readApplied(ctx, tx)
	if err != nil {
		return fmt.Errorf("migrate %d (%s): %w", m.Version, m.Name, err)
	}
	if err := checkApplied(applied); err != nil {
		return err
	}
	for _, a := range applied {
		if a.version == m.Version {
			return nil // checkApplied compared its checksum
		}
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migrate %d (%s): %w", m.Version, m.Name, err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)`,
		m.Version, m.Name, m.Checksum, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("migrate %d (%s): record: %w", m.Version, m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %d (%s): commit: %w", m.Version, m.Name, err)
	}
	log.Info("applied schema migration", "version", m.Version, "name", m.Name)
	return nil
}

func readApplied(ctx context.Context, tx *sql.Tx) ([]appliedMigration, error) {
	rows, err := tx.QueryContext(ctx, `SELECT version, name, checksum FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	var out []appliedMigration
	for rows.Next() {
		var a appliedMigration
		if err := rows.Scan(&a.version, &a.name, &a.checksum); err != nil {
			return nil, fmt.Errorf("read schema_migrations: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	return out, nil
}

// checkApplied refuses a database this build must not write to: one migrated by a
// newer build, or one whose applied migrations are not the ones embedded here.
func checkApplied(applied []appliedMigration) error {
	known := len(migrations)
	for _, a := range applied {
		if a.version > known {
			return fmt.Errorf("%w: the database has schema version %d (%s), this build knows up to %d; upgrade signoff",
				ErrSchemaTooNew, a.version, a.name, known)
		}
		if a.version < 1 {
			return fmt.Errorf("%w: the database records unknown schema version %d (%s)", ErrMigrationChanged, a.version, a.name)
		}
		if m := migrations[a.version-1]; a.checksum != m.Checksum {
			return fmt.Errorf("%w: schema version %d (%s) was applied with checksum %s, this build has %s",
				ErrMigrationChanged, a.version, a.name, a.checksum, m.Checksum)
		}
	}
	return nil
}
