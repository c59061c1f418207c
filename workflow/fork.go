package workflow

import (
	"context"
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// Fork starts a new run from checkpoint seq of run id. The fork keeps what the
// run knew at that point (messages, evidence, proposal) and nothing it was
// granted: it is checked and put through policy again and needs its own approval.
// Nor does it keep the callback URL: a person starts the fork, and the agent
// that asked for callbacks asked them about its own run, not about runs it
// never submitted (and the allow-list may have changed since).
func (e *Engine) Fork(ctx context.Context, id string, seq int64, by record.Person) (*record.Run, error) {
	if by.ID == "" {
		return nil, refused(record.CodeInvalidInput, id, "who forks is required")
	}

	var src *record.State
	err := e.store.View(ctx, func(ctx context.Context, tx storage.Tx) error {
		cps, err := checkpointsOf(ctx, tx, id)
		if err != nil {
			return err
		}
		if seq < 1 || seq > int64(len(cps)) {
			return refused(record.CodeInvalidInput, id, "no checkpoint %d (the run has 1 to %d)", seq, len(cps))
		}
		if c := cps[seq-1]; !c.PrunedAt.IsZero() {
			return refused(record.CodeInvalidInput, id, "checkpoint %d was pruned on %s: its state is gone (fork at %d, the run's summary, instead)",
				seq, c.PrunedAt.UTC().Format(time.RFC3339), len(cps))
		}
		if !cps[0].PrunedAt.IsZero() {
			// The summary checkpoint of a pruned run verifies with the whole chain.
			src, _, err = chain.Verify(id, cps)
			return err
		}
		// The chain up to seq must be intact: a fork of damaged state would launder it.
		src, _, err = chain.Verify(id, cps[:seq])
		return err
	})
	if err != nil {
		return nil, err
	}
	nid := e.runs.NewID("run_")
	st := &record.State{
		SchemaVersion: record.SchemaVersion, RunID: nid, Workflow: src.Workflow, TaskID: src.TaskID, Status: record.StatusRunning,
		Step: src.Step, Requester: src.Requester, Summary: src.Summary, Messages: src.Messages, Evidence: src.Evidence,
		ModelCalls: src.ModelCalls, Actions: src.Actions, Proposed: src.Proposed, ForkedFrom: &record.ForkRef{RunID: id, Seq: seq},
	}
	l := &runtx.Loaded{
		Run: &record.Run{ID: nid, Workflow: src.Workflow, TaskID: src.TaskID, Status: record.StatusRunning, Step: src.Step,
			RequesterID: src.Requester.ID, ParentID: id, ParentSeq: seq},
		State: st,
	}
	err = e.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		return e.runs.Save(ctx, tx, l, "", record.EventForked, by.ID, map[string]any{"from_run": id, "from_seq": seq}, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("fork run %s at %d: %w", id, seq, err)
	}
	return e.Resume(ctx, nid)
}
