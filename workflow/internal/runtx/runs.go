// Package runtx is the run transaction of the engine: the one owner of a run
// while a transition changes it. It loads a run and verifies its checkpoint
// chain and seals, stages and saves the next checkpoint with the run row and
// the audit event, keeps the lease, and tells the hooks, all inside the one
// transaction of the transition. Whatever the engine decides, what a
// transition writes is decided here, once, so that no verb writes a run in a
// way of its own.
package runtx

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/fingerprint"
	"github.com/signoff-dev/signoff/workflow/internal/seal"
)

// Clock is what the run transaction takes the time of its writes from.
type Clock interface {
	Now() time.Time
}

// Change is one written change of a run, as the hooks are told of it (the
// engine turns it into its Transition).
type Change struct {
	Run     *record.Run
	State   *record.State // nil for a run whose state could not be trusted (only its row was written)
	From    record.Status
	Event   record.Event
	Request *record.ApprovalRequest
}

// Config is what Runs is built from.
type Config struct {
	Store  storage.Store // sealed and notifying
	Sealer *seal.Sealer
	Clock  Clock
	// Owner names the engine in the leases it takes; TTL is how long a
	// lease lasts without progress.
	Owner string
	TTL   time.Duration
	// Tell tells the hooks of a change, in its transaction; nil tells none.
	Tell func(ctx context.Context, tx storage.Tx, c Change) error
	// RowProblem says how a run row disagrees with its verified state, or
	// returns "" (the engine's rule, shared with its store-wide verification).
	RowProblem func(*record.Run, *record.State) string
	Logger     *slog.Logger
}

// Runs is the run transaction: it loads a run and verifies it, stages and
// saves its next checkpoint with the run row and the audit event, keeps the
// lease, and tells the hooks, all inside the one transaction of a
// transition. Everything the engine does to a run goes through it, so one
// owner decides what a transition writes.
type Runs struct {
	store      storage.Store
	in         *seal.Sealer
	clock      Clock
	owner      string
	ttl        time.Duration
	tell       func(ctx context.Context, tx storage.Tx, c Change) error
	rowProblem func(*record.Run, *record.State) string
	log        *slog.Logger
	// fps remembers the fingerprints computed last: a run's is computed
	// from the same bytes at its submission, decision and execution.
	fps *fingerprint.Memo
	// handoffs are runs handed on to a resumption in this process.
	handoffs *handoffs
}

// New builds the run transaction over c.
func New(c Config) *Runs {
	return &Runs{store: c.Store, in: c.Sealer, clock: c.Clock, owner: c.Owner, ttl: c.TTL, tell: c.Tell, rowProblem: c.RowProblem, log: c.Logger,
		fps: fingerprint.NewMemo(fingerprint.DefaultSize), handoffs: newHandoffs(handoffSize)}
}

// notify tells the hooks of c, written in tx.
func (rs *Runs) notify(ctx context.Context, tx storage.Tx, c Change) error {
	if rs.tell == nil {
		return nil
	}
	return rs.tell(ctx, tx, c)
}

// Now is the time of a write, at the precision the store keeps.
func (rs *Runs) Now() time.Time { return rs.clock.Now().UTC().Truncate(time.Millisecond) }

// NewID makes an id that sorts by creation time (milliseconds, then a process-wide
// counter), with random bits so that ids made by different processes never meet.
// Stores list records by (created_at, id), so records made in the same
// millisecond keep the order they were made in.
func (rs *Runs) NewID(prefix string) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], uint64(rs.Now().UnixMilli())<<16|uint64(idSeq.Add(1)&0xffff))
	if _, err := rand.Read(b[8:]); err != nil {
		panic(fmt.Sprintf("read random: %v", err)) // crypto/rand does not fail on supported platforms
	}
	return prefix + hex.EncodeToString(b[:])
}

var idSeq atomic.Uint32
