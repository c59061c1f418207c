package app

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/storage/postgres"
	"github.com/signoff-dev/signoff/storage/sqlite"
)

// isPostgres reports whether --db names a PostgreSQL database (a postgres:// or
// postgresql:// URL) rather than a SQLite file.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// redactDB is db fit for a message: a URL's password is masked.
func redactDB(db string) string {
	if !isPostgres(db) {
		return db
	}
	u, err := url.Parse(db)
	if err != nil {
		return "the PostgreSQL database in --db"
	}
	return u.Redacted()
}

// refuseSchema marks a database this build must not use as it is (not migrated,
// migrated by a newer build, or by a different one): nothing was changed, so
// exit 2, and the message says what to do.
func refuseSchema(err error) error {
	if errors.Is(err, postgres.ErrNotMigrated) || errors.Is(err, postgres.ErrSchemaTooNew) ||
		errors.Is(err, postgres.ErrMigrationChanged) || errors.Is(err, sqlite.ErrNotMigrated) ||
		errors.Is(err, sqlite.ErrSchemaTooNew) || errors.Is(err, sqlite.ErrMigrationChanged) || errors.Is(err, sqlite.ErrNoStore) {
		return fmt.Errorf("%w%w", err, usageError{}) // usageError{} adds no text, only the exit code
	}
	return err
}

func (c *cli) migrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply this build's schema migrations to the --db database",
		Long: `Apply this build's schema migrations to the --db database and print what was applied.

With --db postgres://… (or postgresql://…) the other commands refuse a database
that is not migrated, so run this once per upgrade, before starting the new
build; replicas running it at once are safe. A SQLite file is migrated whenever
it is opened, so for SQLite this only opens the file and reports its version.`,
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			log, err := newLogger(c.opts, c.errOut)
			if err != nil {
				return err
			}
			if !isPostgres(c.opts.db) {
				s, err := sqlite.Open(c.ctx, c.opts.db, sqlite.WithLogger(log))
				if err != nil {
					return err
				}
				if err := s.Close(); err != nil {
					return fmt.Errorf("close store %s: %w", c.opts.db, err)
				}
				ms := sqlite.Migrations()
				last := ms[len(ms)-1]
				fmt.Fprintf(c.out, "%s: SQLite migrates when opened; schema version %d (%s)\n", c.opts.db, last.Version, last.Name)
				return nil
			}
			applied, err := postgres.Migrate(c.ctx, c.opts.db, postgres.WithLogger(log))
			for _, m := range applied {
				fmt.Fprintf(c.out, "applied %03d_%s\n", m.Version, m.Name)
			}
			if err != nil {
				return refuseSchema(fmt.Errorf("%s: %w", redactDB(c.opts.db), err))
			}
			ms := postgres.Migrations()
			last := ms[len(ms)-1]
			if len(applied) == 0 {
				fmt.Fprintf(c.out, "%s: up to date, schema version %d (%s)\n", redactDB(c.opts.db), last.Version, last.Name)
			} else {
				fmt.Fprintf(c.out, "%s: schema version %d (%s)\n", redactDB(c.opts.db), last.Version, last.Name)
			}
			return nil
		},
	}
}
