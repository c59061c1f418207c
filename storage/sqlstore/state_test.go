package sqlstore

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/signoff-dev/signoff/storage/storagetest"
)

// noise is n bytes no compressor makes smaller.
func noise(n int) []byte {
	var out []byte
	for h := sha256.Sum256(nil); len(out) < n; h = sha256.Sum256(h[:]) {
		out = append(out, h[:]...)
	}
	return out[:n]
}

func TestAStateIsStoredCompressedWhenThatIsSmaller(t *testing.T) {
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x05, 0x29, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'}
	tests := []struct {
		name       string
		state      []byte
		compressed bool
	}{
		{"nil (a pruned checkpoint)", nil, false},
		{"a small state", []byte(`{"schema_version":2,"status":"done"}`), false},
		{"three kilobytes of evidence", storagetest.BigJSON(3000), true},
		{"bytes that do not compress", noise(512), false},
		{"a zstd frame given as the state", frame, true},
		{"bytes that begin as a frame does", []byte{0x28, 0xb5, 0x2f, 0xfd, 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored := packState(tt.state)
			if got := bytes.HasPrefix(stored, zstdMagic); got != tt.compressed {
				t.Errorf("stored compressed: %v, want %v", got, tt.compressed)
			}
			if tt.compressed && !bytes.HasPrefix(tt.state, zstdMagic) && len(stored) >= len(tt.state)/2 {
				t.Errorf("stored in %d bytes, want less than half of %d", len(stored), len(tt.state))
			}
			if back := unpackState(stored); !bytes.Equal(back, tt.state) || (back == nil) != (tt.state == nil) {
				t.Errorf("read back as %q, want %q", back, tt.state)
			}
		})
	}
}

// A stored frame changed behind the store's back is read as the bytes it
// holds: the checkpoint's hash, which they do not match, reports it.
func TestAChangedFrameIsReadAsItIs(t *testing.T) {
	stored := packState(storagetest.BigJSON(3000))
	damaged := bytes.Clone(stored)
	damaged[len(damaged)/2] ^= 0xff
	damaged = damaged[:len(damaged)-3]
	if got := unpackState(damaged); !bytes.Equal(got, damaged) {
		t.Errorf("a frame that does not inflate was read as %d other bytes", len(got))
	}
}

// Whatever a state is, the store gives back what it was given.
func FuzzStoredState(f *testing.F) {
	f.Add([]byte(`{"schema_version":2}`))
	f.Add(storagetest.BigJSON(500))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x05, 0x29, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'})
	f.Fuzz(func(t *testing.T, state []byte) {
		if back := unpackState(packState(state)); !bytes.Equal(back, state) {
			t.Fatalf("%q came back as %q", state, back)
		}
		_ = unpackState(state) // never panics, whatever is stored
	})
}

// A state read again is the one remembered, handed so that a caller's
// append cannot change what the next caller reads.
func TestARememberedStateIsReadAsItWasStored(t *testing.T) {
	state := storagetest.BigJSON(3000)
	stored := packState(state)
	first := unpackState(stored)
	grown := append(first, `,"x":1}`...)
	again := unpackState(stored)
	if !bytes.Equal(first, state) || !bytes.Equal(again, state) || bytes.Equal(grown, state) {
		t.Fatalf("read back %d then %d bytes, want %d", len(first), len(again), len(state))
	}
	_ = append(again, 'x')
	if third := unpackState(stored); !bytes.Equal(third, state) {
		t.Fatal("an append to a remembered state changed it")
	}
}

// The memo forgets its oldest states when it holds more than its budget,
// and never remembers a state that would push out most of the others.
func TestTheMemoKeepsToItsBudget(t *testing.T) {
	m := &stateMemo{m: map[string][]byte{}, budget: 64 << 10}
	var keys [][]byte
	for i := range 100 {
		stored := fmt.Appendf(nil, "stored %04d %s", i, bytes.Repeat([]byte{'.'}, 200))
		m.put(stored, bytes.Repeat([]byte{byte(i)}, 600))
		keys = append(keys, stored)
		if m.size > m.budget {
			t.Fatalf("after %d states the memo holds %d bytes, over its budget of %d", i+1, m.size, m.budget)
		}
	}
	if _, ok := m.get(keys[0]); ok {
		t.Error("the oldest state is still remembered")
	}
	if got, ok := m.get(keys[99]); !ok || !bytes.Equal(got, bytes.Repeat([]byte{99}, 600)) {
		t.Errorf("the newest state is not remembered: %v", ok)
	}
	m.put([]byte("big"), make([]byte, m.budget/32))
	if _, ok := m.get([]byte("big")); ok {
		t.Error("a state of a 32nd of the budget was remembered")
	}
}

// BenchmarkStoredState is what storing a 3 KB state compressed costs:
// compressing it once, inflating it, and reading it again while it is
// remembered.
//
//	go test ./storage/sqlstore -run '^$' -bench StoredState
func BenchmarkStoredState(b *testing.B) {
	state := storagetest.BigJSON(3000)
	stored := packState(state)
	b.Run("pack", func(b *testing.B) {
		for b.Loop() {
			packState(state)
		}
		b.ReportMetric(float64(len(stored)), "stored-bytes")
	})
	b.Run("inflate", func(b *testing.B) {
		for b.Loop() {
			if _, err := stateDecoder.DecodeAll(stored, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remembered", func(b *testing.B) {
		unpackState(stored)
		for b.Loop() {
			unpackState(stored)
		}
	})
}

// A state larger than a frame may inflate to is stored as it is, so that
// it reads back.
func TestAStateTooLargeToInflateIsStoredAsItIs(t *testing.T) {
	huge := bytes.Repeat([]byte(`{"a":1},`), maxState/8+1)
	huge[0] = '['
	if stored := packState(huge); !bytes.Equal(stored, huge) {
		t.Fatalf("a state of %d bytes was stored in %d", len(huge), len(stored))
	}
}
