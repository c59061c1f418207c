package storagetest

// The operations: their round trip.

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func testOperationRoundTrip(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-1")
	for i, p := range payloads {
		t.Run(p.name, func(t *testing.T) {
			in := &record.Operation{Key: fmt.Sprintf("run-1/%d", i), RunID: "run-1", Index: i, Action: "request_refund",
				ArgsDigest: "sha256:abc", Status: record.OpCommitted, Attempts: 2, Receipt: p.b, Error: "timeout once",
				Version: 5, CreatedAt: odd, UpdatedAt: odd.Add(time.Minute)}
			update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertOperation(ctx, in) })
			if in.Version != 1 {
				t.Errorf("after InsertOperation Version = %d, want 1", in.Version)
			}
			got := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Operation, error) {
				return tx.Operation(ctx, in.Key)
			})
			checkSame(t, "Operation", stored(in), got)
		})
	}
	t.Run("zero times", func(t *testing.T) {
		in := &record.Operation{Key: "run-1/min", RunID: "run-1", Index: 9, Status: record.OpPending}
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertOperation(ctx, in) })
		got := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.Operation, error) {
			return tx.Operation(ctx, in.Key)
		})
		checkSame(t, "Operation", stored(in), got)
	})
}
