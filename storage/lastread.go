package storage

// LastReader is a Tx that can be told that a View's next read is its last
// (see LastRead).
type LastReader interface {
	LastRead()
}

// LastRead tells tx, a View's, that its next read (one method call: a
// LoadRun reads all its parts at once) is the last it makes. A driver whose
// snapshot costs a round trip to end (PostgreSQL) ends it in the round trip
// of that read, and refuses any read after it; the others, and Update's
// transactions, carry on as before. A caller that may read again, even only
// on some path, must not call it.
func LastRead(tx Tx) {
	if l, ok := tx.(LastReader); ok {
		l.LastRead()
	}
}
