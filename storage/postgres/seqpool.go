package postgres

import (
	"slices"
	"sync"
	"time"
)

// seqPool holds audit seqs taken ahead, with when each was taken, for
// writes that know the head their events follow (dialect.PooledSeqs): a
// new run's first events (it has no head yet) and a transition after the
// head its run's last write in this process left (RunWrite.Follows: a
// receipt after its intent). Such a write then reads nothing and travels
// with its COMMIT, one round trip where it took two. The reads that
// reserve seqs for a write (ReserveQuery) take a few more while the pool
// runs low.
//
// A seq taken before its commit is a gap the live audit tail waits for (a
// minute; see the app's auditGapGrace), so a pooled seq older than seqLife
// is dropped, never used, as a reservation older than that is.
type seqPool struct {
	mu   sync.Mutex
	seqs []pooledSeq
	// missed counts the takes that found too few seqs since the last
	// top-up: submissions come in bursts (many clients at once), and the
	// next top-up takes enough for as many.
	missed int
	now    func() time.Time
}

type pooledSeq struct {
	seq int64
	at  time.Time
}

// seqLife is how long a pooled seq may wait for its event: well inside the
// minute the live audit tail waits for a gap.
const seqLife = 10 * time.Second

// A reserving read tops the pool up while it holds fewer than seqPoolLow
// fresh seqs, or a take found none: by seqPoolTopUp, and two more for
// each take that found none since, up to seqPoolMaxTopUp. A submission
// and a receipt take two each; a run's decision and its execution make a
// reserving read each.
const (
	seqPoolLow      = 16
	seqPoolTopUp    = 4
	seqPoolMaxTopUp = 128
)

func newSeqPool() *seqPool { return &seqPool{now: time.Now} }

// topUp is how many seqs a reserving read should take for the pool now
// (0: none), counted as taken: the misses it answers are forgotten.
func (p *seqPool) topUp() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropStale()
	if len(p.seqs) >= seqPoolLow && p.missed == 0 {
		return 0
	}
	n := min(seqPoolTopUp+2*p.missed, seqPoolMaxTopUp)
	p.missed = 0
	return n
}

// put adds seqs, taken together now, smaller first (the order a
// statement's nextvals ran in is not given).
func (p *seqPool) put(seqs ...int64) {
	slices.Sort(seqs)
	p.mu.Lock()
	defer p.mu.Unlock()
	at := p.now()
	for _, s := range seqs {
		p.seqs = append(p.seqs, pooledSeq{seq: s, at: at})
	}
}

// take hands out the two oldest fresh seqs larger than after, smaller
// first, or ok false when the pool holds fewer. A run's events take seqs
// in the order of its chain: a write that follows a head takes none at or
// below the head's seq (after), and a new run's first events (after 0)
// take any.
func (p *seqPool) take(after int64) (seq, spare int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropStale()
	var at []int
	for i := 0; i < len(p.seqs) && len(at) < 2; i++ {
		if p.seqs[i].seq > after {
			at = append(at, i)
		}
	}
	if len(at) < 2 {
		p.missed++
		return 0, 0, false
	}
	a, b := p.seqs[at[0]].seq, p.seqs[at[1]].seq
	p.seqs = slices.Delete(slices.Delete(p.seqs, at[1], at[1]+1), at[0], at[0]+1)
	return min(a, b), max(a, b), true
}

// dropStale drops the seqs taken seqLife ago or more (p.mu held). They
// were put in the order they were taken, so the stale ones lead.
func (p *seqPool) dropStale() {
	cut := p.now().Add(-seqLife)
	i := 0
	for i < len(p.seqs) && !p.seqs[i].at.After(cut) {
		i++
	}
	if i > 0 {
		p.seqs = append(p.seqs[:0:0], p.seqs[i:]...)
	}
}
