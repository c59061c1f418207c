package chain

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
)

// chainOf is a run's chain of n whole checkpoints, each state at its step.
func chainOf(t testing.TB, runID string, n int) []*record.Checkpoint {
	t.Helper()
	var cps []*record.Checkpoint
	prev := ""
	for i := range n {
		st := &record.State{SchemaVersion: record.SchemaVersion, RunID: runID, Workflow: "proposal", Step: i, Status: record.StatusRunning}
		b, err := Encode(st)
		if err != nil {
			t.Fatal(err)
		}
		c := &record.Checkpoint{RunID: runID, Seq: int64(i + 1), SchemaVersion: record.SchemaVersion, State: b, PrevHash: prev, CreatedAt: time.UnixMilli(int64(i))}
		c.Hash = record.CheckpointHash(c)
		prev = c.Hash
		cps = append(cps, c)
	}
	return cps
}

// TestVerifyPrefixesIsVerifyOfEachPrefix: what History says of each
// checkpoint, worked out in one pass, is what verifying the chain up to it
// says, for intact chains and chains damaged in every way a check names.
func TestVerifyPrefixesIsVerifyOfEachPrefix(t *testing.T) {
	damage := map[string]func(cps []*record.Checkpoint){
		"intact":          func([]*record.Checkpoint) {},
		"content changed": func(cps []*record.Checkpoint) { cps[2].State = []byte(`{"x":1}`) },
		"link broken":     func(cps []*record.Checkpoint) { cps[3].PrevHash = "00" },
		"seq skipped":     func(cps []*record.Checkpoint) { cps[1].Seq = 9 },
		"undecodable, rehashed": func(cps []*record.Checkpoint) {
			cps[4].State = []byte(`{"schema_version":2,"bogus":1}`)
			rehash(cps, 4)
		},
		"another run, rehashed": func(cps []*record.Checkpoint) {
			cps[1].State = []byte(`{"schema_version":2,"run_id":"other"}`)
			rehash(cps, 1)
		},
		"state removed":          func(cps []*record.Checkpoint) { cps[2].PrunedAt = time.UnixMilli(99) },
		"last state removed":     func(cps []*record.Checkpoint) { cps[5].PrunedAt = time.UnixMilli(99) },
		"schema version changed": func(cps []*record.Checkpoint) { cps[3].SchemaVersion = 1; rehash(cps, 3) },
	}
	for name, d := range damage {
		t.Run(name, func(t *testing.T) {
			cps := chainOf(t, "run-1", 6)
			d(cps)
			got := VerifyPrefixes("run-1", cps)
			for i := range cps {
				_, _, want := Verify("run-1", cps[:i+1])
				if fmt.Sprint(got[i]) != fmt.Sprint(want) || (got[i] == nil) != (want == nil) {
					t.Errorf("checkpoint %d: %v, want %v", i+1, got[i], want)
				}
				var ie *record.IntegrityError
				if want != nil && !errors.As(got[i], &ie) {
					t.Errorf("checkpoint %d: %T is no IntegrityError", i+1, got[i])
				}
			}
		})
	}
}

// rehash recomputes the hashes from checkpoint i on, as someone who can
// write the store would.
func rehash(cps []*record.Checkpoint, i int) {
	for j := i; j < len(cps); j++ {
		if j > 0 {
			cps[j].PrevHash = cps[j-1].Hash
		}
		cps[j].Hash = record.CheckpointHash(cps[j])
	}
}

// BenchmarkVerifyPrefixes: one pass, so ten times the checkpoints take
// about ten times as long (each prefix verified on its own took n²/2 hashes).
func BenchmarkVerifyPrefixes(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			cps := chainOf(b, "run-1", n)
			for b.Loop() {
				VerifyPrefixes("run-1", cps)
			}
		})
	}
}
