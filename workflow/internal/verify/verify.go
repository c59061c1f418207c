// Package verify is the check of a whole store that `signoff verify` runs:
// every run's checkpoint chain, the seals of all its rows, that every sealed
// transition has its audit event, that the audit log (each run's chain and
// the older global one) ends where its sealed heads say, and that the log
// extends every anchor stored and every anchor recorded outside the store.
//
// The engine checks one run at a time as it acts on it; this package owns
// the checks that span the store, apart from the engine, so that they read
// as the one list of what verify proves. It changes nothing.
package verify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
	"github.com/signoff-dev/signoff/workflow/internal/seal"
)

// Verifier checks a store with the engine's sealer and the engine's rule
// for what of a run row must agree with its sealed state.
type Verifier struct {
	Sealer *seal.Sealer
	// RowProblem says how the columns of a run row that decide anything
	// disagree with its sealed state, or returns "": the rule the engine
	// applies when it loads a run.
	RowProblem func(r *record.Run, st *record.State) string
}

// Verify checks every run's checkpoint chain and audit chain, the seals of
// every checkpoint, approval request, decision, operation, audit event, run
// head and anchor when keys are configured, that every sealed transition has
// its audit event, that each run's audit log ends where its sealed head says
// and the global chain of older events where the store's head says (so
// deleting the newest events shows), and that the log extends every anchor
// stored and each of anchors. It reads through tx and changes nothing.
func (v *Verifier) Verify(ctx context.Context, tx storage.Tx, anchors []Anchor) (*Report, error) {
	p := &pass{v: v, in: v.Sealer, rep: &Report{Damaged: []*record.IntegrityError{}, Unverified: !v.Sealer.Keyed()}}
	if err := p.readHead(ctx, tx); err != nil {
		return nil, err
	}
	evs, err := tx.AuditEvents(ctx, storage.AuditFilter{})
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	p.index(evs)
	stored, err := tx.AuditAnchors(ctx)
	if err != nil {
		return nil, fmt.Errorf("read anchors: %w", err)
	}
	p.rep.Anchors = len(stored)
	if n := len(stored); n > 0 {
		p.rep.Head = Anchor{Seq: stored[n-1].ID, Hash: stored[n-1].Hash}
	}
	if p.rep.AuditProblem == "" {
		p.rep.AuditProblem = auditProblem(p.in, evs, p.head, stored, anchors)
	}
	auditDamage, err := p.runAuditDamage(ctx, tx)
	if err != nil {
		return nil, err
	}
	if err := p.runs(ctx, tx, auditDamage); err != nil {
		return nil, err
	}
	// Events about no run, or about a run whose row is gone.
	for _, id := range slices.Sorted(maps.Keys(auditDamage)) {
		p.rep.Damaged = append(p.rep.Damaged, &record.IntegrityError{RunID: id, Problem: auditDamage[id]})
	}
	return p.rep, nil
}

// pass is one Verify: what it has read so far, and the report it fills.
type pass struct {
	v *Verifier
	// in checks the seals: the verifier's sealer, or, when the store's head
	// is sealed with a key not given, one without keys (the chains only).
	in          *seal.Sealer
	head        *record.IntegrityHead
	rep         *Report
	transitions map[string]string // run/seq → checkpoint hash, from the audit log
	byRun       map[string][]*record.AuditEvent
}

// readHead reads the store's sealed head. A head sealed with a key not
// given checks no seal at all, and a damaged head is the audit log's
// problem, not an error.
func (p *pass) readHead(ctx context.Context, tx storage.Tx) error {
	if id, err := p.in.ForeignHeadKey(ctx, tx); err != nil {
		return err
	} else if id != "" {
		p.rep.KeyNotGiven, p.rep.Unverified = id, true
		p.in = seal.New(nil) // checks the chains only, as without keys
	}
	head, err := p.in.Head(ctx, tx)
	var ie *record.IntegrityError
	switch {
	case errors.As(err, &ie):
		p.rep.AuditProblem = ie.Problem
	case err != nil:
		return err
	case head != nil:
		p.rep.Keyed, p.rep.KeyedSince = true, &head.KeyedSince
	}
	p.head = head
	return nil
}

// index counts the audit log's events and sorts them by run, with the
// checkpoint each transition names.
func (p *pass) index(evs []*record.AuditEvent) {
	p.rep.AuditEvents = len(evs)
	p.transitions = map[string]string{}
	p.byRun = map[string][]*record.AuditEvent{}
	for _, ev := range evs {
		if ev.CheckpointSeq != 0 {
			p.transitions[ev.RunID+"/"+strconv.FormatInt(ev.CheckpointSeq, 10)] = ev.CheckpointHash
		}
		p.byRun[ev.RunID] = append(p.byRun[ev.RunID], ev)
		if ev.MAC == "" {
			p.rep.Unkeyed++
		}
	}
}

// runAuditDamage checks each run's audit chain against its head, by run: a
// problem is the run's damage.
func (p *pass) runAuditDamage(ctx context.Context, tx storage.Tx) (map[string]string, error) {
	heads, err := tx.AuditRunHeads(ctx)
	if err != nil {
		return nil, fmt.Errorf("read audit heads: %w", err)
	}
	headOf := map[string]*record.AuditRunHead{}
	for _, h := range heads {
		headOf[h.RunID] = h
		if _, ok := p.byRun[h.RunID]; !ok {
			p.byRun[h.RunID] = nil
		}
	}
	damage := map[string]string{}
	for id, revs := range p.byRun {
		if problem := p.in.RunAuditProblem(p.head, id, revs, headOf[id]); problem != "" {
			damage[id] = problem
		}
	}
	return damage, nil
}

// runs checks every run, a page at a time, each with the damage of its
// audit chain (taken out of auditDamage) when the rest of it is intact.
func (p *pass) runs(ctx context.Context, tx storage.Tx, auditDamage map[string]string) error {
	f := storage.RunFilter{Limit: 500}
	for {
		runs, err := tx.ListRuns(ctx, f)
		if err != nil {
			return fmt.Errorf("list runs: %w", err)
		}
		for _, r := range runs {
			p.rep.Runs++
			d, err := p.run(ctx, tx, r)
			if err != nil {
				return err
			}
			if problem, ok := auditDamage[r.ID]; ok && d == nil {
				d = &record.IntegrityError{RunID: r.ID, Problem: problem}
			}
			delete(auditDamage, r.ID)
			if d != nil {
				p.rep.Damaged = append(p.rep.Damaged, d)
			}
		}
		if len(runs) < f.Limit {
			return nil
		}
		last := runs[len(runs)-1]
		f.AfterCreated, f.AfterID = last.CreatedAt, last.ID
	}
}

// rows are a run's records that carry a seal.
type rows struct {
	cps  []*record.Checkpoint
	reqs []*record.ApprovalRequest
	decs []*record.Decision
	ops  []*record.Operation
}

func readRows(ctx context.Context, tx storage.Tx, id string) (*rows, error) {
	var rs rows
	var err error
	if rs.cps, err = tx.Checkpoints(ctx, id); err != nil {
		return nil, fmt.Errorf("load checkpoints of run %s: %w", id, err)
	}
	if rs.reqs, err = tx.RequestsForRun(ctx, id); err != nil {
		return nil, fmt.Errorf("load requests of run %s: %w", id, err)
	}
	if rs.decs, err = tx.Decisions(ctx, id); err != nil {
		return nil, fmt.Errorf("load decisions of run %s: %w", id, err)
	}
	if rs.ops, err = tx.Operations(ctx, id); err != nil {
		return nil, fmt.Errorf("load operations of run %s: %w", id, err)
	}
	return &rs, nil
}

// run checks one run: its chain, the seals of all its rows (with p.in's
// keys), and that each sealed checkpoint has the audit event of its transition.
func (p *pass) run(ctx context.Context, tx storage.Tx, r *record.Run) (*record.IntegrityError, error) {
	rs, err := readRows(ctx, tx, r.ID)
	if err != nil {
		return nil, err
	}
	p.rep.Checkpoints += len(rs.cps)
	_, unsealed := seal.Counts(rs.cps, rs.reqs, rs.decs, rs.ops)
	p.rep.Unkeyed += unsealed
	var ie *record.IntegrityError
	st, _, err := chain.Verify(r.ID, rs.cps)
	if errors.As(err, &ie) {
		return ie, nil
	}
	if st != nil && st.Pruned != nil {
		p.rep.Pruned++
	}
	if d := p.rowDamage(r, st); d != nil {
		return d, nil
	}
	if err := p.in.CheckRun(ctx, tx, r.ID, rs.cps, rs.reqs, rs.decs, rs.ops); errors.As(err, &ie) {
		return ie, nil
	} else if err != nil {
		return nil, err
	}
	if int64(len(rs.cps)) != r.Seq {
		return &record.IntegrityError{RunID: r.ID, Problem: fmt.Sprintf("run row says checkpoint %d but the chain ends at %d", r.Seq, len(rs.cps))}, nil
	}
	return p.missingTransition(r.ID, rs.cps), nil
}

// rowDamage says how run row r disagrees with its sealed state st (nil when
// its chain did not verify), or returns nil. The run row is not sealed; what
// in it decides anything must agree with the sealed checkpoint, as the
// engine insists when it loads the run.
func (p *pass) rowDamage(r *record.Run, st *record.State) *record.IntegrityError {
	rowP := ""
	if st != nil {
		rowP = p.v.RowProblem(r, st)
	}
	switch {
	case st != nil && st.Status != r.Status && r.Status != record.StatusNeedsAttention:
		return &record.IntegrityError{RunID: r.ID, Problem: fmt.Sprintf("run row says %s but its checkpoint says %s", r.Status, st.Status)}
	case st != nil && st.Gate != nil && r.Fingerprint != "" && r.Fingerprint != st.Gate.Fingerprint:
		return &record.IntegrityError{RunID: r.ID, Problem: "the run row's fingerprint is not the one its checkpoint approved"}
	case rowP != "":
		return &record.IntegrityError{RunID: r.ID, Problem: rowP}
	}
	return nil
}

// missingTransition names, in a keyed store, the first sealed checkpoint of
// a run whose transition has no audit event, or returns nil.
func (p *pass) missingTransition(runID string, cps []*record.Checkpoint) *record.IntegrityError {
	if !p.in.Keyed() || p.head == nil {
		return nil
	}
	for _, c := range cps {
		if c.MAC == "" {
			continue // written before the store was keyed, when events named no checkpoint
		}
		if h, ok := p.transitions[runID+"/"+strconv.FormatInt(c.Seq, 10)]; !ok || h != c.Hash {
			return &record.IntegrityError{RunID: runID, Seq: c.Seq, Problem: fmt.Sprintf("checkpoint %d has no audit event of its transition: the audit log was cut or edited", c.Seq)}
		}
	}
	return nil
}
