package workflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
	"github.com/signoff-dev/signoff/workflow/internal/chain"
)

// bulkyRefund is a refund with about 2 KB of evidence.
func bulkyRefund(payment string, amount float64) *workflow.Proposal {
	p := refund(payment, amount)
	p.Evidence[0].Data = json.RawMessage(`{"payments":[{"id":"PAY-1","status":"captured"}],"note":"` + strings.Repeat("e", 2000) + `"}`)
	return p
}

func checkpointsOf(t *testing.T, h *harness, id string) []*record.Checkpoint {
	t.Helper()
	var cps []*record.Checkpoint
	if err := h.engine.Store().View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		cps, err = tx.Checkpoints(ctx, id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return cps
}

// TestEvidenceIsStoredOnce: a gated run, submitted, approved and executed,
// stores its 2 KB of evidence in one checkpoint; every later one holds what
// changed, and each still reads back as the whole state, in show and in
// history alike.
func TestEvidenceIsStoredOnce(t *testing.T) {
	h := newHarness(t)
	run := h.submit(bulkyRefund("PAY-1", 119))
	if got, err := h.approve(run.ID, "U0LEAD0001"); err != nil || got.Status != record.StatusDone {
		t.Fatalf("approve: %v %v", got, err)
	}
	cps := checkpointsOf(t, h, run.ID)
	if len(cps) < 3 {
		t.Fatalf("%d checkpoints, want the submit, the decision and the execution", len(cps))
	}
	note := []byte(strings.Repeat("e", 2000))
	holding, stored := 0, 0
	for _, c := range cps {
		stored += len(c.State)
		if bytes.Contains(c.State, note) {
			holding++
		}
		if c.Seq > 1 && (c.BaseSeq != 1 || len(c.State) > 600) {
			t.Errorf("checkpoint %d: base %d, %d bytes; want the changes since checkpoint 1", c.Seq, c.BaseSeq, len(c.State))
		}
	}
	if holding != 1 {
		t.Fatalf("the evidence is stored in %d checkpoints, want 1", holding)
	}
	t.Logf("%d checkpoints, %d bytes of state", len(cps), stored)

	v := h.get(run.ID)
	if v.Status != record.StatusDone || len(v.Evidence) != 1 || !bytes.Contains(v.Evidence[0].Data, note) || len(v.Decisions) != 1 || len(v.Operations) != 1 {
		t.Fatalf("show: %+v", v)
	}
	hist, err := h.engine.History(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range hist {
		if e.Problem != "" || e.State == nil || len(e.State.Evidence) != 1 || e.State.Summary != "refund" || e.State.Status != statusAt(cps, e.Seq) {
			t.Fatalf("history, checkpoint %d: %+v", e.Seq, e)
		}
	}
	if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	list, err := h.engine.ListViews(ctx, storage.RunFilter{})
	if err != nil || len(list) != 1 || list[0].Problem != "" || len(list[0].Evidence) != 1 || list[0].Status != record.StatusDone {
		t.Fatalf("list: %+v %v", list, err)
	}
}

// statusAt is the status checkpoint seq holds, resolved.
func statusAt(cps []*record.Checkpoint, seq int64) record.Status {
	b, err := chain.Resolve(cps, int(seq-1))
	if err != nil {
		return ""
	}
	st, err := chain.Decode(b)
	if err != nil {
		return ""
	}
	return st.Status
}

// TestOldCheckpointsStillLoad: a store whose checkpoints were all written as
// whole states of schema version 1, as builds before bases wrote them, by a
// run that crashed after recording its intent. It verifies, the run resumes
// and finishes (the target called once), and the checkpoints written since
// are written against the old whole state.
func TestOldCheckpointsStillLoad(t *testing.T) {
	h := newHarness(t, crashAt("after-intent"))
	run := h.submit(bulkyRefund("PAY-1", 119))
	if !survive(t, func() { _, _ = h.approve(run.ID, "U0LEAD0001") }) {
		t.Fatal("failpoint after-intent never fired")
	}
	old := checkpointsOf(t, h, run.ID)
	writeVersion1(t, h, run.ID)
	h.open(testPolicy(t, "rev-1", h.roles))
	if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify the old store: %+v %v", rep, err)
	}
	got, err := h.engine.Resume(ctx, run.ID)
	if err != nil || got.Status != record.StatusDone {
		t.Fatalf("resume: %v %v", got, err)
	}
	if h.target.calls != 1 {
		t.Fatalf("the target was called %d times, want once", h.target.calls)
	}
	cps := checkpointsOf(t, h, run.ID)
	for _, c := range cps {
		switch {
		case c.Seq <= int64(len(old)) && (c.SchemaVersion != 1 || c.BaseSeq != 0):
			t.Fatalf("old checkpoint %d was rewritten: version %d, base %d", c.Seq, c.SchemaVersion, c.BaseSeq)
		case c.Seq > int64(len(old)) && (c.SchemaVersion != record.SchemaVersion || c.BaseSeq != int64(len(old))):
			t.Fatalf("new checkpoint %d: version %d, base %d; want version %d against old checkpoint %d", c.Seq, c.SchemaVersion, c.BaseSeq, record.SchemaVersion, len(old))
		}
	}
	if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify after the run finished: %+v %v", rep, err)
	}
	if v := h.get(run.ID); v.Problem != "" || len(v.Evidence) != 1 || len(v.Operations) != 1 || v.Operations[0].Status != record.OpCommitted {
		t.Fatalf("show: %+v", v)
	}
}

// writeVersion1 rewrites a run's checkpoints as whole states of schema
// version 1 without a base, recomputing both hash chains: what a store
// written before bases holds.
func writeVersion1(t *testing.T, h *harness, id string) {
	t.Helper()
	cps := checkpointsOf(t, h, id)
	db, err := sqlite.OpenDB(h.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	prev, renamed := "", map[string]string{}
	whole := make([][]byte, len(cps))
	for i := range cps {
		if whole[i], err = chain.Resolve(cps, i); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cps {
		st, err := chain.Decode(whole[i])
		if err != nil {
			t.Fatal(err)
		}
		st.SchemaVersion = 1
		if c.State, err = chain.Encode(st); err != nil {
			t.Fatal(err)
		}
		old := c.Hash
		c.SchemaVersion, c.BaseSeq, c.PrevHash = 1, 0, prev
		c.Hash = record.CheckpointHash(c)
		renamed[old], prev = c.Hash, c.Hash
		exec(`UPDATE checkpoints SET schema_version = 1, base_seq = 0, state = ?, prev_hash = ?, hash = ? WHERE run_id = ? AND seq = ?`,
			c.State, c.PrevHash, c.Hash, c.RunID, c.Seq)
	}
	// The audit events name the checkpoints by hash: their chains (each
	// run's, and the run's head) are recomputed too.
	last := map[string]*record.AuditEvent{}
	if err := sqlite.EditAuditEvents(ctx, db, func(ev *record.AuditEvent) bool {
		if h, ok := renamed[ev.CheckpointHash]; ok {
			ev.CheckpointHash = h
		}
		ev.PrevHash = ""
		if p := last[ev.RunID]; p != nil {
			ev.PrevHash = p.Hash
		}
		ev.Hash = record.AuditHash(ev)
		e := *ev
		last[ev.RunID] = &e
		return true
	}); err != nil {
		t.Fatal(err)
	}
	for run, ev := range last {
		exec(`UPDATE runs SET audit_hash = ? WHERE id = ? AND audit_seq = ?`, ev.Hash, run, ev.Seq)
		exec(`UPDATE audit_heads SET hash = ? WHERE run_id = ? AND seq = ?`, ev.Hash, run, ev.Seq)
	}
}

// chattyAgent adds a message of about 500 bytes at each step and proposes
// after steps steps.
type chattyAgent struct{ steps int }

func (a chattyAgent) Step(_ context.Context, st *record.State) (bool, error) {
	st.ModelCalls++
	st.Messages = append(st.Messages, record.Message{Role: "assistant", Content: fmt.Sprintf("step %d: %s", st.Step+1, strings.Repeat("m", 500))})
	if st.Step+1 < a.steps {
		return false, nil
	}
	st.Actions = []record.Action{{Name: "request_refund", Args: json.RawMessage(`{"payment_id":"PAY-1","amount":119}`)}}
	return true, nil
}

// TestMessagesAreStoredOnce: an agent that adds a message at each of 40
// steps. Each checkpoint stores the messages added since its base, not the
// whole list again: the run stores under 8 times its last state (with the
// whole list in every checkpoint, 20 times). History still shows every
// step's whole list.
func TestMessagesAreStoredOnce(t *testing.T) {
	const steps = 40
	h := newHarness(t, func(c *workflow.Config) { c.Agents = map[string]workflow.Agent{"chatty": chattyAgent{steps}} })
	run, err := h.engine.Start(ctx, "chatty", "T-1", record.Person{ID: "agent:resolver"})
	if err != nil || run.Status != record.StatusWaitingApproval {
		t.Fatalf("start: %v %v", run, err)
	}
	cps := checkpointsOf(t, h, run.ID)
	last, err := chain.Resolve(cps, len(cps)-1)
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, c := range cps {
		stored += len(c.State)
	}
	t.Logf("%d checkpoints, %d bytes stored, the last state %d bytes", len(cps), stored, len(last))
	if stored > 8*len(last) {
		t.Fatalf("%d bytes stored for a last state of %d: the messages are stored again and again", stored, len(last))
	}
	hist, err := h.engine.History(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range hist {
		if e.Problem != "" || e.State == nil || len(e.State.Messages) != min(e.State.Step, steps) {
			t.Fatalf("history, checkpoint %d: step %v, problem %q", e.Seq, e.State, e.Problem)
		}
		for i, m := range e.State.Messages {
			if !strings.HasPrefix(m.Content, fmt.Sprintf("step %d: ", i+1)) {
				t.Fatalf("history, checkpoint %d, message %d: %.20q", e.Seq, i, m.Content)
			}
		}
	}
	if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
