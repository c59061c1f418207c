package sqlstore

import (
	"bytes"

	"github.com/klauspost/compress/zstd"
)

// A checkpoint's state is stored compressed (a zstd frame) when that makes
// it smaller, and read back as it was given: what the engine hashes, seals
// and decodes never changes. A state's evidence and proposal, most of a run's
// bytes, are JSON that compresses two- to threefold, and a whole state of 3
// KB left the pages of a 4 KB page store a third empty; compressed, a run's
// checkpoints fill them. A stored state that begins with zstd's magic number
// is compressed: a state is a JSON object, and any other that begins so is
// compressed whatever its size, so the rule holds for every state.
var (
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

	stateEncoder = must(zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false), // the checkpoint's hash covers the state
		zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true)))

	stateDecoder = must(zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(maxState)))
)

// minPacked is the smallest state worth compressing: below it a frame's
// header eats what compression saves.
const minPacked = 128

// maxState bounds what a stored frame may inflate to, so that a forged row
// cannot make a reader allocate without limit.
const maxState = 64 << 20

func must[T any](v T, err error) T {
	if err != nil {
		panic(err) // only for options that are constant
	}
	return v
}

// StoredState is state as the store writes it, for tools that write a
// store's rows themselves (the tests that tamper with it).
func StoredState(state []byte) []byte { return packState(state) }

// StateOf is a state as the store reads it from stored, for tools that
// read a store's rows themselves.
func StateOf(stored []byte) []byte { return unpackState(stored) }

// packState is state as stored.
func packState(state []byte) []byte {
	magic := bytes.HasPrefix(state, zstdMagic)
	if len(state) < minPacked && !magic {
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
	state, err := stateDecoder.DecodeAll(stored, nil)
	if err != nil {
		return stored
	}
	return state
}
