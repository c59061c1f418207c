package postgres

import (
	"crypto/rand"
	"testing"

	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
)

// BenchmarkRawCommit is the floor under every store operation: one durable
// single-row commit (a ~2 KB row, as a checkpoint is) through pgx on one
// connection: BEGIN, INSERT, COMMIT, three round trips and a WAL flush, as the
// store's transactions pay them. Store throughput figures are read against it.
func BenchmarkRawCommit(b *testing.B) {
	conn := pgtest.Conn(b, pgtest.Schema(b))
	ctx := b.Context()
	if _, err := conn.Exec(ctx, `CREATE TABLE raw (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body BYTEA NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 2048)
	rand.Read(body)
	for b.Loop() {
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO raw (body) VALUES ($1)`, body); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}
