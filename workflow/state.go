package workflow

import (
	"bytes"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/record"
)

// EncodeState encodes st for a checkpoint.
func EncodeState(st *record.State) ([]byte, error) {
	b, err := jsonv2.Marshal(st, jsonv2.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("encode state of run %s: %w", st.RunID, err)
	}
	return b, nil
}

// DecodeState decodes a checkpoint's state strictly: unknown fields, duplicate
// keys, trailing data and a schema version from the future are errors.
func DecodeState(b []byte) (*record.State, error) {
	var st record.State
	if err := jsonv2.Unmarshal(b, &st, jsonv2.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("decode state: %w", err)
	}
	if st.SchemaVersion > record.SchemaVersion {
		return nil, fmt.Errorf("decode state: schema version %d is newer than this build (%d)", st.SchemaVersion, record.SchemaVersion)
	}
	if st.SchemaVersion < 1 {
		return nil, fmt.Errorf("decode state: missing or invalid schema version %d", st.SchemaVersion)
	}
	if !st.Status.Valid() {
		return nil, fmt.Errorf("decode state: unknown status %q", st.Status)
	}
	return &st, nil
}

// VerifyChain checks a run's checkpoints: seqs 1..n without gaps, each hash
// recomputed from its content and linked to the one before, and the latest state
// decodable strictly. It returns the decoded latest state.
//
// A pruned checkpoint (PrunedAt set, its state removed) cannot be hashed
// again; its hash is still linked to by the checkpoint after it, and its seal
// covers it. It is accepted only where Prune leaves one: before the latest
// checkpoint, and only when that latest checkpoint's state says the run ended
// and was pruned through its seq. Marking a live run's checkpoint pruned
// therefore breaks the chain, and a keyed store's latest state cannot be
// forged without the key.
func VerifyChain(runID string, cps []*record.Checkpoint) (*record.State, error) {
	st, _, err := verifyChain(runID, cps)
	return st, err
}

// verifyChain is VerifyChain, which also returns the latest whole state as
// encoded. A latest checkpoint written against a base is resolved with it
// (ResolveState); the base's hash was checked with the rest of the chain.
func verifyChain(runID string, cps []*record.Checkpoint) (*record.State, []byte, error) {
	if len(cps) == 0 {
		return nil, nil, &IntegrityError{RunID: runID, Problem: "no checkpoint"}
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

// verifyPrefixes is, for each checkpoint i, what VerifyChain says of the
// chain up to it (nil: it verifies), in one pass: a link that fails fails
// every longer prefix the same way, and each prefix's own latest state is
// checked once.
func verifyPrefixes(runID string, cps []*record.Checkpoint) []error {
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
		return &IntegrityError{RunID: runID, Seq: c.Seq, Problem: fmt.Sprintf("checkpoint seq %d where %d was expected", c.Seq, i+1)}
	case c.PrevHash != prev:
		return &IntegrityError{RunID: runID, Seq: c.Seq, Problem: "broken hash chain: prev_hash does not match the checkpoint before"}
	case c.PrunedAt.IsZero() && record.CheckpointHash(c) != c.Hash:
		return &IntegrityError{RunID: runID, Seq: c.Seq, Problem: "broken hash chain: content does not match its hash"}
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
		return nil, nil, &IntegrityError{RunID: runID, Seq: last.Seq, Problem: "the latest checkpoint's state was removed, which no prune does"}
	}
	full, err := ResolveState(cps, len(cps)-1)
	if err != nil {
		return nil, nil, &IntegrityError{RunID: runID, Seq: last.Seq, Problem: err.Error()}
	}
	st, err := DecodeState(full)
	if err != nil {
		return nil, nil, &IntegrityError{RunID: runID, Seq: last.Seq, Problem: err.Error()}
	}
	if st.SchemaVersion != last.SchemaVersion {
		return nil, nil, &IntegrityError{RunID: runID, Seq: last.Seq, Problem: "schema version of the row and of the state differ"}
	}
	if st.RunID != runID {
		return nil, nil, &IntegrityError{RunID: runID, Seq: last.Seq, Problem: fmt.Sprintf("state belongs to run %q", st.RunID)}
	}
	if len(pruned) > 0 {
		first, newest := pruned[0], pruned[len(pruned)-1]
		switch {
		case st.Pruned == nil || !st.Status.Terminal():
			return nil, nil, &IntegrityError{RunID: runID, Seq: first, Problem: fmt.Sprintf("the state was removed, though the run (%s) was never pruned", st.Status)}
		case newest > st.Pruned.ThroughSeq:
			return nil, nil, &IntegrityError{RunID: runID, Seq: newest, Problem: fmt.Sprintf("the state was removed, though the prune kept every state after checkpoint %d", st.Pruned.ThroughSeq)}
		}
	}
	return st, full, nil
}

// IntegrityError says that a run's stored data failed a check.
type IntegrityError struct {
	RunID   string
	Seq     int64
	Problem string
}

func (e *IntegrityError) Error() string {
	if e.Seq > 0 {
		return fmt.Sprintf("run %s checkpoint %d: %s", e.RunID, e.Seq, e.Problem)
	}
	return fmt.Sprintf("run %s: %s", e.RunID, e.Problem)
}

// DecodeStrict decodes one JSON value into v, refusing unknown fields, duplicate
// keys and trailing data. It is for input from outside (proposals, edits).
func DecodeStrict(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("empty input")
	}
	return jsonvalue.Readable(jsonv2.Unmarshal(b, v, jsonv2.RejectUnknownMembers(true)))
}
