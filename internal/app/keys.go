package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/keyring"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// Where the integrity keys come from, first match wins:
//   - SIGNOFF_KEYS: the keys themselves, one ID:SECRET a line (from a secret
//     manager; every replica of a PostgreSQL store needs the same);
//   - --keys FILE, or SIGNOFF_KEYS_FILE: a file of such lines;
//   - for a SQLite store, signoff.keys beside it, made with a fresh key by the
//     first command that writes a store that is not sealed yet.
//
// A store that is sealed is never written without its keys: a new key would
// leave every earlier seal unverifiable, and unsealed rows written after the
// store was keyed read as tampering.

// defaultKeysFile is the key file beside a SQLite store.
func defaultKeysFile(db string) string { return filepath.Join(filepath.Dir(db), "signoff.keys") }

// keySource says where the keys of o come from, for messages.
func keySource(o options, getenv func(string) string) string {
	switch {
	case getenv("SIGNOFF_KEYS") != "":
		return "SIGNOFF_KEYS"
	case o.keys != "":
		return o.keys
	case !isPostgres(o.db):
		return defaultKeysFile(o.db)
	}
	return ""
}

// loadKeys reads the keys of o, or returns nil when there are none (and none
// may be made here). create makes the default key file of a SQLite store.
func loadKeys(o options, getenv func(string) string) (*keyring.Ring, error) {
	if text := getenv("SIGNOFF_KEYS"); text != "" {
		k, err := keyring.Parse(text)
		if err != nil {
			return nil, usageError{fmt.Sprintf("SIGNOFF_KEYS: %v", err)}
		}
		return k, nil
	}
	path := o.keys
	if path == "" && !isPostgres(o.db) {
		path = defaultKeysFile(o.db)
	}
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && o.keys == "" {
		return nil, nil // the default file, not made yet
	}
	if err != nil {
		return nil, usageError{fmt.Sprintf("integrity keys %s: %v", path, err)}
	}
	k, err := keyring.Parse(string(b))
	if err != nil {
		return nil, usageError{fmt.Sprintf("integrity keys %s: %v", path, err)}
	}
	return k, nil
}

// makeKeysFile writes a fresh key to path (only the owner may read it) and
// says so on w. The file appears whole or not at all (written aside, then
// linked into place), so that processes starting together agree on one key:
// whoever loses the race reads the winner's.
func makeKeysFile(path string, w io.Writer) (*keyring.Ring, error) {
	line, err := keyring.NewLine("k" + time.Now().UTC().Format("20060102"))
	if err != nil {
		return nil, err
	}
	text := "# signoff integrity keys: the first seals, all verify. Keep this file away from\n" +
		"# whoever can write the store (see docs/security.md, \"Integrity keys\").\n" + line + "\n"
	tmp, err := os.CreateTemp(filepath.Dir(path), ".signoff.keys-*")
	if err != nil {
		return nil, fmt.Errorf("make integrity key file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("make integrity key file %s: %w", path, err)
	}
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("make integrity key file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("make integrity key file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("make integrity key file %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("integrity keys %s: %w", path, err)
		}
		return keyring.Parse(string(b))
	} else if err != nil {
		return nil, fmt.Errorf("make integrity key file %s: %w", path, err)
	}
	fmt.Fprintf(w, "signoff: made integrity key file %s: records are sealed with it from now on; keep it, and keep it out of reach of whoever can write the store\n", path)
	return keyring.Parse(text)
}

// storeKeys decides the keys a command uses on store: the configured ones;
// for a writing command on a store not sealed yet, a new default key file
// (SQLite) or none with a warning (PostgreSQL); and for a writing command on
// a store that is sealed, never none and never keys without the one its head
// is sealed with: rows sealed with another key would read as tampering.
func storeKeys(ctx context.Context, o options, getenv func(string) string, store storage.Store, w io.Writer) (*keyring.Ring, error) {
	if f := shadowedKeysFile(o, getenv); f != "" {
		fmt.Fprintf(w, "signoff: warning: the integrity keys come from SIGNOFF_KEYS; the key file %s is not read\n", f)
	}
	keys, err := loadKeys(o, getenv)
	if o.readOnly && err != nil {
		// Reading needs no key: without one, seals are not checked, and
		// verify says so.
		fmt.Fprintf(w, "signoff: seals not checked: %v\n", err)
		return nil, nil
	}
	if err != nil || o.readOnly {
		return keys, err
	}
	// Read before the engine is built: it is built with the keys chosen here.
	head, err := workflow.ReadIntegrityHead(ctx, store)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		head = nil
	case err != nil:
		return nil, fmt.Errorf("read the store's integrity head: %w", err)
	case keys == nil:
		return nil, usageError{fmt.Sprintf("this store is sealed (since %s) and its integrity keys are not here: set SIGNOFF_KEYS or --keys (looked for %s)",
			head.KeyedSince.UTC().Format(time.RFC3339), keySource(o, getenv))}
	case head.KeyID != "" && !keys.Has(head.KeyID):
		return nil, usageError{fmt.Sprintf("the store is sealed with key %s; the keys given are %s (from %s): nothing is written with keys that are not the store's",
			head.KeyID, strings.Join(keys.IDs(), ", "), keySource(o, getenv))}
	}
	if keys != nil {
		return keys, nil
	}
	if isPostgres(o.db) {
		fmt.Fprintln(w, "signoff: warning: no integrity keys (SIGNOFF_KEYS or --keys): records are not sealed, so someone who can write the database can change them unnoticed")
		return nil, nil
	}
	return makeKeysFile(defaultKeysFile(o.db), w)
}

// shadowedKeysFile is the key file that SIGNOFF_KEYS keeps from being read
// (--keys, or signoff.keys beside a SQLite store when it exists), or "".
func shadowedKeysFile(o options, getenv func(string) string) string {
	switch {
	case getenv("SIGNOFF_KEYS") == "":
		return ""
	case o.keys != "":
		return o.keys
	case isPostgres(o.db):
		return ""
	}
	if _, err := os.Stat(defaultKeysFile(o.db)); err == nil {
		return defaultKeysFile(o.db)
	}
	return ""
}
