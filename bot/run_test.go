package bot_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/workflow"
)

// runLoops runs the dispatcher's loops that names name (all without names),
// each on a hand pace, until the test ends, and returns the paces by loop
// name once the rounds at start have ended.
func runLoops(t *testing.T, d *bot.Dispatcher, changes *storage.Changes, names ...string) map[string]*clocktest.Pace {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	paces := map[string]*clocktest.Pace{}
	done := make(chan struct{})
	started := 0
	for _, l := range d.Loops(changes, time.Hour) {
		l.Pace.Stop()
		if len(names) > 0 && !slices.Contains(names, l.Name) {
			continue
		}
		p := clocktest.NewPace()
		l.Pace, paces[l.Name] = p, p
		started++
		go func() {
			defer func() { done <- struct{}{} }()
			l.Run(ctx)
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range started {
			<-done
		}
	})
	for _, p := range paces {
		p.RoundEnded(t)
	}
	return paces
}

const (
	deliverLoop = "deliver slack messages"
	repostLoop  = "post waiting runs without a message"
	forgetLoop  = "forget slack requests past their window"
)

// TestDispatcherLoopsDeliverWhenARunChanges: a run that starts waiting has
// its approval message posted by the delivery loop at once, woken by the
// commit, without its pace coming round; and rewritten when it is decided.
func TestDispatcherLoopsDeliverWhenARunChanges(t *testing.T) {
	h := newDispatchHarness(t)
	paces := runLoops(t, h.disp, h.engine.Changes())
	if len(paces) != 3 {
		t.Fatalf("loops %v, want delivery, repost and forget", paces)
	}
	run := h.submitRefund(t)
	paces[deliverLoop].RoundsUntil(t, "the approval message", func() bool { return len(h.slack.Messages()) == 1 })
	if msgs := h.slack.Messages(); !strings.Contains(msgs[0].Text, run.ID) {
		t.Fatalf("messages %+v, want the approval message of the run", msgs)
	}
	ctx := context.Background()
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"},
		Verdict: record.VerdictReject, Reason: "not this one", Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	paces[deliverLoop].RoundsUntil(t, "the rewrite", func() bool {
		msgs := h.slack.Messages()
		return len(msgs) == 1 && msgs[0].Updates > 0 && strings.Contains(msgs[0].Text, "rejected")
	})
	if msgs := h.slack.Messages(); len(msgs) != 1 {
		t.Fatalf("messages %+v, want the one approval message", msgs)
	}
}

// TestDispatcherLoopsPostARunThatWaitedWithoutSlack: a run that started
// waiting in a process without a slack section gets its post queued by the
// repost loop at start and delivered at the delivery loop's next tick (the
// repost commits no run: no change wakes the delivery loop).
func TestDispatcherLoopsPostARunThatWaitedWithoutSlack(t *testing.T) {
	h := newDispatchHarness(t)
	run := h.submitWith(t, h.noSlack, "before-slack")
	paces := runLoops(t, h.disp, h.engine.Changes(), deliverLoop)
	runLoops(t, h.disp, h.engine.Changes(), repostLoop)
	if msgs := h.slack.Messages(); len(msgs) != 0 {
		t.Fatalf("messages %+v before the delivery loop's tick", msgs)
	}
	paces[deliverLoop].Tick(t)
	paces[deliverLoop].RoundEnded(t)
	if msgs := h.slack.Messages(); len(msgs) != 1 || !strings.Contains(msgs[0].Text, run.ID) {
		t.Fatalf("messages %+v, want the approval message of the run", msgs)
	}
}

// TestDispatcherLoopsForgetRequestsPastTheirWindow: the forget loop keeps a
// Slack request inside its replay window and forgets it at the first tick
// after, by the dispatcher's clock.
func TestDispatcherLoopsForgetRequestsPastTheirWindow(t *testing.T) {
	h := newDispatchHarness(t)
	ctx := context.Background()
	claim := func() bool {
		t.Helper()
		var claimed bool
		err := h.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
			var err error
			_, claimed, err = tx.ClaimRequest(ctx, &record.SeenRequest{Digest: "d1", CreatedAt: h.clock.now, ExpiresAt: h.clock.now.Add(time.Hour)})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return claimed
	}
	if !claim() {
		t.Fatal("a new request was not claimed")
	}
	paces := runLoops(t, h.disp, h.engine.Changes())
	if claim() {
		t.Fatal("the request was forgotten inside its window")
	}
	h.clock.now = h.clock.now.Add(2 * time.Hour)
	paces[forgetLoop].Tick(t)
	paces[forgetLoop].RoundEnded(t)
	if !claim() {
		t.Fatal("the request was not forgotten at the tick after its window")
	}
}
