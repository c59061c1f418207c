package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/storage/sqlstore"
	"github.com/signoff-dev/signoff/storage/storagetest"
)

// migrated is a fresh schema with every migration applied.
func migrated(t *testing.T) string {
	t.Helper()
	dsn := pgtest.Schema(t)
	if _, err := Migrate(t.Context(), dsn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return dsn
}

func openStore(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn)
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

// execRaw runs one statement on dsn's database, behind the store's back.
func execRaw(t *testing.T, dsn, query string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func TestStore(t *testing.T) {
	t.Parallel()
	storagetest.Run(t, func(t *testing.T) storage.Store {
		s, err := Open(t.Context(), migrated(t))
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		return s // the suite closes it
	})
}

// TestMigrationsMatchSQLite: both drivers number their schema's history alike,
// so "version 3" means the same change whichever database holds it.
func TestMigrationsMatchSQLite(t *testing.T) {
	t.Parallel()
	if got, want := Migrations(), sqlite.Migrations(); len(got) != len(want) {
		t.Fatalf("postgres has %d migrations %v, sqlite %d %v", len(got), got, len(want), want)
	} else {
		for i := range want {
			if got[i].Version != want[i].Version || got[i].Name != want[i].Name {
				t.Errorf("migration %d: postgres %d_%s, sqlite %d_%s", i, got[i].Version, got[i].Name, want[i].Version, want[i].Name)
			}
		}
	}
}

func schemaRows(t *testing.T, dsn string) map[int]string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `SELECT version, checksum FROM schema_migrations`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	var (
		v   int
		sum string
	)
	if _, err := pgx.ForEachRow(rows, []any{&v, &sum}, func() error { out[v] = sum; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	applied, err := Migrate(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied, Migrations()) {
		t.Errorf("first Migrate applied %v, want %v", applied, Migrations())
	}
	s := openStore(t, dsn)
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.InsertRun(ctx, &record.Run{ID: "run-1", Status: record.StatusRunning})
	}); err != nil {
		t.Fatal(err)
	}
	first := schemaRows(t, dsn)
	for range 3 {
		applied, err := Migrate(t.Context(), dsn)
		if err != nil || len(applied) != 0 {
			t.Fatalf("Migrate again applied %v (%v); want nothing", applied, err)
		}
	}
	again := schemaRows(t, dsn)
	if len(again) != len(Migrations()) || len(again) != len(first) {
		t.Errorf("schema_migrations has %d rows after migrating again (%d before), want %d", len(again), len(first), len(Migrations()))
	}
	for v, sum := range first {
		if again[v] != sum {
			t.Errorf("version %d checksum changed: %s → %s", v, sum, again[v])
		}
	}
	if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		_, err := tx.Run(ctx, "run-1")
		return err
	}); err != nil {
		t.Errorf("the run written before migrating again: %v", err)
	}
}

// TestOpenDoesNotMigrate: Open on an empty schema refuses, names what is
// missing and how to fix it, and creates nothing.
func TestOpenDoesNotMigrate(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	s, err := Open(t.Context(), dsn)
	if err == nil {
		s.Close()
		t.Fatal("opened an unmigrated database")
	}
	if !errors.Is(err, ErrNotMigrated) {
		t.Errorf("error %v is not ErrNotMigrated", err)
	}
	for _, want := range []string{"1 (init)", "run `signoff migrate`"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var tables int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("Open created %d tables; it must change nothing", tables)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	future := len(Migrations()) + 7
	execRaw(t, dsn, `INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, 'from_the_future', 'x', 0)`, future)

	s, err := Open(t.Context(), dsn)
	if err == nil {
		s.Close()
		t.Fatal("opened a database migrated by a newer build")
	}
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), fmt.Sprint(future)) {
		t.Errorf("Open: got %v; want ErrSchemaTooNew naming version %d", err, future)
	}
	if _, err := Migrate(t.Context(), dsn); !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("Migrate: got %v; want ErrSchemaTooNew", err)
	}
}

func TestRefusesChangedMigration(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	execRaw(t, dsn, `UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1`)
	for name, open := range map[string]func() error{
		"Open":    func() error { s, err := Open(t.Context(), dsn); closeIf(s); return err },
		"Migrate": func() error { _, err := Migrate(t.Context(), dsn); return err },
	} {
		if err := open(); !errors.Is(err, ErrMigrationChanged) || !strings.Contains(err.Error(), "version 1") {
			t.Errorf("%s: got %v; want ErrMigrationChanged naming version 1", name, err)
		}
	}
}

func closeIf(s *Store) {
	if s != nil {
		s.Close()
	}
}

// TestConcurrentMigrate: replicas started together all run Migrate; every one
// succeeds, and each migration is applied exactly once.
func TestConcurrentMigrate(t *testing.T) {
	t.Parallel()
	const replicas = 6
	dsn := pgtest.Schema(t)
	applied := make([][]Migration, replicas)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			<-start
			var err error
			if applied[i], err = Migrate(t.Context(), dsn); err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	var all []Migration
	for _, a := range applied {
		all = append(all, a...)
	}
	slices.SortFunc(all, func(a, b Migration) int { return a.Version - b.Version })
	if !slices.Equal(all, Migrations()) {
		t.Errorf("replicas applied %v between them, want each of %v once", all, Migrations())
	}
	if got := len(schemaRows(t, dsn)); got != len(Migrations()) {
		t.Errorf("schema_migrations has %d rows, want %d", got, len(Migrations()))
	}
	openStore(t, dsn)
}

func TestWithLoggerLogsMigrations(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if _, err := Migrate(t.Context(), pgtest.Schema(t), WithLogger(slog.New(slog.NewJSONHandler(&buf, nil)))); err != nil {
		t.Fatal(err)
	}
	for _, m := range Migrations() {
		want := fmt.Sprintf(`"msg":"applied schema migration","version":%d,"name":%q`, m.Version, m.Name)
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %q lacks %s", buf.String(), want)
		}
	}
}

// TestConcurrentClaimsFromTwoPools is two replicas: two Stores, each with its own
// connections, claiming from one set of runs. SKIP LOCKED and the lease keep
// every run with one owner.
func TestConcurrentClaimsFromTwoPools(t *testing.T) {
	t.Parallel()
	const runs, perStore = 60, 3
	dsn := migrated(t)
	stores := []*Store{openStore(t, dsn), openStore(t, dsn)}
	base := time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC)
	if err := stores[0].Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		for i := range runs {
			r := &record.Run{ID: fmt.Sprintf("run-%02d", i), Status: record.StatusExecuting, CreatedAt: base, UpdatedAt: base.Add(time.Duration(i%7) * time.Second)}
			if err := tx.InsertRun(ctx, r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	owner := map[string]string{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for si, s := range stores {
		for c := range perStore {
			name := fmt.Sprintf("replica-%d/worker-%d", si, c)
			wg.Go(func() {
				<-start
				for {
					var got []*record.Run
					err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
						var err error
						got, err = tx.ClaimRuns(ctx, name, []record.Status{record.StatusExecuting}, base, base.Add(time.Hour), 2)
						return err
					})
					if err != nil {
						t.Errorf("%s: %v", name, err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, r := range got {
						if prev, dup := owner[r.ID]; dup {
							t.Errorf("%s claimed by %s and %s", r.ID, prev, name)
						}
						owner[r.ID] = name
						if r.LeaseOwner != name || r.Fence != 1 || r.Version != 2 {
							t.Errorf("%s as claimed by %s: owner %q fence %d version %d", r.ID, name, r.LeaseOwner, r.Fence, r.Version)
						}
					}
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if len(owner) != runs {
		t.Errorf("%d of %d runs claimed", len(owner), runs)
	}
	replicas := map[string]bool{}
	for _, o := range owner {
		replicas[o[:len("replica-0")]] = true
	}
	t.Logf("claims spread over %d replicas", len(replicas))
}

// TestAuditChainAcrossStores: two replicas append to the one audit chain at
// once, each in transactions that also write runs; the chain stays linear, with
// no seq or previous hash taken twice.
func TestAuditChainAcrossStores(t *testing.T) {
	t.Parallel()
	const writers, appends = 4, 25
	dsn := migrated(t)
	stores := []*Store{openStore(t, dsn), openStore(t, dsn)}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for si, s := range stores {
		for w := range writers {
			wg.Go(func() {
				<-start
				for i := range appends {
					id := fmt.Sprintf("run-%d-%d-%d", si, w, i)
					err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
						if err := tx.InsertRun(ctx, &record.Run{ID: id, Status: record.StatusRunning}); err != nil {
							return err
						}
						return tx.AppendAudit(ctx, &record.AuditEvent{RunID: id, Action: "start"}, nil)
					})
					if err != nil {
						t.Errorf("store %d writer %d: %v", si, w, err)
						return
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	err := stores[1].View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		es, err := tx.AuditEvents(ctx, storage.AuditFilter{})
		if err != nil {
			return err
		}
		if want := len(stores) * writers * appends; len(es) != want {
			t.Fatalf("audit has %d events, want %d", len(es), want)
		}
		storagetest.CheckAuditChains(t, es)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSavedRunAuditRacesPlainAppends: one store writes transitions of a run
// (SaveRun reads the run's audit head ahead, in its pipeline) while another
// appends events to the same run on their own (refusals do): the run's chain
// stays one line, with every event in it.
func TestSavedRunAuditRacesPlainAppends(t *testing.T) {
	t.Parallel()
	const each = 30
	dsn := migrated(t)
	saver, appender := openStore(t, dsn), openStore(t, dsn)
	run := &record.Run{ID: "run-raced", Status: record.StatusExecuting}
	if err := saver.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, run) }); err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		<-start
		for i := range each {
			err := saver.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				r, err := tx.Run(ctx, run.ID)
				if err != nil {
					return err
				}
				r.Seq++
				cp := &record.Checkpoint{RunID: r.ID, Seq: r.Seq, SchemaVersion: 2, Hash: fmt.Sprintf("h%d", r.Seq)}
				if err := tx.SaveRun(ctx, &storage.RunWrite{Run: r, Checkpoint: cp}); err != nil {
					return err
				}
				if err := tx.AppendAudit(ctx, &record.AuditEvent{RunID: r.ID, Action: record.Event(fmt.Sprintf("step-%d", i))}, nil); err != nil {
					return err
				}
				// A second event in the same transaction takes the spare seq.
				return tx.AppendAudit(ctx, &record.AuditEvent{RunID: r.ID, Action: record.Event(fmt.Sprintf("after-step-%d", i))}, nil)
			})
			if err != nil {
				t.Errorf("transition %d: %v", i, err)
				return
			}
		}
	})
	wg.Go(func() {
		<-start
		for i := range each {
			err := appender.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				return tx.AppendAudit(ctx, &record.AuditEvent{RunID: run.ID, Action: record.Event(fmt.Sprintf("refused-%d", i))}, nil)
			})
			if err != nil {
				t.Errorf("append %d: %v", i, err)
				return
			}
		}
	})
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	err := appender.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		es, err := tx.AuditEvents(ctx, storage.AuditFilter{RunID: run.ID})
		if err != nil {
			return err
		}
		if len(es) != 3*each {
			t.Fatalf("the run has %d events, want %d", len(es), 3*each)
		}
		storagetest.CheckAuditChains(t, es)
		head, err := tx.AuditRunHead(ctx, run.ID)
		if err != nil {
			return err
		}
		if last := es[len(es)-1]; head.Seq != last.Seq || head.Hash != last.Hash {
			t.Errorf("head %d/%s, want the last event %d/%s", head.Seq, head.Hash, last.Seq, last.Hash)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTxUsableAfterEveryRefusal: after each statement that can fail on a
// constraint fails, the same transaction goes on writing and commits it all.
func TestTxUsableAfterEveryRefusal(t *testing.T) {
	t.Parallel()
	s := openStore(t, migrated(t))
	run := &record.Run{ID: "run-1", Status: record.StatusRunning, IdempotencyKey: "key-1"}
	other := &record.Run{ID: "run-2", Status: record.StatusRunning, IdempotencyKey: "key-2"}
	req := &record.ApprovalRequest{ID: "req-1", RunID: "run-1", Status: record.RequestPending}
	op := &record.Operation{Key: "run-1/0", RunID: "run-1", Status: record.OpPending}
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return errors.Join(tx.InsertRun(ctx, run), tx.InsertRun(ctx, other), tx.InsertRequest(ctx, req),
			tx.InsertOperation(ctx, op),
			tx.InsertDecision(ctx, &record.Decision{RequestID: "req-1", RunID: "run-1", ApproverID: "U1", Verdict: record.VerdictApprove}))
	}); err != nil {
		t.Fatal(err)
	}
	refusals := []struct {
		name string
		want error
		fn   func(ctx context.Context, tx storage.Tx) error
	}{
		{"run id", storage.ErrDuplicate, func(ctx context.Context, tx storage.Tx) error {
			return tx.InsertRun(ctx, &record.Run{ID: "run-1", Status: record.StatusRunning})
		}},
		{"idempotency key of another run", storage.ErrDuplicate, func(ctx context.Context, tx storage.Tx) error {
			return tx.InsertRun(ctx, &record.Run{ID: "run-3", Status: record.StatusRunning, IdempotencyKey: "key-1"})
		}},
		{"stale run", storage.ErrConflict, func(ctx context.Context, tx storage.Tx) error {
			r := *other
			r.Version = 7
			return tx.UpdateRun(ctx, &r)
		}},
		{"checkpoint of a missing run", storage.ErrNotFound, func(ctx context.Context, tx storage.Tx) error {
			return tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: "no-such-run", Seq: 1})
		}},
		{"request of a missing run", storage.ErrNotFound, func(ctx context.Context, tx storage.Tx) error {
			return tx.InsertRequest(ctx, &record.ApprovalRequest{ID: "req-x", RunID: "no-such-run", Status: record.RequestPending})
		}},
		{"request moved to a missing run", storage.ErrNotFound, func(ctx context.Context, tx storage.Tx) error {
			r := *req
			r.RunID = "no-such-run"
			return tx.UpdateRequest(ctx, &r)
		}},
		{"decision twice", storage.ErrDuplicate, func(ctx context.Context, tx storage.Tx) error {
			return tx.InsertDecision(ctx, &record.Decision{RequestID: "req-1", RunID: "run-1", ApproverID: "U1", Verdict: record.VerdictReject})
		}},
		{"decision on a missing request", storage.ErrNotFound, func(ctx context.Context, tx storage.Tx) error {
			return tx.InsertDecision(ctx, &record.Decision{RequestID: "req-x", RunID: "run-1", ApproverID: "U2", Verdict: record.VerdictReject})
		}},
		{"operation key", storage.ErrDuplicate, func(ctx context.Context, tx storage.Tx) error {
			return tx.InsertOperation(ctx, &record.Operation{Key: "run-1/0", RunID: "run-1", Status: record.OpPending})
		}},
		{"stale operation", storage.ErrConflict, func(ctx context.Context, tx storage.Tx) error {
			o := *op
			o.Version = 7
			return tx.UpdateOperation(ctx, &o)
		}},
		{"missing operation", storage.ErrNotFound, func(ctx context.Context, tx storage.Tx) error {
			return tx.UpdateOperation(ctx, &record.Operation{Key: "nope", Version: 1, Status: record.OpPending})
		}},
	}
	err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		for i, r := range refusals {
			if err := r.fn(ctx, tx); !errors.Is(err, r.want) {
				t.Errorf("%s: got %v, want %v", r.name, err, r.want)
			}
			// The transaction still writes after each refusal.
			if err := tx.AppendAudit(ctx, &record.AuditEvent{RunID: "run-1", Action: record.Event(r.name)}, nil); err != nil {
				return fmt.Errorf("audit after refusal %d (%s): %w", i, r.name, err)
			}
		}
		return tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: "run-1", Seq: 1, SchemaVersion: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		es, err := tx.AuditEvents(ctx, storage.AuditFilter{RunID: "run-1"})
		if err != nil {
			return err
		}
		if len(es) != len(refusals) {
			t.Errorf("%d audit events committed, want %d", len(es), len(refusals))
		}
		cs, err := tx.Checkpoints(ctx, "run-1")
		if err != nil {
			return err
		}
		if len(cs) != 1 {
			t.Errorf("%d checkpoints committed, want 1", len(cs))
		}
		r, err := tx.RunByIdempotencyKey(ctx, "", "key-2")
		if err != nil || r.ID != "run-2" || r.Version != 1 {
			t.Errorf("key-2 names %+v (%v), want run-2 untouched", r, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestForeignKeyIsNotFound(t *testing.T) {
	t.Parallel()
	s := openStore(t, migrated(t))
	err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: "no-such-run", Seq: 1, SchemaVersion: 1})
	})
	if !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), "no-such-run") {
		t.Errorf("checkpoint of a missing run: got %v, want ErrNotFound naming the run", err)
	}
}

// TestBind: the core's ? placeholders become $1, $2, … in order.
func TestBind(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT 1":                            "SELECT 1",
		"a = ?":                               "a = $1",
		"(?, ?) > (?, ?) LIMIT ?":             "($1, $2) > ($3, $4) LIMIT $5",
		"x IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)": "x IN ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
	} {
		if got := (dialect{}).Bind(in); got != want {
			t.Errorf("Bind(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestInterpretError(t *testing.T) {
	t.Parallel()
	if err := interpretError(nil); err != nil {
		t.Errorf("interpretError(nil) = %v", err)
	}
	if err := interpretError(fmt.Errorf("scan: %w", pgx.ErrNoRows)); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("ErrNoRows became %v", err)
	}
	for code, want := range map[string]error{"23505": storage.ErrDuplicate, "23503": storage.ErrNotFound} {
		native := &pgconn.PgError{Code: code, Message: "constraint"}
		err := interpretError(native)
		if !errors.Is(err, want) {
			t.Errorf("SQLSTATE %s became %v, want %v", code, err, want)
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			t.Errorf("SQLSTATE %s: the native error left the chain: %v", code, err)
		}
	}
	other := &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}
	if err := interpretError(other); err != other {
		t.Errorf("an unknown error became %v", err)
	}
}

// TestEncoding pins the stored form documented in migrations/001_init.sql, which
// other tools (psql, backups, a future migration) read.
func TestEncoding(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	s := openStore(t, dsn)
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
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var (
		created, deadline int64
		key               *string
	)
	if err := conn.QueryRow(t.Context(), `SELECT created_at, deadline, idempotency_key FROM runs`).Scan(&created, &deadline, &key); err != nil {
		t.Fatal(err)
	}
	if created != at.UnixMilli() || deadline != 0 || key != nil {
		t.Errorf("stored created_at %d deadline %d key %v; want %d, 0 and NULL", created, deadline, key, at.UnixMilli())
	}
	var forms []string
	rows, err := conn.Query(t.Context(), `SELECT coalesce(octet_length(state)::text, 'null') FROM checkpoints ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	var f string
	if _, err := pgx.ForEachRow(rows, []any{&f}, func() error { forms = append(forms, f); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(forms, ",") != "null,0" {
		t.Errorf("nil and empty state stored as %v, want null,0 (NULL and an empty BYTEA)", forms)
	}
}

// TestUpdateIsReadCommitted pins the isolation levels that the reasoning in
// Update's and View's comments rests on: they are asked for, not inherited from
// the server's default.
func TestUpdateIsReadCommitted(t *testing.T) {
	t.Parallel()
	s := openStore(t, migrated(t))
	var update, view string
	if err := s.Update(t.Context(), func(ctx context.Context, wtx storage.Tx) error {
		return wtx.(*sqlstore.Tx).Conn().QueryRow(ctx, `SHOW transaction_isolation`).Scan(&update)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.View(t.Context(), func(ctx context.Context, wtx storage.Tx) error {
		return wtx.(*sqlstore.Tx).Conn().QueryRow(ctx, `SHOW transaction_isolation`).Scan(&view)
	}); err != nil {
		t.Fatal(err)
	}
	if update != "read committed" || view != "repeatable read" {
		t.Errorf("Update runs at %q and View at %q; want read committed and repeatable read", update, view)
	}
}

func TestChangeFeed(t *testing.T) {
	t.Parallel()
	storagetest.RunChangeFeed(t, func(t *testing.T) (storage.Store, storage.Store) {
		dsn := migrated(t)
		return openStore(t, dsn), openStore(t, dsn)
	})
}

// startFeed runs s's feed into a new Changes until t ends, and returns once
// it listens.
func startFeed(t *testing.T, s *Store) *storage.Changes {
	t.Helper()
	c := storage.NewChanges()
	ctx, cancel := context.WithCancel(t.Context())
	fed := make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		if err := <-fed; err != nil {
			t.Errorf("FeedChanges = %v", err)
		}
	})
	ready, stop := c.Watch("probe")
	defer stop()
	go func() { fed <- s.FeedChanges(ctx, c) }()
	mustWake(t, ready, "the feed's first wake")
	return c
}

func mustWake(t *testing.T, woken <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatalf("no wake: %s", what)
	}
}

func feedRun(id string) *record.Run {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return &record.Run{ID: id, Workflow: "proposal", Status: record.StatusWaitingApproval, CreatedAt: now, UpdatedAt: now}
}

// TestChangeFeedNotOnRollback: the notification is sent inside the
// transaction, so a transaction that rolls back wakes no one. The
// notifications of one connection arrive in commit order: once a later
// commit's wake came, an earlier one would have come first.
func TestChangeFeedNotOnRollback(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	a, b := openStore(t, dsn), openStore(t, dsn)
	c := startFeed(t, a)
	suffix := fmt.Sprint(time.Now().UnixNano())
	lost, committed := "rolled-back-"+suffix, "committed-"+suffix
	lostWoken, stopLost := c.Watch(lost)
	defer stopLost()
	woken, stop := c.Watch(committed)
	defer stop()
	errBoom := errors.New("boom")
	err := b.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		if err := tx.InsertRun(ctx, feedRun(lost)); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("update = %v", err)
	}
	if err := b.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, feedRun(committed)) }); err != nil {
		t.Fatal(err)
	}
	mustWake(t, woken, "a committed insert")
	select {
	case <-lostWoken:
		t.Fatal("a rolled back insert woke its waiter")
	default:
	}
}

// TestChangeFeedListensAgain: when the listening connection is lost (here
// its backend is terminated), the feed connects again, wakes every waiter
// (a notification sent meanwhile is lost) and hears commits again.
func TestChangeFeedListensAgain(t *testing.T) {
	t.Parallel()
	app := fmt.Sprintf("signoff_feed_test_%d", time.Now().UnixNano())
	dsn := migrated(t) + "&application_name=" + app
	a, b := openStore(t, dsn), openStore(t, dsn)
	c := startFeed(t, a)
	id := "listens-again-" + app
	woken, stop := c.Watch(id)
	defer stop()
	execRaw(t, dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND query = 'LISTEN `+channel+`'`, app)
	mustWake(t, woken, "the wake after listening again")
	woken, stop2 := c.Watch(id)
	defer stop2()
	if err := b.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, feedRun(id)) }); err != nil {
		t.Fatal(err)
	}
	mustWake(t, woken, "a commit after listening again")
}

// TestAFrozenTransactionDoesNotHoldItsLocks: a transaction whose client stops
// (a replica frozen mid-transaction) is ended by the server after
// IdleInTransactionTimeout, so the row it locked is free for the others, and
// the frozen one's writes never commit. The DSN may set another timeout.
func TestAFrozenTransactionDoesNotHoldItsLocks(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	def := openStore(t, dsn)
	var got string
	if err := def.pool.QueryRow(t.Context(), `SHOW idle_in_transaction_session_timeout`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != IdleInTransactionTimeout {
		t.Errorf("idle_in_transaction_session_timeout = %s, want %s", got, IdleInTransactionTimeout)
	}

	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(idleInTxParam, "200ms")
	u.RawQuery = q.Encode()
	s := openStore(t, u.String())
	base := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.InsertRun(ctx, &record.Run{ID: "run-1", Status: record.StatusExecuting, CreatedAt: base, UpdatedAt: base})
	}); err != nil {
		t.Fatal(err)
	}
	locked, release := make(chan struct{}), make(chan struct{})
	frozen := make(chan error, 1)
	go func() {
		frozen <- s.Update(context.Background(), func(ctx context.Context, tx storage.Tx) error {
			r, err := tx.Run(ctx, "run-1")
			if err != nil {
				return err
			}
			r.Reason = "frozen"
			if err := tx.UpdateRun(ctx, r); err != nil {
				return err
			}
			close(locked)
			<-release // the client stops here, holding the row
			return nil
		})
	}()
	<-locked
	other := make(chan error, 1)
	go func() {
		other <- s.Update(context.Background(), func(ctx context.Context, tx storage.Tx) error {
			r, err := tx.Run(ctx, "run-1")
			if err != nil {
				return err
			}
			r.Reason = "moved on"
			return tx.UpdateRun(ctx, r)
		})
	}()
	select {
	case err := <-other:
		if err != nil {
			t.Fatalf("the other transaction: %v", err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("the other transaction still waits on the frozen one's lock")
	}
	close(release)
	if err := <-frozen; err == nil {
		t.Fatal("the frozen transaction committed after the server ended it")
	}
	if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		r, err := tx.Run(ctx, "run-1")
		if err == nil && r.Reason != "moved on" {
			err = fmt.Errorf("reason %q, want the other transaction's", r.Reason)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationMovesMessageLocations: a store migrated before message
// locations were a record of their own keeps where its requests were
// posted, and its requests keep their seals, which never covered it.
func TestMigrationMovesMessageLocations(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, m := range migrations {
		if m.Version >= 9 {
			break
		}
		if _, err := applyMigration(t.Context(), conn, m, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range storagetest.BeforeMessageLocations {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Migrate(t.Context(), dsn); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, dsn)
	storagetest.CheckMessageLocationsMoved(t, s)
}

// TestMigrationScopesKeysToRequesters: a store migrated while a key was
// unique across all runs keeps every run and what refers to it, and its keys
// become their requesters'.
func TestMigrationScopesKeysToRequesters(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, m := range migrations {
		if m.Version >= 10 {
			break
		}
		if _, err := applyMigration(t.Context(), conn, m, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range storagetest.BeforeRequesterKeys {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Migrate(t.Context(), dsn); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, dsn)
	storagetest.CheckRequesterKeysMigrated(t, s)
}

// An audit event travels with the transaction's next statement (or its
// COMMIT), not in a round trip of its own. When the server refuses it, the
// transaction is lost: the statement it travelled with fails with the
// append's error, never with a duplicate key of its own, COMMIT fails even if
// fn goes on, nothing of the transaction is kept, and the connection goes
// back to the pool rolled back, not closed.
func TestARefusedAuditAppendLosesItsTransaction(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	s := openStore(t, dsn)
	first := &record.AuditEvent{RunID: "run-a", Action: "first"}
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error { return tx.AppendAudit(ctx, first, nil) }); err != nil {
		t.Fatal(err)
	}
	conns := s.pool.Stat().NewConnsCount()
	for _, goOn := range []bool{false, true} {
		// The next append takes the first event's seq again: the server
		// refuses it on the primary key.
		execRaw(t, dsn, `SELECT setval('audit_seq', $1, false)`, first.Seq)
		err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			if err := tx.AppendAudit(ctx, &record.AuditEvent{RunID: "run-b", Action: "second"}, nil); err != nil {
				return err
			}
			err := tx.InsertRun(ctx, &record.Run{ID: "run-b", Status: record.StatusRunning})
			if err == nil || errors.Is(err, storage.ErrDuplicate) {
				t.Errorf("go on %v: the insert that carried the refused append: %v, want the append's failure", goOn, err)
			}
			if goOn {
				return nil
			}
			return err
		})
		if err == nil || errors.Is(err, storage.ErrDuplicate) || !strings.Contains(err.Error(), "append audit second of run run-b") {
			t.Errorf("go on %v: Update = %v, want the append's failure", goOn, err)
		}
	}
	err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		if _, err := tx.Run(ctx, "run-b"); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("run-b after the lost transactions: %v, want ErrNotFound", err)
		}
		evs, err := tx.AuditEvents(ctx, storage.AuditFilter{})
		if err != nil {
			return err
		}
		if len(evs) != 1 || evs[0].Action != "first" {
			t.Errorf("audit log = %+v, want the first event alone", evs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The View took the connection the lost transactions gave back.
	if n := s.pool.Stat().NewConnsCount(); n != conns {
		t.Errorf("the pool opened %d more connections: a lost transaction's was closed, not rolled back", n-conns)
	}
}

// A deferred audit event that never reached the server because the caller
// gave up is the caller's context error, not a refused write.
func TestADeferredAuditAppendCutShortIsTheContextsError(t *testing.T) {
	t.Parallel()
	s := openStore(t, migrated(t))
	ctx, cancel := context.WithCancel(t.Context())
	err := s.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		if err := tx.AppendAudit(ctx, &record.AuditEvent{RunID: "run-a", Action: "first"}, nil); err != nil {
			return err
		}
		cancel()
		_, err := tx.AuditEvents(ctx, storage.AuditFilter{RunID: "run-a"})
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Update = %v, want context.Canceled", err)
	}
}

// TestALastReadEndsTheViewInItsRoundTrip: a View told that its next read is
// its last (storage.LastRead) costs that one round trip, BEGIN and ROLLBACK
// included, gives what it read, refuses a read after it, and leaves its
// connection fit for the pool; an Update ignores the hint.
func TestALastReadEndsTheViewInItsRoundTrip(t *testing.T) {
	t.Parallel()
	s := openStore(t, migrated(t))
	run := &record.Run{ID: "run-once", Status: record.StatusWaitingApproval, Seq: 1}
	err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		if err := tx.InsertRun(ctx, run); err != nil {
			return err
		}
		return tx.AppendCheckpoint(ctx, &record.Checkpoint{RunID: run.ID, Seq: 1, SchemaVersion: 2, Hash: "h1"})
	})
	if err != nil {
		t.Fatal(err)
	}
	parts := storage.RunParts{Checkpoints: true, Requests: true}
	for _, c := range []struct {
		name, id  string
		update    bool
		wantErr   error
		readAfter error // the error of a second read (nil: it works)
		trips     int64 // at most, for a view's one read and its end (0: not counted)
	}{
		{name: "view", id: run.ID, readAfter: errEnded, trips: 1},
		{name: "view of a missing run", id: "nope", wantErr: storage.ErrNotFound, readAfter: errEnded, trips: 1},
		{name: "update ignores it", id: run.ID, update: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			newConns := s.pool.Stat().NewConnsCount()
			before := s.RoundTrips()
			var b *storage.RunBundle
			var loadErr, afterErr error
			fn := func(ctx context.Context, tx storage.Tx) error {
				storage.LastRead(tx)
				b, loadErr = tx.LoadRun(ctx, c.id, parts)
				_, afterErr = tx.Run(ctx, run.ID)
				return nil
			}
			if c.update {
				err = s.Update(t.Context(), fn)
			} else {
				err = s.View(t.Context(), fn)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(loadErr, c.wantErr) {
				t.Fatalf("LoadRun: %v, want %v", loadErr, c.wantErr)
			}
			if c.wantErr == nil && (b.Run.ID != run.ID || len(b.Checkpoints) != 1 || b.Checkpoints[0].Hash != "h1") {
				t.Errorf("LoadRun read %+v, want the run and its checkpoint", b)
			}
			if !errors.Is(afterErr, c.readAfter) {
				t.Errorf("read after the last: %v, want %v", afterErr, c.readAfter)
			}
			if trips := s.RoundTrips() - before; c.trips > 0 && trips > c.trips {
				t.Errorf("%d round trips, want at most %d", trips, c.trips)
			}
			// The connection went back to the pool, out of any transaction:
			// the next View takes it instead of a new one.
			if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
				_, err := tx.Run(ctx, run.ID)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if n := s.pool.Stat().NewConnsCount() - newConns; n != 0 {
				t.Errorf("%d new connections, want the pool's own", n)
			}
		})
	}
}
