package postgres

import (
	"context"
	"embed"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/signoff-dev/signoff/storage/schema"
)

// The schema's history: numbered files, append-only, with the same versions and
// names as storage/sqlite's (a test holds them to it). A file that was applied
// somewhere must never change (its checksum is recorded), so a change to the
// schema is always a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration names one step of the schema's history.
type Migration = schema.Migration

var (
	// ErrNotMigrated: the database lacks migrations this build needs. Open never
	// migrates (several replicas starting at once should not all try, and a
	// schema change is an operator's decision); run `signoff migrate`.
	ErrNotMigrated = schema.ErrNotMigrated
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

// Migrate brings the database that dsn names (its schema is the first of the
// connection's search_path) up to the newest schema this build knows, and
// returns the migrations it applied, oldest first (none when it was up to date).
//
// Each migration runs in its own transaction together with its schema_migrations
// row, so a crash leaves either all of it or none. Several replicas may run
// Migrate at once: each transaction first takes a transaction-scoped advisory
// lock, keyed by the schema, so they apply each migration one after the other,
// and whoever comes second finds it applied. Migrate refuses a database migrated
// by a newer build (ErrSchemaTooNew) or whose applied migrations differ from this
// build's (ErrMigrationChanged).
func Migrate(ctx context.Context, dsn string, opts ...Option) ([]Migration, error) {
	o := newOptions(opts)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var applied []Migration
	for _, m := range migrations {
		done, err := applyMigration(ctx, conn, m, o.log)
		if err != nil {
			return applied, err
		}
		if done {
			applied = append(applied, m.Migration)
		}
	}
	return applied, nil
}

// lockMigrations serialises migrators of one schema until their transaction
// ends. The key is a hash of the schema's name, so migrations of different
// schemas (tests, or two deployments sharing a database) do not wait for each
// other; a hash collision would only make them wait.
const lockMigrations = `SELECT pg_advisory_xact_lock(hashtextextended('signoff.migrate:' || coalesce(current_schema(), ''), 0))`

const createSchemaMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER NOT NULL PRIMARY KEY,
	name       TEXT    NOT NULL,
	checksum   TEXT    NOT NULL,
	applied_at BIGINT  NOT NULL
)`

// applyMigration applies m unless it is applied, and reports whether it did.
func applyMigration(ctx context.Context, conn *pgx.Conn, m schema.File, log *slog.Logger) (bool, error) {
	// READ COMMITTED takes a new snapshot for every statement, so the read of
	// schema_migrations after the lock sees what the previous holder committed.
	// Under REPEATABLE READ the snapshot would date from the lock statement,
	// before that commit, and the migration would run twice.
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return false, fmt.Errorf("migrate %d (%s): %w", m.Version, m.Name, err)
	}
	defer rollbackTx(ctx, tx) // a no-op after Commit
	if _, err := tx.Exec(ctx, lockMigrations); err != nil {
		return false, fmt.Errorf("migrate %d (%s): lock: %w", m.Version, m.Name, err)
	}
	// Under the lock: CREATE TABLE IF NOT EXISTS is not safe against a
	// concurrent CREATE of the same table.
	if _, err := tx.Exec(ctx, createSchemaMigrations); err != nil {
		return false, fmt.Errorf("migrate %d (%s): create schema_migrations: %w", m.Version, m.Name, err)
	}
	applied, err := readApplied(ctx, tx)
	if err != nil {
		return false, fmt.Errorf("migrate %d (%s): %w", m.Version, m.Name, err)
	}
	if err := checkApplied(applied); err != nil {
		return false, err
	}
	for _, a := range applied {
		if a.version == m.Version {
			return false, nil // checkApplied compared its checksum
		}
	}
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("migrate %d (%s): %w", m.Version, m.Name, err)
	}
	if _, err := tx.Exec(ctx,
		`INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)`,
		m.Version, m.Name, m.Checksum, time.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("migrate %d (%s): record: %w", m.Version, m.Name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("migrate %d (%s): commit: %w", m.Version, m.Name, err)
	}
	log.Info("applied schema migration", "version", m.Version, "name", m.Name)
	return true, nil
}

// querier is what reading schema_migrations needs: a pool, a conn or a tx.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func readApplied(ctx context.Context, q querier) ([]appliedMigration, error) {
	rows, err := q.Query(ctx, `SELECT version, name, checksum FROM schema_migrations ORDER BY version`)
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

// checkSchema is Open's look at the schema: it changes nothing, and refuses a
// database that is not exactly at this build's newest version.
func checkSchema(ctx context.Context, q querier) error {
	var exists bool
	// to_regclass resolves the name through search_path, as every query of the
	// store will, and says NULL instead of failing when there is no such table.
	if err := q.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	var applied []appliedMigration
	if exists {
		var err error
		if applied, err = readApplied(ctx, q); err != nil {
			return fmt.Errorf("check schema: %w", err)
		}
		if err := checkApplied(applied); err != nil {
			return err
		}
	}
	versions := make([]int, len(applied))
	for i, a := range applied {
		versions[i] = a.version
	}
	return schema.Missing(migrations, versions, "run `signoff migrate`")
}

// CheckSchema says whether the database's schema is still exactly this build's
// (Open's check, again): a long-running server asks it for its readiness, since
// a newer build may migrate the database, or a restore roll it back, while it runs.
func (s *Store) CheckSchema(ctx context.Context) error {
	return checkSchema(ctx, s.pool)
}
