package chain

import (
	"fmt"

	"github.com/signoff-dev/signoff/record"
)

// Verify checks a run's checkpoints: seqs 1..n without gaps, each hash
// recomputed from its content and linked to the one before, and the latest
// state decodable strictly. It returns the decoded latest state and that
// state, whole, as encoded: a latest checkpoint written against a base is
// resolved with it (Resolve); the base's hash was checked with the rest of
// the chain. What it finds is a *record.IntegrityError.
//
// A pruned checkpoint (PrunedAt set, its state removed) cannot be hashed
// again; its hash is still linked to by the checkpoint after it, and its seal
// covers it. It is accepted only where Prune leaves one: before the latest
// checkpoint, and only when that latest checkpoint's state says the run ended
// and was pruned through its seq. Marking a live run's checkpoint pruned
// therefore breaks the chain, and a keyed store's latest state cannot be
// forged without the key.
func Verify(runID string, cps []*record.Checkpoint) (*record.State, []byte, error) {
	if len(cps) == 0 {
		return nil, nil, &record.IntegrityError{RunID: runID, Problem: "no checkpoint"}
	}
	prev := ""
	var pruned []int64
	for i, c := range cps {
		if err := verifyLink(runID, c, i, prev); err != nil {
			return nil, nil, err
		}
		prev = c.Hash
		if !c.PrunedAt.IsZero() {
			pruned = append(pruned, c.Seq)
		}
	}
	return verifyLatest(runID, cps, pruned)
}

// VerifyPrefixes is, for each checkpoint i, what Verify says of the chain
// up to it (nil: it verifies), in one pass: a link that fails fails every
// longer prefix the same way, and each prefix's own latest state is checked
// once.
func VerifyPrefixes(runID string, cps []*record.Checkpoint) []error {
	out := make([]error, len(cps))
	prev := ""
	var pruned []int64
	var broken error
	for i, c := range cps {
		if broken == nil {
			broken = verifyLink(runID, c, i, prev)
		}
		if broken != nil {
			out[i] = broken
			continue
		}
		prev = c.Hash
		if !c.PrunedAt.IsZero() {
			pruned = append(pruned, c.Seq)
		}
		if _, _, err := verifyLatest(runID, cps[:i+1], pruned); err != nil {
			out[i] = err
		}
	}
	return out
}

// verifyLink checks checkpoint c, the i-th of its chain, against the hash of
// the one before (prev) and, unless a prune removed its state, its own.
func verifyLink(runID string, c *record.Checkpoint, i int, prev string) error {
	switch {
	case c.Seq != int64(i+1):
		return &record.IntegrityError{RunID: runID, Seq: c.Seq, Problem: fmt.Sprintf("checkpoint seq %d where %d was expected", c.Seq, i+1)}
	case c.PrevHash != prev:
		return &record.IntegrityError{RunID: runID, Seq: c.Seq, Problem: "broken hash chain: prev_hash does not match the checkpoint before"}
	case c.PrunedAt.IsZero() && record.CheckpointHash(c) != c.Hash:
		return &record.IntegrityError{RunID: runID, Seq: c.Seq, Problem: "broken hash chain: content does not match its hash"}
	}
	return nil
}

// verifyLatest decodes the latest state of cps, whose links were checked,
// and checks it and what a prune removed (pruned: the seqs without state).
// Only the latest state is decoded: an earlier one cannot change without
// breaking the link of the checkpoint after it.
func verifyLatest(runID string, cps []*record.Checkpoint, pruned []int64) (*record.State, []byte, error) {
	last := cps[len(cps)-1]
	if !last.PrunedAt.IsZero() {
		return nil, nil, &record.IntegrityError{RunID: runID, Seq: last.Seq, Problem: "the latest checkpoint's state was removed, which no prune does"}
	}
	full, err := Resolve(cps, len(cps)-1)
	if err != nil {
		return nil, nil, &record.IntegrityError{RunID: runID, Seq: last.Seq, Problem: err.Error()}
	}
	st, err := Decode(full)
	if err != nil {
		return nil, nil, &record.IntegrityError{RunID: runID, Seq: last.Seq, Problem: err.Error()}
	}
	if st.SchemaVersion != last.SchemaVersion {
		return nil, nil, &record.IntegrityError{RunID: runID, Seq: last.Seq, Problem: "schema version of the row and of the state differ"}
	}
	if st.RunID != runID {
		return nil, nil, &record.IntegrityError{RunID: runID, Seq: last.Seq, Problem: fmt.Sprintf("state belongs to run %q", st.RunID)}
	}
	if len(pruned) > 0 {
		first, newest := pruned[0], pruned[len(pruned)-1]
		switch {
		case st.Pruned == nil || !st.Status.Terminal():
			return nil, nil, &record.IntegrityError{RunID: runID, Seq: first, Problem: fmt.Sprintf("the state was removed, though the run (%s) was never pruned", st.Status)}
		case newest > st.Pruned.ThroughSeq:
			return nil, nil, &record.IntegrityError{RunID: runID, Seq: newest, Problem: fmt.Sprintf("the state was removed, though the prune kept every state after checkpoint %d", st.Pruned.ThroughSeq)}
		}
	}
	return st, full, nil
}
