// Package schema reads the numbered migration files that every storage driver
// embeds, so that the drivers number, name and checksum their schema history the
// same way. It knows files, not databases: each driver applies them in its own
// dialect.
package schema

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration names one step of the schema's history.
type Migration struct {
	Version int
	Name    string
}

// File is one migration as embedded: its SQL and the checksum a database records
// when it applies it, so that a file changed after shipping is noticed.
type File struct {
	Migration
	SQL      string
	Checksum string
}

var (
	// ErrTooNew: the database was migrated by a newer build of signoff. Writing to
	// it with this build could corrupt what the newer one relies on.
	ErrTooNew = errors.New("database schema is newer than this build")
	// ErrChanged: an applied migration's recorded checksum differs from the file
	// this build embeds, so the schema is not what this build expects.
	ErrChanged = errors.New("applied migration differs from this build")
	// ErrNotMigrated: the database lacks migrations this build needs.
	ErrNotMigrated = errors.New("database schema is not migrated")
)

// Missing refuses a database that has not applied every one of files, given
// the versions it has applied: ErrNotMigrated, naming what is missing and
// saying fix (what to run). It returns nil when nothing is missing.
func Missing(files []File, applied []int, fix string) error {
	var missing []string
	for _, m := range files {
		if !slices.Contains(applied, m.Version) {
			missing = append(missing, fmt.Sprintf("%d (%s)", m.Version, m.Name))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	what := "version " + missing[0] + " is"
	if len(missing) > 1 {
		what = "versions " + strings.Join(missing, ", ") + " are"
	}
	return fmt.Errorf("%w: schema %s not applied; %s", ErrNotMigrated, what, fix)
}

// Parse reads migrations/NNN_name.sql files and insists on versions 1, 2, 3, …
// with no gap, so that "the highest applied version" means "everything up to it".
func Parse(fsys fs.FS) ([]File, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []File
	for _, name := range names {
		base := strings.TrimSuffix(path.Base(name), ".sql")
		num, label, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || label == "" {
			return nil, fmt.Errorf("migration file %s: want NNN_name.sql", name)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(body)
		ms = append(ms, File{Migration: Migration{Version: v, Name: label}, SQL: string(body), Checksum: hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(ms, func(a, b File) int { return cmp.Compare(a.Version, b.Version) })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %d (%s): versions must run 1, 2, 3… without gaps or repeats", m.Version, m.Name)
		}
	}
	return ms, nil
}

// MustParse is Parse for a driver's embedded files: a malformed name is a build
// mistake, caught by the first test that touches the driver.
func MustParse(fsys fs.FS) []File {
	ms, err := Parse(fsys)
	if err != nil {
		panic(err)
	}
	return ms
}

// Versions lists the migrations of files, oldest first.
func Versions(files []File) []Migration {
	out := make([]Migration, len(files))
	for i, f := range files {
		out[i] = f.Migration
	}
	return out
}
