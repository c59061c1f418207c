package sqlstore

import (
	"bytes"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// A checkpoint's state is stored compressed (a zstd frame) when that makes
// it smaller, and read back as it was given: what the engine hashes, seals
// and decodes never changes. A state's evidence and proposal, most of a run's
// bytes, are JSON that compresses two- to threefold, and a whole state of 3
// KB left the pages of a 4 KB page store a third empty; compressed, a run's
// checkpoints fill them. A stored state that begins with zstd's magic number
// is compressed: a state is a JSON object, and any other that begins so is
// compressed whatever its size (up to maxState), so the rule holds for every
// state the engine can write.
var (
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

	// One encoder per CPU (the default), so that no writer waits for another.
	stateEncoder = must(zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false), // the checkpoint's hash covers the state
		zstd.WithLowerEncoderMem(true)))

	stateDecoder = must(zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(maxState)))
)

// minPacked is the smallest state worth compressing: below it a frame's
// header and tables eat what compression saves (a decision's 200-byte
// change came out larger), and trying costs some microseconds.
const minPacked = 256

// maxState bounds what a stored frame may inflate to, so that a forged row
// cannot make a reader allocate without limit. A larger state (the engine
// makes none: a proposal is at most 1 MiB) is stored as it is.
const maxState = 64 << 20

func must[T any](v T, err error) T {
	if err != nil {
		panic(err) // only for options that are constant
	}
	return v
}

// StateOf is a state as the store reads it from stored, for tools that
// read a store's rows themselves.
func StateOf(stored []byte) []byte { return unpackState(stored) }

// packState is state as stored.
func packState(state []byte) []byte {
	magic := bytes.HasPrefix(state, zstdMagic)
	if (len(state) < minPacked || len(state) > maxState) && !magic {
		return state
	}
	packed := stateEncoder.EncodeAll(state, make([]byte, 0, len(state)/2))
	if len(packed) >= len(state) && !magic {
		return state
	}
	return packed
}

// unpackState is a stored state as it was given to packState. Stored bytes
// that do not inflate are returned as they are: they were changed since
// they were written, and the checkpoint's hash, which they no longer
// match, says so where the state is verified.
func unpackState(stored []byte) []byte {
	if !bytes.HasPrefix(stored, zstdMagic) {
		return stored
	}
	if state, ok := inflated.get(stored); ok {
		return state
	}
	state, err := stateDecoder.DecodeAll(stored, nil)
	if err != nil {
		return stored
	}
	state = state[:len(state):len(state)]
	inflated.put(stored, state)
	return state
}

// inflated remembers the states unpackState inflated last, by the exact
// bytes stored: the same states are read again and again (a waiting run's
// whole state by every page of waiting runs, by its decision and by its
// execution), and inflating one costs some microseconds, a page of a
// hundred half a millisecond. A state is a pure function of the bytes it
// is remembered by, so nothing read from it can be stale.
var inflated = &stateMemo{m: map[string][]byte{}, budget: 16 << 20}

// stateMemo is a map from stored bytes to the state they inflate to, that
// forgets the oldest when it holds more than budget bytes of both.
type stateMemo struct {
	mu     sync.Mutex
	m      map[string][]byte
	order  []string // keys, oldest first
	size   int
	budget int
}

func (s *stateMemo) get(stored []byte) ([]byte, bool) {
	s.mu.Lock()
	state, ok := s.m[string(stored)]
	s.mu.Unlock()
	// Capped, so that a caller's append copies instead of writing into
	// what the next caller is handed.
	return state[:len(state):len(state)], ok
}

func (s *stateMemo) put(stored, state []byte) {
	n := len(stored) + len(state)
	if n > s.budget/64 {
		return // a state this large would push out dozens of others
	}
	key := string(stored)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[key]; ok {
		return
	}
	for s.size+n > s.budget && len(s.order) > 0 {
		old := s.order[0]
		s.order = s.order[1:]
		s.size -= len(old) + len(s.m[old])
		delete(s.m, old)
	}
	s.m[key] = state
	s.order = append(s.order, key)
	s.size += n
}
