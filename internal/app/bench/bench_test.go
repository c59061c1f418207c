package bench

import "testing"

// TestLoopbackOnly: the benchmark runs against a PostgreSQL server on this
// machine only.
func TestLoopbackOnly(t *testing.T) {
	for dsn, ok := range map[string]bool{
		"postgres://u@127.0.0.1:5432/db": true, "postgresql://localhost/db": true, "postgres://[::1]/db": true,
		"postgres://db.example.com/db": false, "postgres://10.0.0.5/db": false,
	} {
		if err := loopbackOnly(dsn); (err == nil) != ok {
			t.Errorf("loopbackOnly(%s) = %v", dsn, err)
		}
	}
}
