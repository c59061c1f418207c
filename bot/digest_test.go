package bot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

func paris(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestNextDigest: the next occurrence is the local time in the zone, so a
// day of a clock change is 23 or 25 hours long; a time the clocks jump over
// comes as far past the jump, and a time that occurs twice comes once, the
// first time.
func TestNextDigest(t *testing.T) {
	loc := paris(t)
	utc := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, time.UTC) }
	for _, tt := range []struct {
		name         string
		after        time.Time
		hour, minute int
		want         time.Time
	}{
		{"a winter day", utc(2026, 12, 1, 7, 0), 9, 0, utc(2026, 12, 1, 8, 0)},
		{"at the time itself: the next day", utc(2026, 12, 1, 8, 0), 9, 0, utc(2026, 12, 2, 8, 0)},
		{"clocks go forward in the night (23-hour day)", utc(2026, 3, 28, 9, 0), 9, 0, utc(2026, 3, 29, 7, 0)},
		{"clocks go back in the night (25-hour day)", utc(2026, 10, 24, 8, 0), 9, 0, utc(2026, 10, 25, 8, 0)},
		{"02:30 does not exist on the last Sunday of March", utc(2026, 3, 28, 23, 0), 2, 30, utc(2026, 3, 29, 1, 30)},
		{"02:30 occurs twice on the last Sunday of October: the first", utc(2026, 10, 24, 23, 0), 2, 30, utc(2026, 10, 25, 0, 30)},
		{"and not again the second time", utc(2026, 10, 25, 0, 30), 2, 30, utc(2026, 10, 26, 1, 30)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := bot.NextDigest(tt.after, tt.hour, tt.minute, loc); !got.Equal(tt.want) {
				t.Errorf("NextDigest(%s) = %s (%s), want %s", tt.after, got.UTC(), got, tt.want)
			}
		})
	}
}

// TestDigestDueOnceADay: the digest of a local date is due from its time to
// the end of that date, so that a time that occurs twice names one date.
func TestDigestDueOnceADay(t *testing.T) {
	g := &bot.Digest{Hour: 2, Minute: 30, Location: paris(t)}
	for _, tt := range []struct {
		at   time.Time
		date string
		due  bool
	}{
		{time.Date(2026, 10, 25, 0, 29, 0, 0, time.UTC), "2026-10-25", false},
		{time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), "2026-10-25", true},
		{time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC), "2026-10-25", true}, // 02:30 again: the same day's digest
		{time.Date(2026, 10, 25, 22, 59, 0, 0, time.UTC), "2026-10-25", true},
		{time.Date(2026, 10, 25, 23, 0, 0, 0, time.UTC), "2026-10-26", false}, // midnight in Paris
	} {
		if date, due := g.Due(tt.at); date != tt.date || due != tt.due {
			t.Errorf("Due(%s) = %s, %v; want %s, %v", tt.at, date, due, tt.date, tt.due)
		}
	}
}

// digestAt is a channel's 09:00 Paris digest on h's engine, reading clock: a
// new one is a server started again, with nothing in memory.
func digestAt(h *dispatchHarness, clock workflow.Clock, loc *time.Location) *bot.Digest {
	return &bot.Digest{Engine: h.engine, Channel: "C0DIGEST", Hour: 9, Minute: 0, Location: loc, Clock: clock}
}

func digestPosts(fs *fakeslack.Server) []fakeslack.Message {
	var ms []fakeslack.Message
	for _, m := range fs.Messages() {
		if m.Channel == "C0DIGEST" {
			ms = append(ms, m)
		}
	}
	return ms
}

// round runs one round of g and has the dispatcher, its clock set to g's,
// deliver what is due.
func round(t *testing.T, h *dispatchHarness, g *bot.Digest) int {
	t.Helper()
	if err := g.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.clock.now = g.Clock.Now().UTC()
	return h.deliver(t)
}

func TestDigestPostsNothingWhenNothingWaits(t *testing.T) {
	h := newDispatchHarness(t)
	loc := paris(t)
	clock := clocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, loc))
	round(t, h, digestAt(h, clock, loc))
	if ms := digestPosts(h.slack); len(ms) != 0 {
		t.Fatalf("posted %+v with nothing waiting", ms)
	}
	rows, err := h.engine.Outbox().Keyed(context.Background(), bot.DigestKey("C0DIGEST", "2026-12-01"))
	if err != nil || len(rows) != 0 {
		t.Fatalf("queued %d digest rows (%v), want none", len(rows), err)
	}
}

// TestDigestListsTheWaitingRunsOncePerDay: one post, the runs oldest first
// with a link to each one's message; a server started again the same day
// posts nothing more, and the next day has its own digest.
func TestDigestListsTheWaitingRunsOncePerDay(t *testing.T) {
	h := newDispatchHarness(t)
	loc := paris(t)
	older := h.submitWith(t, h.engine, "first")
	h.clock.now = h.clock.now.Add(time.Hour)
	newer := h.submitWith(t, h.engine, "second")
	h.deliver(t) // both approval messages are posted
	var olderTS string
	for _, m := range h.slack.Messages() {
		if strings.Contains(m.Text, older.ID) {
			olderTS = m.TS
		}
	}
	if olderTS == "" {
		t.Fatalf("no approval message of %s in %+v", older.ID, h.slack.Messages())
	}

	clock := clocktest.New(time.Date(2026, 12, 1, 8, 59, 0, 0, loc))
	g := digestAt(h, clock, loc)
	round(t, h, g)
	if ms := digestPosts(h.slack); len(ms) != 0 {
		t.Fatalf("posted before 09:00: %+v", ms)
	}
	clock.Set(time.Date(2026, 12, 1, 9, 0, 0, 0, loc))
	n := round(t, h, g)
	if n += round(t, h, g); n != 1 {
		t.Fatalf("delivered %d rows, want the digest", n)
	}
	ms := digestPosts(h.slack)
	if len(ms) != 1 {
		t.Fatalf("digest posts %+v, want one", ms)
	}
	b := ms[0].Blocks
	i, j := strings.Index(b, older.ID), strings.Index(b, newer.ID)
	if i < 0 || j < 0 || i > j {
		t.Errorf("the digest does not list %s then %s: %s", older.ID, newer.ID, b)
	}
	for _, want := range []string{bot.Permalink("C0APPROVALS", olderTS), "rule ", "waiting 23h 0m", "2 run(s) waiting"} {
		if !strings.Contains(b+ms[0].Text, want) {
			t.Errorf("the digest lacks %q: %s", want, b)
		}
	}

	// The same day, a server started again: nothing more.
	clock.Set(time.Date(2026, 12, 1, 17, 0, 0, 0, loc))
	round(t, h, digestAt(h, clock, loc))
	if ms := digestPosts(h.slack); len(ms) != 1 {
		t.Fatalf("digest posts after a restart the same day %+v, want still one", ms)
	}
	// The next day, the same server: a digest of its own.
	clock.Set(time.Date(2026, 12, 2, 9, 0, 0, 0, loc))
	round(t, h, g)
	if ms := digestPosts(h.slack); len(ms) != 2 {
		t.Fatalf("digest posts the next day %+v, want two", ms)
	}
}

// TestDigestDueDuringDowntimeIsPostedOnceAfter: a server down at 09:00 posts
// the day's digest when it comes back that day, once; a day it was down past
// midnight is not posted late.
func TestDigestDueDuringDowntimeIsPostedOnceAfter(t *testing.T) {
	h := newDispatchHarness(t)
	loc := paris(t)
	h.submitRefund(t)
	clock := clocktest.New(time.Date(2026, 12, 1, 8, 0, 0, 0, loc))
	round(t, h, digestAt(h, clock, loc)) // then the server stops
	clock.Set(time.Date(2026, 12, 1, 11, 30, 0, 0, loc))
	back := digestAt(h, clock, loc)
	round(t, h, back)
	round(t, h, back)
	if ms := digestPosts(h.slack); len(ms) != 1 {
		t.Fatalf("digest posts %+v, want one after the downtime", ms)
	}
	// Down from the 1st's evening to the 3rd at 08:00: the 2nd's is not sent.
	clock.Set(time.Date(2026, 12, 3, 8, 0, 0, 0, loc))
	round(t, h, digestAt(h, clock, loc))
	if ms := digestPosts(h.slack); len(ms) != 1 {
		t.Fatalf("digest posts %+v, want no late digest of a past day", ms)
	}
	rows, err := h.engine.Outbox().Keyed(context.Background(), bot.DigestKey("C0DIGEST", "2026-12-02"))
	if err != nil || len(rows) != 0 {
		t.Fatalf("queued %d digests of the 2nd (%v), want none", len(rows), err)
	}
}

// TestDigestQueuedTwiceIsPostedOnce: two servers that queued the same
// digest at once (PostgreSQL lets both commit) still post it once.
func TestDigestQueuedTwiceIsPostedOnce(t *testing.T) {
	h := newDispatchHarness(t)
	key := bot.DigestKey("C0DIGEST", "2026-12-01")
	body, err := json.Marshal(bot.DigestPayload{Channel: "C0DIGEST", Date: "2026-12-01", Text: "1 run(s) waiting", Blocks: json.RawMessage(`[]`)})
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func() {
		err := h.store.Update(context.Background(), func(ctx context.Context, tx storage.Tx) error {
			return tx.EnqueueOutbox(ctx, &record.OutboxMessage{RunID: key, Kind: bot.KindDigest, Payload: body, NextAttempt: h.clock.now, CreatedAt: h.clock.now})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	enqueue()
	enqueue()
	h.deliver(t)
	enqueue() // one that committed after the first was delivered
	h.deliver(t)
	if ms := digestPosts(h.slack); len(ms) != 1 {
		t.Fatalf("digest posts %+v, want one", ms)
	}
}

// TestRenderDigestCapsTheList: past the runs shown, the rest are counted,
// within Slack's 50 blocks.
func TestRenderDigestCapsTheList(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	var views []*workflow.RunView
	for i := range 20 {
		views = append(views, &workflow.RunView{ID: fmt.Sprintf("run-%02d", i), Status: record.StatusWaitingApproval, CreatedAt: now.Add(-time.Duration(30-i) * time.Hour),
			Gate:     &record.Gate{Rule: "refunds", RequestID: "req", Assignee: "U0LEAD0001"},
			Requests: []workflow.RequestView{{ID: "req", Status: record.RequestPending, Role: "team_lead", Count: 2}}})
	}
	blocks, text := bot.RenderDigest(views, 27, now)
	if len(blocks) != 22 || len(blocks) > 50 {
		t.Fatalf("%d blocks, want a heading, 20 runs and the rest", len(blocks))
	}
	b, err := json.Marshal(slack.Blocks{BlockSet: blocks})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"27 run(s) waiting", "and 7 more", "1d 6h", "2 × team_lead", "\\u003c@U0LEAD0001\\u003e", "rule `refunds`"} {
		if !strings.Contains(string(b)+text, want) {
			t.Errorf("the digest lacks %q: %s", want, b)
		}
	}
}
