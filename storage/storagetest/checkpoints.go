package storagetest

// The checkpoints: their round trip, whatever the state holds.

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// payloads are the byte slices every byte column must keep apart.
var payloads = []struct {
	name string
	b    []byte
}{
	{"nil bytes", nil},
	{"empty bytes", []byte{}},
	{"JSON", []byte(`{"b":[1,2.50,"x"],"a":"é\u0000"}`)},
}

func testCheckpointRoundTrip(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-1")
	for i, p := range payloads {
		t.Run(p.name, func(t *testing.T) {
			// Every checkpoint after the first names the one before as its base.
			in := &record.Checkpoint{RunID: "run-1", Seq: int64(i + 1), SchemaVersion: record.SchemaVersion,
				State: p.b, BaseSeq: int64(i), PrevHash: fmt.Sprintf("prev-%d", i), CreatedAt: odd.Add(time.Duration(i) * time.Minute)}
			in.Hash = record.CheckpointHash(in)
			update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.AppendCheckpoint(ctx, in) })
			cs := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.Checkpoint, error) {
				return tx.Checkpoints(ctx, "run-1")
			})
			if len(cs) != i+1 {
				t.Fatalf("Checkpoints: got %d, want %d", len(cs), i+1)
			}
			got := cs[i]
			checkSame(t, "Checkpoint", stored(in), got)
			if h := record.CheckpointHash(got); h != in.Hash {
				t.Errorf("hash of the loaded checkpoint = %s, want %s: the stored fields changed", h, in.Hash)
			}
		})
	}
}
