package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// unpostedOf is the one pending request without a message of run id.
func unpostedOf(t *testing.T, o *workflow.Outbox, id string) *record.ApprovalRequest {
	t.Helper()
	reqs, err := o.Unposted(context.Background(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 || reqs[0].RunID != id {
		t.Fatalf("unposted requests of %s: %+v, want its one pending request", id, reqs)
	}
	return reqs[0]
}

func postOf(req *record.ApprovalRequest) *record.OutboxMessage {
	return &record.OutboxMessage{RunID: req.RunID, Kind: "slack.post", Payload: []byte(req.ID)}
}

func isPostOf(req *record.ApprovalRequest) func(*record.OutboxMessage) bool {
	return func(m *record.OutboxMessage) bool { return string(m.Payload) == req.ID }
}

// TestQueuePostOnce: the post of a waiting run's request is queued once; not
// again while it is queued, not once the request has a message, and not for
// a request decided since it was found.
func TestQueuePostOnce(t *testing.T) {
	env := sqliteTamperEnv(t)
	h, ctx := env.h, context.Background()
	o := h.engine.Outbox()
	run := h.submit(refund("PAY-1", 119))
	req := unpostedOf(t, o, run.ID)
	for i, want := range []bool{true, false} {
		ok, err := o.QueuePost(ctx, req, postOf(req), isPostOf(req))
		if err != nil || ok != want {
			t.Fatalf("QueuePost #%d = %v, %v; want %v", i+1, ok, err, want)
		}
	}
	if ms, err := o.List(ctx, storage.OutboxFilter{Kinds: []record.OutboxKind{"slack.post"}}); err != nil || len(ms) != 1 {
		t.Fatalf("queued posts %+v (%v), want one", ms, err)
	}

	posted := h.submit(refund("PAY-1", 119))
	req = unpostedOf(t, o, posted.ID)
	if err := o.Posted(ctx, &record.MessageLocation{RequestID: req.ID, RunID: posted.ID, Channel: "C1", TS: "1.2", PostedAt: h.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if reqs, err := o.Unposted(ctx, []string{posted.ID}); err != nil || len(reqs) != 0 {
		t.Fatalf("unposted requests of a posted run: %+v (%v)", reqs, err)
	}
	if ok, err := o.QueuePost(ctx, req, postOf(req), isPostOf(req)); err != nil || ok {
		t.Fatalf("QueuePost of a posted request = %v, %v; want false", ok, err)
	}

	decided := h.submit(refund("PAY-1", 119))
	req = unpostedOf(t, o, decided.ID)
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: decided.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictReject, Reason: "no", Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	if ok, err := o.QueuePost(ctx, req, postOf(req), isPostOf(req)); err != nil || ok {
		t.Fatalf("QueuePost of a decided request = %v, %v; want false", ok, err)
	}
}

// TestQueuePostChecksSeals: a request whose row was changed behind the
// engine's back is not put to anyone: its post is refused with the
// integrity error, and the run is put in needs_attention, as the engine
// does with every damaged run it meets.
func TestQueuePostChecksSeals(t *testing.T) {
	env := sqliteTamperEnv(t)
	h, ctx := env.h, context.Background()
	o := h.engine.Outbox()
	run := h.submit(refund("PAY-1", 119))
	req := unpostedOf(t, o, run.ID)
	env.exec(`UPDATE approval_requests SET role = 'agent' WHERE run_id = ?`, run.ID)
	ok, err := o.QueuePost(ctx, req, postOf(req), isPostOf(req))
	var ie *workflow.IntegrityError
	if ok || !errors.As(err, &ie) {
		t.Fatalf("QueuePost of a forged request = %v, %v; want an integrity error", ok, err)
	}
	if ms, err := o.List(ctx, storage.OutboxFilter{}); err != nil || len(ms) != 0 {
		t.Fatalf("outbox %+v (%v), want nothing queued", ms, err)
	}
	if v := h.get(run.ID); v.Status != record.StatusNeedsAttention {
		t.Fatalf("run is %s, want needs_attention", v.Status)
	}
}

// TestReplaysAnswerCopies: a request claimed once is not claimed again; the
// copy gets the first one's answer once it is recorded, and the claim is
// forgotten once its window has passed.
func TestReplaysAnswerCopies(t *testing.T) {
	h := newHarness(t)
	ctx, p := context.Background(), h.engine.Replays()
	now := h.clock.Now()
	r := &record.SeenRequest{Digest: "d1", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}
	first, claimed, err := p.Claim(ctx, r)
	if err != nil || !claimed || first.Digest != "d1" {
		t.Fatalf("first claim = %+v, %v, %v", first, claimed, err)
	}
	a := *first
	a.AnsweredAt, a.Status, a.ContentType, a.Body = now, 200, "text/plain", []byte("ok")
	if err := p.Answer(ctx, &a); err != nil {
		t.Fatal(err)
	}
	copied, claimed, err := p.Claim(ctx, &record.SeenRequest{Digest: "d1", CreatedAt: now, ExpiresAt: now.Add(time.Minute)})
	if err != nil || claimed || !copied.Answered() || string(copied.Body) != "ok" {
		t.Fatalf("claim of a copy = %+v, %v, %v; want the first answer", copied, claimed, err)
	}
	if n, err := p.Forget(ctx, now, 0); err != nil || n != 0 {
		t.Fatalf("Forget within the window = %d, %v", n, err)
	}
	if n, err := p.Forget(ctx, now.Add(time.Minute), 0); err != nil || n != 1 {
		t.Fatalf("Forget past the window = %d, %v", n, err)
	}
}
