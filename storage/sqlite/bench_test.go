package sqlite

import (
	"crypto/rand"
	"path/filepath"
	"testing"
)

// BenchmarkRawCommit is the floor under every store operation: one durable
// single-row commit (a ~2 KB row, as a checkpoint is) on a file opened with the
// store's pragmas. Store throughput figures are read against it.
func BenchmarkRawCommit(b *testing.B) {
	db, err := OpenDB(filepath.Join(b.TempDir(), "raw.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := b.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE raw (id INTEGER PRIMARY KEY, body BLOB NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 2048)
	rand.Read(body)
	for b.Loop() {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO raw (body) VALUES (?)`, body); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}
