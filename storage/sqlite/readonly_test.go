package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/signoff-dev/signoff/storage/sqlite"
)

func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "signoff.db")

	if _, err := sqlite.OpenReadOnly(ctx, path); !errors.Is(err, sqlite.ErrNoStore) {
		t.Fatalf("missing file: %v, want ErrNoStore", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a read-only open created the file: %v", err)
	}
	db, err := sqlite.OpenDB(path) // SQLite, but no store yet
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.OpenReadOnly(ctx, path); !errors.Is(err, sqlite.ErrNotMigrated) {
		t.Fatalf("unmigrated file: %v, want ErrNotMigrated", err)
	}

	rw, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	ro, err := sqlite.OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	err = ro.Update(ctx, func(context.Context, storage.Tx) error {
		t.Fatal("a read-only store ran an update")
		return nil
	})
	if !errors.Is(err, sqlite.ErrReadOnly) {
		t.Fatalf("update on a read-only store: %v, want ErrReadOnly", err)
	}
	// It reads what the writer commits, also while the writer holds the lock.
	run := &record.Run{ID: "run_1", Workflow: "proposal", Status: record.StatusRunning, RequesterID: "agent:a"}
	if err := rw.Update(ctx, func(ctx context.Context, tx storage.Tx) error { return tx.InsertRun(ctx, run) }); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	held := make(chan struct{})
	go func() {
		_ = rw.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
			close(held)
			<-release
			return errors.New("roll back")
		})
	}()
	<-held
	err = ro.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		_, err := tx.Run(ctx, "run_1")
		return err
	})
	close(release)
	if err != nil {
		t.Fatalf("read while a write transaction is open: %v", err)
	}
}
