package seal_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/keyring"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/seal"
)

// memTx keeps what the sealer writes and reads of a store: checkpoints, the
// audit log's last event and the store's head. The rest of the contract is
// not used.
type memTx struct {
	storage.Tx
	cps  []*record.Checkpoint
	head *record.IntegrityHead
}

func (t *memTx) AppendCheckpoint(_ context.Context, c *record.Checkpoint) error {
	t.cps = append(t.cps, c)
	return nil
}

func (t *memTx) AppendAudit(_ context.Context, e *record.AuditEvent, sealed func(*record.AuditEvent, *record.AuditRunHead) (record.Seal, record.Seal)) error {
	e.Seq, e.Format, e.Hash = 1, record.AuditPerRun, "h"
	e.Seal, _ = sealed(e, &record.AuditRunHead{RunID: e.RunID, Seq: e.Seq, Hash: e.Hash})
	return nil
}

func (t *memTx) IntegrityHead(context.Context) (*record.IntegrityHead, error) {
	if t.head == nil {
		return nil, storage.ErrNotFound
	}
	h := *t.head
	return &h, nil
}

func (t *memTx) PutIntegrityHead(_ context.Context, h *record.IntegrityHead) error {
	t.head = h
	return nil
}

type memStore struct {
	storage.Store
	tx *memTx
}

func (s memStore) Update(ctx context.Context, fn func(context.Context, storage.Tx) error) error {
	return fn(ctx, s.tx)
}

func ring(t *testing.T) *keyring.Ring {
	t.Helper()
	line, err := keyring.NewLine("k1")
	if err != nil {
		t.Fatal(err)
	}
	r, err := keyring.Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSealedWritesAreChecked: what is written through the sealer's store
// is sealed and checks; the first sealed audit event makes the store's head;
// a changed row, a stripped seal on a row written since and another ring's
// key (at the store's head, the first it checks) are each caught, while a row written before the store was keyed still
// passes. A sealer without keys seals and checks nothing.
func TestSealedWritesAreChecked(t *testing.T) {
	ctx := context.Background()
	keyed := time.UnixMilli(1_000_000)
	tx := &memTx{}
	in := seal.New(ring(t))
	old := &record.Checkpoint{RunID: "run-1", Seq: 1, Hash: "h1", CreatedAt: keyed.Add(-time.Hour)}
	c := &record.Checkpoint{RunID: "run-1", Seq: 2, Hash: "h2", CreatedAt: keyed.Add(time.Minute)}
	err := in.Store(memStore{tx: tx}).Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		if err := tx.AppendCheckpoint(ctx, c); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, &record.AuditEvent{RunID: "run-1", At: keyed}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.KeyID != "k1" || c.MAC == "" || tx.head == nil || !tx.head.KeyedSince.Equal(keyed) || tx.head.MAC == "" {
		t.Fatalf("not sealed: checkpoint %+v, head %+v", c.Seal, tx.head)
	}
	if err := in.CheckRun(ctx, tx, "run-1", []*record.Checkpoint{old, c}, nil, nil, nil); err != nil {
		t.Fatalf("a sealed row and one written before keys: %v", err)
	}
	changed, stripped := *c, *c
	changed.Hash = "h3"
	stripped.Seal = record.Seal{}
	for _, tc := range []struct {
		name string
		in   *seal.Sealer
		c    *record.Checkpoint
		seq  int64 // of the checkpoint named, 0 for the store's head
		want string
	}{
		{"changed", in, &changed, 2, "its MAC does not match"},
		{"stripped", in, &stripped, 2, "not sealed, though written"},
		{"another ring", seal.New(ring(t)), c, 0, "the store's integrity head: its MAC does not match"},
	} {
		err := tc.in.CheckRun(ctx, tx, "run-1", []*record.Checkpoint{tc.c}, nil, nil, nil)
		var ie *record.IntegrityError
		if !errors.As(err, &ie) || ie.RunID != "run-1" || ie.Seq != tc.seq || !strings.Contains(ie.Problem, tc.want) {
			t.Errorf("%s: %v, want an integrity error (seq %d) saying %q", tc.name, err, tc.seq, tc.want)
		}
	}
	none := seal.New(nil)
	plain := &record.Checkpoint{RunID: "run-1", Seq: 1}
	if err := none.Store(memStore{tx: &memTx{}}).Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		return tx.AppendCheckpoint(ctx, plain)
	}); err != nil || plain.MAC != "" || none.Keyed() {
		t.Fatalf("without keys: %v, seal %+v", err, plain.Seal)
	}
	if err := none.CheckRun(ctx, nil, "run-1", []*record.Checkpoint{&changed}, nil, nil, nil); err != nil {
		t.Errorf("without keys a row was checked: %v", err)
	}
}
