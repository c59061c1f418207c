package storagetest

// The checkpoints: their round trip, whatever the state holds.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
)

// payloads are the byte slices every byte column must keep apart.
var payloads = []struct {
	name string
	b    []byte
}{
	{"nil bytes", nil},
	{"empty bytes", []byte{}},
	{"JSON", []byte(`{"b":[1,2.50,"x"],"a":"é\u0000"}`)},
	// A state of some kilobytes, which a store may keep compressed, and
	// bytes that begin as a zstd frame does, or are one: whatever a store
	// does with a state, it gives back what it was given.
	{"kilobytes of JSON", BigJSON(3000)},
	{"zstd's magic number", []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 1, 2}},
	{"a zstd frame", []byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x05, 0x29, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'}},
}

// BigJSON is a JSON object of about n bytes, as varied as a payment
// lookup's answer: what a store that compresses states is measured with.
func BigJSON(n int) []byte {
	b := []byte(`{"payments":[`)
	for i := 0; len(b) < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"id":"PAY-%d","amount":%d,"currency":"EUR","status":%q}`, 7919*i%100000, 31*i*i%9973, []string{"captured", "refunded", "disputed"}[i%3])
	}
	return append(b, "]}"...)
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
