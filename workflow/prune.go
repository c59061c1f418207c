package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// DefaultPruneBatch is how many runs one write transaction of Prune handles:
// small enough that another writer of the store (serve, on the same SQLite
// file) waits tens of milliseconds at most, not the whole prune.
const DefaultPruneBatch = 100

// PruneOptions says what Prune removes.
type PruneOptions struct {
	// Before: runs that ended (their last update) before it are pruned.
	Before time.Time
	// DryRun reads and counts, and writes nothing.
	DryRun bool
	// Batch is the runs per write transaction (default DefaultPruneBatch).
	Batch int
}

// PruneReport is what Prune removed (or, in a dry run, would remove).
type PruneReport struct {
	DryRun bool      `json:"dry_run"`
	Before time.Time `json:"before"`
	// Runs were pruned; Checkpoints lost their state (StateBytes in all),
	// and SummaryBytes were written again as each run's last checkpoint.
	Runs         int   `json:"runs"`
	Checkpoints  int   `json:"checkpoints"`
	StateBytes   int64 `json:"state_bytes"`
	SummaryBytes int64 `json:"summary_bytes"`
	Evidence     int   `json:"evidence"`
	// Outbox counts the delivered outbox messages deleted (OutboxBytes of
	// payload), Slack messages and callbacks alike; OutboxKinds says how
	// many of each kind. Undelivered ones are kept for the dispatcher.
	Outbox      int                       `json:"outbox"`
	OutboxBytes int64                     `json:"outbox_bytes"`
	OutboxKinds map[record.OutboxKind]int `json:"outbox_kinds"`
	// ReplayForgotten counts the expired replay-cache rows deleted (not
	// counted in a dry run).
	ReplayForgotten int `json:"replay_forgotten"`
	// Skipped are ended runs left as they are because they failed their
	// integrity check: verify reports them, and pruning would hide the damage.
	Skipped []*IntegrityError `json:"skipped"`
}

// Bytes is what the prune removes in all, less the summaries it writes.
func (r *PruneReport) Bytes() int64 { return r.StateBytes + r.OutboxBytes - r.SummaryBytes }

// Prune removes the bulky records of runs that ended before opt.Before: the
// state of every checkpoint (evidence, agent messages, the proposal as it
// stood at each step) and the run's delivered outbox messages, and forgets
// expired replay-cache rows. Each pruned run gets one more checkpoint, a
// summary of its last state without evidence and messages that records the
// prune (State.Pruned); it is sealed and audited like every transition.
// Kept: the run row, every checkpoint's seq, hashes and seal, the approval
// requests, decisions, operations and audit events, so verify still checks
// the whole chain.
//
// Only runs in a terminal status are touched, as said by their row and by
// their sealed latest checkpoint; a run that fails its integrity check is
// skipped. Runs are pruned DefaultPruneBatch to a write transaction, each run
// wholly or not at all, so a prune that is stopped can be run again.
func (e *Engine) Prune(ctx context.Context, opt PruneOptions) (*PruneReport, error) {
	if opt.Before.IsZero() {
		return nil, errors.New("prune: a cutoff time is required")
	}
	batch := opt.Batch
	if batch <= 0 {
		batch = DefaultPruneBatch
	}
	rep := &PruneReport{DryRun: opt.DryRun, Before: opt.Before.UTC(), Skipped: []*IntegrityError{}, OutboxKinds: map[record.OutboxKind]int{}}
	f := storage.EndedFilter{Before: opt.Before, Limit: batch}
	for {
		var runs []*record.Run
		err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
			var err error
			runs, err = tx.EndedRuns(ctx, f)
			return err
		})
		if err != nil {
			return rep, fmt.Errorf("prune: %w", err)
		}
		if len(runs) == 0 {
			break
		}
		last := runs[len(runs)-1]
		f.AfterCreated, f.AfterID = last.CreatedAt, last.ID
		do := e.store.Update
		if opt.DryRun {
			do = e.store.View
		}
		// Counted per batch, so that a failed batch adds nothing.
		var part *PruneReport
		err = do(ctx, func(ctx context.Context, tx storage.Tx) error {
			part = &PruneReport{OutboxKinds: map[record.OutboxKind]int{}}
			for _, r := range runs {
				if err := e.pruneRun(ctx, tx, r.ID, opt, part); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return rep, err
		}
		rep.add(part)
		if len(runs) < batch {
			break
		}
	}
	if !opt.DryRun {
		n, err := e.forgetReplays(ctx, batch)
		rep.ReplayForgotten = n
		if err != nil {
			return rep, err
		}
	}
	e.log.Info("pruned", "before", rep.Before, "dry_run", rep.DryRun, "runs", rep.Runs, "checkpoints", rep.Checkpoints,
		"bytes", rep.Bytes(), "outbox", rep.Outbox, "replay_forgotten", rep.ReplayForgotten, "skipped", len(rep.Skipped))
	return rep, nil
}

func (r *PruneReport) add(p *PruneReport) {
	r.Runs += p.Runs
	r.Checkpoints += p.Checkpoints
	r.StateBytes += p.StateBytes
	r.SummaryBytes += p.SummaryBytes
	r.Evidence += p.Evidence
	r.Outbox += p.Outbox
	r.OutboxBytes += p.OutboxBytes
	for k, n := range p.OutboxKinds {
		r.OutboxKinds[k] += n
	}
	r.Skipped = append(r.Skipped, p.Skipped...)
}

// pruneRun prunes one run in tx (in a dry run, counts what it would do).
func (e *Engine) pruneRun(ctx context.Context, tx storage.Tx, id string, opt PruneOptions, rep *PruneReport) error {
	// Its outbox comes with it, in the same round trip.
	l, err := e.runs.LoadWith(ctx, tx, id, storage.RunParts{Outbox: true})
	var ie *IntegrityError
	if errors.As(err, &ie) {
		rep.Skipped = append(rep.Skipped, ie)
		e.log.Warn("prune: run skipped, it failed its integrity check", "run_id", id, "problem", ie.Error())
		return nil
	}
	if err != nil {
		return fmt.Errorf("prune run %s: %w", id, err)
	}
	// Read again in this transaction: the run may have moved since it was
	// listed. The status that counts is the sealed checkpoint's too.
	if !l.Run.PrunedAt.IsZero() || !l.Run.Status.Terminal() || !l.State.Status.Terminal() || !l.Run.UpdatedAt.Before(opt.Before) {
		return nil
	}
	now := e.now()
	rec := &record.PruneRecord{At: now, ThroughSeq: l.Run.Seq, Evidence: len(l.State.Evidence), Messages: len(l.State.Messages)}
	states := 0
	for _, c := range l.Chain {
		if c.PrunedAt.IsZero() {
			states++
			rec.StateBytes += int64(len(c.State))
		}
	}
	var outboxBytes int64
	for _, m := range l.More.Outbox {
		if !m.DeliveredAt.IsZero() {
			if rec.OutboxKinds == nil {
				rec.OutboxKinds = map[record.OutboxKind]int{}
			}
			rec.Outbox++
			rec.OutboxKinds[m.Kind]++
			outboxBytes += int64(len(m.Payload))
		}
	}
	summary := *l.State
	summary.Evidence, summary.Messages, summary.Pruned = nil, nil, rec
	// A whole state, written by this build: the checkpoints before it, its
	// base among them, lose theirs.
	summary.SchemaVersion = record.SchemaVersion
	b, err := chain.Encode(&summary)
	if err != nil {
		return fmt.Errorf("prune run %s: %w", id, err)
	}
	rep.Runs++
	rep.Checkpoints += states
	rep.StateBytes += rec.StateBytes
	rep.SummaryBytes += int64(len(b))
	rep.Evidence += rec.Evidence
	rep.Outbox += rec.Outbox
	rep.OutboxBytes += outboxBytes
	for k, n := range rec.OutboxKinds {
		rep.OutboxKinds[k] += n
	}
	if opt.DryRun {
		return nil
	}

	cp := &record.Checkpoint{RunID: id, Seq: l.Run.Seq + 1, SchemaVersion: record.SchemaVersion, State: b, PrevHash: l.LastHash, CreatedAt: now}
	cp.Hash = record.CheckpointHash(cp)
	// UpdatedAt stays when the run ended: listings and the next prune's
	// cutoff read it so.
	l.Run.Seq, l.Run.PrunedAt = cp.Seq, now
	evs, err := e.runs.CheckpointEvents(cp, runtx.Event{Actor: "signoff", Action: record.EventPruned, Detail: map[string]any{
		"through_seq": rec.ThroughSeq, "states": states, "state_bytes": rec.StateBytes, "outbox": rec.Outbox,
	}})
	if err != nil {
		return fmt.Errorf("prune run %s: %w", id, err)
	}
	// The run's row, its summary checkpoint and its event in one write (one
	// round trip where statements cost one, with the audit head's read).
	if err := tx.SaveRun(ctx, &storage.RunWrite{Run: l.Run, Checkpoint: cp, Events: evs}); err != nil {
		return fmt.Errorf("prune run %s: %w", id, err)
	}
	if _, err := tx.PruneCheckpoints(ctx, id, rec.ThroughSeq, now); err != nil {
		return fmt.Errorf("prune run %s: %w", id, err)
	}
	if _, err := tx.DeleteDeliveredOutbox(ctx, id); err != nil {
		return fmt.Errorf("prune run %s: %w", id, err)
	}
	return nil
}

// forgetReplays deletes the replay-cache rows whose signature window has
// passed (serve does the same as it goes), a batch to a transaction.
func (e *Engine) forgetReplays(ctx context.Context, batch int) (int, error) {
	total := 0
	for {
		var n int
		err := e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
			var err error
			n, err = tx.ForgetRequests(ctx, e.now(), batch)
			return err
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("prune: forget expired replay-cache rows: %w", err)
		}
		if n < batch {
			return total, nil
		}
	}
}
