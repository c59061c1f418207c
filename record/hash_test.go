package record

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
	"testing"
	"time"
)

// The definitions the chained hashes keep to, byte for byte: every chain
// stored since is hashed so. Each writes its parts one at a time.

func oldHashPart(h hash.Hash, part []byte) {
	var n [20]byte
	h.Write(strconv.AppendInt(n[:0], int64(len(part)), 10))
	h.Write([]byte{':'})
	h.Write(part)
}

func oldHashStrings(h hash.Hash, parts ...string) {
	for _, p := range parts {
		oldHashPart(h, []byte(p))
	}
}

func oldAuditHash(e *AuditEvent) string {
	h := sha256.New()
	if e.Format == AuditPerRun {
		h.Write([]byte("1:2"))
	}
	oldHashStrings(h, e.PrevHash, strconv.FormatInt(e.Seq, 10), e.RunID, e.Actor, string(e.Action))
	oldHashPart(h, e.Detail)
	oldHashStrings(h, strconv.FormatInt(e.At.UnixMilli(), 10))
	if e.CheckpointSeq != 0 || e.CheckpointHash != "" || e.Format == AuditPerRun {
		oldHashStrings(h, strconv.FormatInt(e.CheckpointSeq, 10), e.CheckpointHash)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func oldCheckpointHash(c *Checkpoint) string {
	h := sha256.New()
	oldHashStrings(h, c.PrevHash, c.RunID, strconv.FormatInt(c.Seq, 10), strconv.Itoa(c.SchemaVersion))
	oldHashPart(h, c.State)
	oldHashStrings(h, strconv.FormatInt(c.CreatedAt.UnixMilli(), 10))
	if c.BaseSeq != 0 {
		oldHashStrings(h, strconv.FormatInt(c.BaseSeq, 10))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func oldAnchorHash(a *AuditAnchor) string {
	h := sha256.New()
	part := func(p string) {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	part(a.PrevHash)
	part(strconv.FormatInt(a.ID, 10))
	part(strconv.FormatInt(a.At.UnixMilli(), 10))
	for _, hd := range a.Heads {
		part(hd.RunID)
		part(strconv.FormatInt(hd.Seq, 10))
		part(hd.Hash)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestChainHashesArePinned: the hashes of records stored long ago do not
// change with the code that computes them.
func TestChainHashesArePinned(t *testing.T) {
	at := time.UnixMilli(1796000000123)
	c := &Checkpoint{RunID: "run_1", Seq: 2, SchemaVersion: 2, State: []byte(`{"a":1}`), PrevHash: "ab", CreatedAt: at, BaseSeq: 1}
	e := &AuditEvent{Seq: -3, RunID: "run_1", Actor: "U0", Action: "approved", Detail: []byte(`{"x":"y"}`), At: at, PrevHash: "cd",
		Format: AuditPerRun, CheckpointSeq: 2, CheckpointHash: "ef"}
	a := &AuditAnchor{ID: 7, At: at, PrevHash: "01", Heads: []AnchoredHead{{RunID: "run_1", Seq: 3, Hash: "ff"}, {RunID: "", Seq: 9, Hash: "ee"}}}
	for _, tt := range []struct{ name, got, want string }{
		{"checkpoint, as defined", oldCheckpointHash(c), "ad30d761c9ba33725b7ec6c78db3c7bd001c6368024741a44006ef1e4debc03a"},
		{"audit event, as defined", oldAuditHash(e), "9e627d66378fa58d6a758446d1d3bbfdda6304bfdd4f5c33a7d3a0cc7da8ca40"},
		{"anchor, as defined", oldAnchorHash(a), "d807734b77104c675c61dc961b7a61f88124e87fc3625c331d0c0dca3eb180d7"},
		{"checkpoint", CheckpointHash(c), "ad30d761c9ba33725b7ec6c78db3c7bd001c6368024741a44006ef1e4debc03a"},
		{"audit event", AuditHash(e), "9e627d66378fa58d6a758446d1d3bbfdda6304bfdd4f5c33a7d3a0cc7da8ca40"},
		{"anchor", AnchorHash(a), "d807734b77104c675c61dc961b7a61f88124e87fc3625c331d0c0dca3eb180d7"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %s, pinned %s", tt.name, tt.got, tt.want)
		}
	}
}

// FuzzChainHashes: each chained hash is its definition's, for any record.
func FuzzChainHashes(f *testing.F) {
	f.Add("ab", "run_1", int64(2), 2, []byte(`{"a":1}`), int64(1796000000123), int64(1), "U0", "approved", true, "ef")
	f.Add("", "", int64(0), 0, []byte(nil), int64(-1), int64(0), "", "", false, "")
	f.Add("\xff", "r", int64(-9223372036854775808), -1, []byte("x"), int64(9223372036854775807), int64(-5), "a:b", "1:2", true, "")
	f.Fuzz(func(t *testing.T, prev, runID string, seq int64, schema int, body []byte, ms, other int64, actor, action string, perRun bool, hashed string) {
		at := time.UnixMilli(ms)
		c := &Checkpoint{RunID: runID, Seq: seq, SchemaVersion: schema, State: body, PrevHash: prev, CreatedAt: at, BaseSeq: other}
		if got, want := CheckpointHash(c), oldCheckpointHash(c); got != want {
			t.Fatalf("checkpoint %+v: %s, want %s", c, got, want)
		}
		e := &AuditEvent{Seq: seq, RunID: runID, Actor: actor, Action: Event(action), Detail: body, At: at, PrevHash: prev,
			CheckpointSeq: other, CheckpointHash: hashed}
		if perRun {
			e.Format = AuditPerRun
		}
		if got, want := AuditHash(e), oldAuditHash(e); got != want {
			t.Fatalf("event %+v: %s, want %s", e, got, want)
		}
		a := &AuditAnchor{ID: seq, At: at, PrevHash: prev, Heads: []AnchoredHead{{RunID: runID, Seq: other, Hash: hashed}, {RunID: actor, Seq: seq, Hash: action}}}
		if got, want := AnchorHash(a), oldAnchorHash(a); got != want {
			t.Fatalf("anchor %+v: %s, want %s", a, got, want)
		}
	})
}
