package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/storagetest"
)

func openStore(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s
}

func tempPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "signoff.db")
}

func TestStore(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		s, err := Open(t.Context(), tempPath(t))
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		return s // the suite closes it
	})
}

func TestMigrationsAreNumberedFromOne(t *testing.T) {
	ms := Migrations()
	if len(ms) == 0 {
		t.Fatal("no migrations embedded")
	}
	for i, m := range ms {
		if m.Version != i+1 || m.Name == "" {
			t.Errorf("migration %d is %+v; want version %d and a name", i, m, i+1)
		}
	}
}

func schemaRows(t *testing.T, path string) map[int]string {
	t.Helper()
	db, err := OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), `SELECT version, checksum FROM schema_migrations`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]string{}
	for rows.Next() {
		var v int
		var sum string
		if err := rows.Scan(&v, &sum); err != nil {
			t.Fatal(err)
		}
		out[v] = sum
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMigrationsIdempotentOnReopen(t *testing.T) {
	path := tempPath(t)
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.InsertRun(ctx, &record.Run{ID: "run-1", Status: record.StatusRunning})
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	first := schemaRows(t, path)
	for range 3 {
		s := openStore(t, path)
		if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			_, err := tx.Run(ctx, "run-1")
			return err
		}); err != nil {
			t.Fatalf("after reopening: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	again := schemaRows(t, path)
	if len(again) != len(Migrations()) || len(again) != len(first) {
		t.Errorf("schema_migrations has %d rows after reopening (%d before), want %d", len(again), len(first), len(Migrations()))
	}
	for v, sum := range first {
		if again[v] != sum {
			t.Errorf("version %d checksum changed on reopen: %s → %s", v, sum, again[v])
		}
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	path := tempPath(t)
	openStore(t, path).Close()
	future := len(Migrations()) + 7
	execRaw(t, path, `INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?, 'from_the_future', 'x', 0)`, future)

	s, err := Open(t.Context(), path)
	if err == nil {
		s.Close()
		t.Fatal("opened a database migrated by a newer build")
	}
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("error %v is not ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(future)) {
		t.Errorf("error %q does not name version %d", err, future)
	}
}

func TestRefusesChangedMigration(t *testing.T) {
	path := tempPath(t)
	openStore(t, path).Close()
	execRaw(t, path, `UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1`)

	s, err := Open(t.Context(), path)
	if err == nil {
		s.Close()
		t.Fatal("opened a database whose applied migration differs from this build")
	}
	if !errors.Is(err, ErrMigrationChanged) || !strings.Contains(err.Error(), "version 1") {
		t.Errorf("got %v; want ErrMigrationChanged naming version 1", err)
	}
}

func execRaw(t *testing.T, path, query string, args ...any) {
	t.Helper()
	db, err := OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), query, args...); err != nil {
		t.Fatal(err)
	}
}

// TestTwoStoresShareAFile is a CLI and a server writing to one file at once: two
// Stores with their own connections, as two processes would have. SQLite's write
// lock serialises them; busy_timeout makes the loser wait instead of failing.
func TestTwoStoresShareAFile(t *testing.T) {
	const perStore, writers, updates = 2, 4, 25
	path := tempPath(t)
	stores := []*Store{openStore(t, path), openStore(t, path)}
	if err := stores[0].Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.InsertRun(ctx, &record.Run{ID: "counter", Status: record.StatusRunning})
	}); err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for si, s := range stores {
		for w := range writers {
			wg.Go(func() {
				<-start
				for i := range updates {
					err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
						// Read and write in one transaction: it holds the lock
						// throughout, so the counter never loses an increment.
						r, err := tx.Run(ctx, "counter")
						if err != nil {
							return err
						}
						r.Step++
						if err := tx.UpdateRun(ctx, r); err != nil {
							return err
						}
						id := fmt.Sprintf("run-%d-%d-%d", si, w, i)
						if err := tx.InsertRun(ctx, &record.Run{ID: id, Status: record.StatusRunning}); err != nil {
							return err
						}
						return tx.AppendAudit(ctx, &record.AuditEvent{RunID: id, Action: "start"}, nil)
					})
					if err != nil {
						t.Errorf("store %d writer %d update %d: %v", si, w, i, err)
						return
					}
				}
			})
		}
		// Readers of each store run alongside.
		wg.Go(func() {
			<-start
			for range updates {
				if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
					_, err := tx.ListRuns(ctx, storage.RunFilter{Limit: 10})
					return err
				}); err != nil {
					t.Errorf("store %d view: %v", si, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	total := perStore * writers * updates
	err := stores[1].View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		r, err := tx.Run(ctx, "counter")
		if err != nil {
			return err
		}
		if r.Step != total || r.Version != int64(total+1) {
			t.Errorf("counter step %d version %d, want %d and %d", r.Step, r.Version, total, total+1)
		}
		es, err := tx.AuditEvents(ctx, storage.AuditFilter{})
		if err != nil {
			return err
		}
		if len(es) != total {
			t.Fatalf("audit has %d events, want %d", len(es), total)
		}
		storagetest.CheckAuditChains(t, es)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestViewTakesNoWriteLock: a View opened while another Store's Update holds the
// write lock reads at once, and an Update of another Store commits while a View is
// open. If View began with BEGIN IMMEDIATE, either would wait the busy timeout.
func TestViewTakesNoWriteLock(t *testing.T) {
	path := tempPath(t)
	a, b := openStore(t, path), openStore(t, path)
	if err := a.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.InsertRun(ctx, &record.Run{ID: "run-1", Status: record.StatusRunning})
	}); err != nil {
		t.Fatal(err)
	}
	quick := func() (context.Context, context.CancelFunc) { return context.WithTimeout(t.Context(), 3*time.Second) }

	t.Run("view during update", func(t *testing.T) {
		for _, reader := range []*Store{a, b} {
			err := a.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				r, err := tx.Run(ctx, "run-1")
				if err != nil {
					return err
				}
				r.Step++
				if err := tx.UpdateRun(ctx, r); err != nil {
					return err
				}
				vctx, cancel := quick()
				defer cancel()
				began := time.Now()
				err = reader.View(vctx, func(ctx context.Context, tx storage.Tx) error {
					seen, err := tx.Run(ctx, "run-1")
					if err == nil && seen.Step == r.Step {
						t.Error("the view saw an uncommitted write")
					}
					return err
				})
				if err != nil {
					t.Errorf("view while the write lock is held: %v (after %v)", err, time.Since(began))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("update during view", func(t *testing.T) {
		err := a.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			if _, err := tx.Run(ctx, "run-1"); err != nil { // the snapshot starts here
				return err
			}
			uctx, cancel := quick()
			defer cancel()
			return b.Update(uctx, func(ctx context.Context, tx storage.Tx) error {
				r, err := tx.Run(ctx, "run-1")
				if err != nil {
					return err
				}
				r.Reason = "updated while a view was open"
				return tx.UpdateRun(ctx, r)
			})
		})
		if err != nil {
			t.Fatalf("update while a view is open: %v", err)
		}
	})
}

func TestForeignKeyIsNotFound(t *testing.T) {
	s := openStore(t, tempPath(t))
	err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: "no-such-run", Seq: 1, SchemaVersion: 1})
	})
	if !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), "no-such-run") {
		t.Errorf("checkpoint of a missing run: got %v, want ErrNotFound naming the run", err)
	}
}

func TestInterpretError(t *testing.T) {
	if err := interpretError(nil); err != nil {
		t.Errorf("interpretError(nil) = %v", err)
	}
	if err := interpretError(fmt.Errorf("scan: %w", sql.ErrNoRows)); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("ErrNoRows became %v", err)
	}
	other := errors.New("disk on fire")
	if err := interpretError(other); err != other {
		t.Errorf("an unknown error became %v", err)
	}
}

// TestEncoding pins the on-disk form documented in migrations/001_init.sql, which
// other tools (sqlite3, backups, a future migration) read.
func TestEncoding(t *testing.T) {
	path := tempPath(t)
	s := openStore(t, path)
	at := time.Date(2026, 11, 29, 9, 30, 0, 123_456_789, time.UTC)
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return errors.Join(
			tx.InsertRun(ctx, &record.Run{ID: "run-1", Status: record.StatusRunning, CreatedAt: at}),
			tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: "run-1", Seq: 1, State: nil}),
			tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: "run-1", Seq: 2, State: []byte{}}),
		)
	}); err != nil {
		t.Fatal(err)
	}
	db, err := OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var (
		created, deadline int64
		key               sql.NullString
	)
	if err := db.QueryRowContext(t.Context(), `SELECT created_at, deadline, idempotency_key FROM runs`).Scan(&created, &deadline, &key); err != nil {
		t.Fatal(err)
	}
	if created != at.UnixMilli() || deadline != 0 || key.Valid {
		t.Errorf("stored created_at %d deadline %d key %v; want %d, 0 and NULL", created, deadline, key, at.UnixMilli())
	}
	var types []string
	rows, err := db.QueryContext(t.Context(), `SELECT typeof(state) FROM checkpoints ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var ty string
		if err := rows.Scan(&ty); err != nil {
			t.Fatal(err)
		}
		types = append(types, ty)
	}
	if strings.Join(types, ",") != "null,blob" {
		t.Errorf("nil and empty state stored as %v, want null,blob", types)
	}
}

func TestOpenPathWithURICharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "odd ?name#with%25.db")
	s := openStore(t, path)
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.InsertRun(ctx, &record.Run{ID: "run-1", Status: record.StatusRunning})
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := filepath.Glob(filepath.Join(filepath.Dir(path), "*.db")); err != nil || len(got) != 1 || got[0] != path {
		t.Errorf("files %v (%v); want exactly %s", got, err, path)
	}
}

func TestOpenRefusesMemory(t *testing.T) {
	for _, p := range []string{"", ":memory:"} {
		if s, err := Open(t.Context(), p); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded; want an error", p)
		}
	}
}

// TestConcurrentFirstOpen: a CLI and a server started together on a new file both
// migrate it; one applies each migration and the other finds it applied.
func TestConcurrentFirstOpen(t *testing.T) {
	path := tempPath(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			s, err := Open(t.Context(), path)
			if err != nil {
				t.Errorf("open %d: %v", i, err)
				return
			}
			if err := s.Close(); err != nil {
				t.Errorf("close %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if got := len(schemaRows(t, path)); got != len(Migrations()) {
		t.Errorf("schema_migrations has %d rows, want %d", got, len(Migrations()))
	}
	var mode string
	db, err := OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q (%v), want wal", mode, err)
	}
}

func TestWithLoggerLogsMigrations(t *testing.T) {
	var buf bytes.Buffer
	s, err := Open(t.Context(), tempPath(t), WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, m := range Migrations() {
		want := fmt.Sprintf(`"msg":"applied schema migration","version":%d,"name":%q`, m.Version, m.Name)
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %q lacks %s", buf.String(), want)
		}
	}
}

func TestChangeFeed(t *testing.T) {
	storagetest.RunChangeFeed(t, func(t *testing.T) (storage.Store, storage.Store) {
		path := tempPath(t)
		return openStore(t, path), openStore(t, path)
	})
}

// TestChangeFeedReadOnly: a read-only store (what `signoff wait` opens)
// hears the commits of a writer on the same file.
func TestChangeFeedReadOnly(t *testing.T) {
	storagetest.RunChangeFeed(t, func(t *testing.T) (storage.Store, storage.Store) {
		path := tempPath(t)
		w := openStore(t, path)
		r, err := OpenReadOnly(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r, w
	})
}

// TestFeedSeesOnlyOtherConnectionsCommits: the number the feed reads moves
// for another store's commit and not for its own store's, whose waiters the
// engine wakes itself.
func TestFeedSeesOnlyOtherConnectionsCommits(t *testing.T) {
	path := tempPath(t)
	a, b := openStore(t, path), openStore(t, path)
	var fv feedVersion
	defer fv.close()
	read := func(what string, wantFresh bool) int64 {
		t.Helper()
		v, fresh, err := a.dataVersion(t.Context(), &fv)
		if err != nil || fresh != wantFresh {
			t.Fatalf("%s: data version %d, fresh %v, %v; want fresh %v", what, v, fresh, err, wantFresh)
		}
		return v
	}
	insert := func(s *Store, id string) {
		t.Helper()
		err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			return tx.InsertRun(ctx, &record.Run{ID: id, Workflow: "proposal", Status: record.StatusWaitingApproval})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	v0 := read("first read", true)
	insert(a, "own")
	if v := read("after its own store's commit", false); v != v0 {
		t.Errorf("its own store's commit moved the data version from %d to %d", v0, v)
	}
	insert(b, "other")
	if v := read("after another store's commit", false); v == v0 {
		t.Errorf("another store's commit left the data version at %d", v)
	}
}

// TestMigrationMovesMessageLocations: a store migrated before message
// locations were a record of their own keeps where its requests were
// posted, and its requests keep their seals, which never covered it.
func TestMigrationMovesMessageLocations(t *testing.T) {
	path := tempPath(t)
	db, err := OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations {
		if m.Version >= 9 {
			break
		}
		if err := applyMigration(t.Context(), db, m, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range storagetest.BeforeMessageLocations {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, path)
	storagetest.CheckMessageLocationsMoved(t, s)
}

// TestMigrationScopesKeysToRequesters: a store migrated while a key was
// unique across all runs keeps every run and what refers to it, and its keys
// become their requesters'.
func TestMigrationScopesKeysToRequesters(t *testing.T) {
	path := tempPath(t)
	db, err := OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations {
		if m.Version >= 10 {
			break
		}
		if err := applyMigration(t.Context(), db, m, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range storagetest.BeforeRequesterKeys {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, path)
	storagetest.CheckRequesterKeysMigrated(t, s)
}

// The write connection keeps its temporary data, the sub-journal of each
// Update's savepoint, in memory, also after migrating a new store, which
// keeps it in files as SQLite does by default; readers keep the default too.
func TestTheWriterKeepsTemporaryDataInMemory(t *testing.T) {
	path := tempPath(t)
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write, err := OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer write.Close()
	readOnly, err := OpenReadOnlyDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer readOnly.Close()
	for _, c := range []struct {
		name string
		db   *sql.DB
		want int
	}{
		{"the store's writer, after migrating", s.write, 2},
		{"a write connection", write, 2},
		{"the store's reader", s.read, 0},
		{"a read-only connection", readOnly, 0},
	} {
		var mode int
		if err := c.db.QueryRowContext(t.Context(), `PRAGMA temp_store`).Scan(&mode); err != nil || mode != c.want {
			t.Errorf("%s: temp_store = %d (%v), want %d", c.name, mode, err, c.want)
		}
	}
}

// What copies or sorts a whole table (migrations, VACUUM) runs with its
// temporary data in files, and the connection keeps it in memory again after.
func TestTempFilesWhileCopyingWholeTables(t *testing.T) {
	db, err := OpenDB(tempPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mode := func() int {
		var m int
		if err := db.QueryRowContext(t.Context(), `PRAGMA temp_store`).Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	var during int
	if err := tempFiles(t.Context(), db, func() error { during = mode(); return nil }); err != nil {
		t.Fatal(err)
	}
	if after := mode(); during != 1 || after != 2 {
		t.Errorf("temp_store = %d during and %d after, want 1 (FILE) and 2 (MEMORY)", during, after)
	}
}

// TestMigrationMovesAuditHeadsIntoRunRows: a store migrated while a run's
// audit head was a row of audit_heads keeps it, in the run's row, anchored
// as far as it was, and the run's next event follows it; the head of the
// events about no run stays in audit_heads.
func TestMigrationMovesAuditHeadsIntoRunRows(t *testing.T) {
	path := tempPath(t)
	db, err := OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations {
		if m.Version >= 14 {
			break
		}
		if err := applyMigration(t.Context(), db, m, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`INSERT INTO runs (id, status, version) VALUES ('run-a', 'done', 1)`,
		`INSERT INTO audit (seq, run_id, action, prev_hash, hash, format) VALUES (1, 'run-a', 'submitted', '', 'ha', 2)`,
		`INSERT INTO audit (seq, run_id, action, prev_hash, hash, format) VALUES (2, '', 'delegated', '', 'hz', 2)`,
		`INSERT INTO audit_heads (run_id, seq, hash, anchored, key_id, mac) VALUES ('run-a', 1, 'ha', 1, 'k1', 'ma')`,
		`INSERT INTO audit_heads (run_id, seq, hash, anchored, key_id, mac) VALUES ('', 2, 'hz', 0, 'k1', 'mz')`,
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, path)
	var heads []*record.AuditRunHead
	if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		var err error
		heads, err = tx.AuditRunHeads(ctx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := []*record.AuditRunHead{
		{RunID: "", Seq: 2, Hash: "hz", Seal: record.Seal{KeyID: "k1", MAC: "mz"}},
		{RunID: "run-a", Seq: 1, Hash: "ha", Seal: record.Seal{KeyID: "k1", MAC: "ma"}},
	}
	if len(heads) != len(want) || *heads[0] != *want[0] || *heads[1] != *want[1] {
		t.Fatalf("heads after the migration = %+v, want %+v", heads, want)
	}
	raw := func(q string) (n int64) {
		t.Helper()
		if err := s.read.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := raw(`SELECT count(*) FROM audit_heads WHERE run_id = 'run-a'`); n != 0 {
		t.Errorf("run-a's head is still a row of audit_heads")
	}
	if n := raw(`SELECT audit_anchored FROM runs WHERE id = 'run-a'`); n != 1 {
		t.Errorf("run-a's head is anchored to %d, want 1 as before", n)
	}
	e := &record.AuditEvent{RunID: "run-a", Action: "pruned", At: time.Now()}
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error { return tx.AppendAudit(ctx, e, nil) }); err != nil {
		t.Fatal(err)
	}
	if e.PrevHash != "ha" || e.Seq != 3 {
		t.Errorf("run-a's next event: seq %d, prev %q; want 3 after ha", e.Seq, e.PrevHash)
	}
	if n := raw(`SELECT audit_seq FROM runs WHERE id = 'run-a'`); n != 3 {
		t.Errorf("run-a's row holds head %d, want 3", n)
	}
}
