package runtx

import (
	"sync"

	"github.com/signoff-dev/signoff/record"
)

// handoffSize is how many runs a process holds between the write that hands
// a run on (an approval) and the resumption that takes it: those a busy
// process decides within a few seconds, a few KB each.
const handoffSize = 256

// handoffs holds runs this process wrote last, by id, for the next
// resumption of each here: LoadHeld then reads the run row (and what the
// resumption asks for), not the chain, which this process wrote and
// verified. An entry is taken once. One that another process's write made
// stale costs nothing but its memory: LoadHeld finds the row moved on and
// loads the run afresh.
type handoffs struct {
	mu   sync.Mutex
	byID map[string]*Loaded
	ring []string // ids in the order they came, the oldest dropped first
	next int
}

func newHandoffs(size int) *handoffs {
	return &handoffs{byID: make(map[string]*Loaded, size), ring: make([]string, size)}
}

func (h *handoffs) put(l *Loaded) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := l.Run.ID
	if _, ok := h.byID[id]; !ok {
		if old := h.ring[h.next]; old != "" {
			delete(h.byID, old)
		}
		h.ring[h.next] = id
		h.next = (h.next + 1) % len(h.ring)
	}
	h.byID[id] = l
}

func (h *handoffs) take(id string) *Loaded {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.byID[id]
	delete(h.byID, id)
	return l
}

// HandOn keeps l, whose write has just committed, for the next resumption
// of its run in this process (Resumable) when the run is left executing.
// What it keeps is its own: the run row copied, no state (LoadHeld decodes
// the bytes written, so nobody shares a state a hook may still read), no
// reservation.
func (rs *Runs) HandOn(l *Loaded) {
	if l == nil || l.Run == nil || l.encoded == nil || l.Run.Status != record.StatusExecuting {
		return
	}
	run := *l.Run
	kept := &Loaded{Run: &run, LastHash: l.LastHash, encoded: l.encoded, committed: true, fps: l.fps, base: l.base,
		More: l.More, Read: l.Read, partsAt: l.partsAt}
	kept.More.Run, kept.More.Reserved = &run, nil
	rs.handoffs.put(kept)
}

// Resumable is the run HandOn kept for id, taken, or nil: the held run to
// begin a resumption with (see Reload).
func (rs *Runs) Resumable(id string) *Loaded {
	return rs.handoffs.take(id)
}
