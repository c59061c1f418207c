// Package storage is the contract between the engine and the stores that
// keep its records: Store and Tx, the filters that list runs, outbox
// messages and audit events, the change hub that wakes waiters, and the
// sentinel errors every driver maps its native errors to (ErrNotFound,
// ErrConflict, ErrDuplicate, and ErrHeadMoved, the conflict of an audit
// head alone).
//
// It imports only the standard library and package record, so a driver
// (storage/sqlite, storage/postgres, both built on storage/sqlstore) depends
// on the contract, never on the engine or its policy language. Every driver
// runs the one behaviour suite in storage/storagetest.
package storage
