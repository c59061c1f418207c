package verify

import (
	"fmt"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow/internal/seal"
)

// auditProblem checks what spans runs: the global chain of the events
// written before the log was chained per run (contiguous, ending where the
// store's sealed head says), that no per-run event comes before one of them,
// each event's seal, the anchor chain and that the log extends every stored
// anchor and each of anchors. It describes the first problem, or returns "".
func auditProblem(in *seal.Sealer, evs []*record.AuditEvent, head *record.IntegrityHead, stored []*record.AuditAnchor, anchors []Anchor) string {
	if p := chainProblem(evs); p != "" {
		return p
	}
	var global []*record.AuditEvent
	bySeq := make(map[int64]*record.AuditEvent, len(evs))
	for _, ev := range evs {
		bySeq[ev.Seq] = ev
		if ev.Format != record.AuditPerRun {
			global = append(global, ev)
		}
	}
	if in.Keyed() {
		if p := sealedAuditProblem(in, evs, global, head); p != "" {
			return p
		}
	}
	if p := anchorsProblem(in, bySeq, head, stored); p != "" {
		return p
	}
	return givenAnchorsProblem(bySeq, stored, anchors)
}

// chainProblem checks the audit log, all of it by seq, and describes the
// first break ("" when intact): the events of the global chain (AuditGlobal,
// written before the log was chained per run) run from seq 1 without gaps,
// each linked to the one before; every later event (AuditPerRun) comes after
// them and is linked to the previous event of its run.
func chainProblem(evs []*record.AuditEvent) string {
	prev := ""
	runPrev := map[string]string{}
	var last int64
	perRun := false
	for i, ev := range evs {
		if i > 0 && ev.Seq <= last {
			return fmt.Sprintf("audit event %d comes after event %d: the log was reordered", ev.Seq, last)
		}
		last = ev.Seq
		if ev.Format == record.AuditPerRun {
			if ev.PrevHash != runPrev[ev.RunID] || record.AuditHash(ev) != ev.Hash {
				return fmt.Sprintf("audit chain broken at event %d, of run %s", ev.Seq, ev.RunID)
			}
			runPrev[ev.RunID] = ev.Hash
			perRun = true
			continue
		}
		if perRun {
			return fmt.Sprintf("audit event %d of the older global chain comes after events chained per run: the log was reordered", ev.Seq)
		}
		if ev.Seq != int64(i+1) {
			return fmt.Sprintf("audit event %d missing (found %d)", i+1, ev.Seq)
		}
		if ev.PrevHash != prev || record.AuditHash(ev) != ev.Hash {
			return fmt.Sprintf("audit chain broken at event %d", ev.Seq)
		}
		prev = ev.Hash
	}
	return ""
}

// sealedAuditProblem checks, with keys, each event's seal and that the
// global chain (global: its events) ends where the store's sealed head says.
func sealedAuditProblem(in *seal.Sealer, evs, global []*record.AuditEvent, head *record.IntegrityHead) string {
	for _, ev := range evs {
		if p := in.EventProblem(head, ev); p != "" {
			return fmt.Sprintf("audit event %d: %s", ev.Seq, p)
		}
	}
	var last *record.AuditEvent
	if len(global) > 0 {
		last = global[len(global)-1]
	}
	switch {
	case head == nil && len(evs) > 0 && evs[len(evs)-1].MAC != "":
		return "the store's integrity head is missing, though its audit events are sealed"
	case head != nil && head.Seq > 0 && (last == nil || last.Seq < head.Seq):
		n := int64(0)
		if last != nil {
			n = last.Seq
		}
		return fmt.Sprintf("the global audit chain ends at event %d, but its sealed head is at event %d: the newest events were deleted", n, head.Seq)
	case head != nil && head.Seq > 0 && last.Seq == head.Seq && last.Hash != head.Hash:
		return fmt.Sprintf("audit event %d is not the one the sealed head names", head.Seq)
	}
	return ""
}

// anchorsProblem checks the anchor chain (ids from 1, each linked to the one
// before, hashes and seals), that it ends where the store's sealed head says,
// and that every event an anchor names is in the log as it was named.
func anchorsProblem(in *seal.Sealer, bySeq map[int64]*record.AuditEvent, head *record.IntegrityHead, stored []*record.AuditAnchor) string {
	prev := ""
	for i, a := range stored {
		if a.ID != int64(i+1) {
			return fmt.Sprintf("anchor %d missing (found %d)", i+1, a.ID)
		}
		if a.PrevHash != prev || record.AnchorHash(a) != a.Hash {
			return fmt.Sprintf("the anchor chain is broken at anchor %d", a.ID)
		}
		if in.Keyed() {
			if p := in.AnchorProblem(head, a); p != "" {
				return fmt.Sprintf("anchor %d: %s", a.ID, p)
			}
		}
		for _, h := range a.Heads {
			ev, ok := bySeq[h.Seq]
			switch {
			case !ok:
				return fmt.Sprintf("anchor %d names audit event %d of run %s, which is missing: events were deleted", a.ID, h.Seq, h.RunID)
			case ev.RunID != h.RunID || ev.Hash != h.Hash:
				return fmt.Sprintf("anchor %d names audit event %d of run %s, which was changed since", a.ID, h.Seq, h.RunID)
			}
		}
		prev = a.Hash
	}
	if in.Keyed() && head != nil && head.AnchorID > 0 {
		if head.AnchorID > int64(len(stored)) {
			return fmt.Sprintf("the anchor chain ends at %d, but the sealed head names anchor %d: the newest anchors were deleted", len(stored), head.AnchorID)
		}
		if stored[head.AnchorID-1].Hash != head.AnchorHash {
			return fmt.Sprintf("anchor %d is not the one the sealed head names", head.AnchorID)
		}
	}
	return ""
}

// givenAnchorsProblem checks that the log extends each of anchors, recorded
// outside the store: an event of the global chain is still there as it was,
// an anchor record is still the one stored under its id.
func givenAnchorsProblem(bySeq map[int64]*record.AuditEvent, stored []*record.AuditAnchor, anchors []Anchor) string {
	for _, a := range anchors {
		if a.Event {
			ev, ok := bySeq[a.Seq]
			if !ok {
				return fmt.Sprintf("audit event %d, which the anchor %s names, is missing: events were deleted", a.Seq, a)
			}
			if ev.Hash != a.Hash {
				return fmt.Sprintf("audit event %d is not the anchored one (%s): the log was rewritten", a.Seq, a)
			}
			continue
		}
		if a.Seq > int64(len(stored)) {
			return fmt.Sprintf("the anchor chain ends at %d and does not reach the anchor %s: anchors were deleted", len(stored), a)
		}
		if stored[a.Seq-1].Hash != a.Hash {
			return fmt.Sprintf("anchor %d is not the one recorded (%s): the anchors were rewritten", a.Seq, a)
		}
	}
	return ""
}
