// Package chain is a run's checkpoint chain as the engine stores and
// trusts it: how a state is encoded and strictly decoded, how a checkpoint
// written against a base holds only what changed and is resolved back to the
// whole state, and how a chain is verified (seqs, hash links, what a prune
// may remove, the latest state).
//
// It is pure: it reads and writes bytes and checkpoints, never a store, and
// imports of the module only the records, so that the engine's transaction
// code, its store-wide verification and its history all check a chain the
// one same way.
package chain
