package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// pgx prepares each statement once per connection and caches it (its default
// query mode), so the store needs no statement cache of its own: a statement
// run again on a connection is not parsed or planned again.
func TestStatementsAreCached(t *testing.T) {
	s := openStore(t, migrated(t))
	if m := s.pool.Config().ConnConfig.DefaultQueryExecMode; m != pgx.QueryExecModeCacheStatement {
		t.Fatalf("query mode %v, want %v", m, pgx.QueryExecModeCacheStatement)
	}
	// One connection, so that the statements prepared are all on it.
	conn, err := s.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	count := func() int {
		var n int
		// Simple protocol: this query itself is not prepared.
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_prepared_statements`, pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	for range 3 {
		if _, err := conn.Exec(context.Background(), `SELECT id FROM runs WHERE id = $1`, "none"); err != nil {
			t.Fatal(err)
		}
	}
	if after := count(); after != before+1 {
		t.Fatalf("prepared statements %d, then %d after one statement run three times; want one more", before, after)
	}
}
