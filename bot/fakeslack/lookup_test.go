package fakeslack_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
)

// TestLookupsFindAPostByItsKey: a post whose answer was lost (LoseNext) is
// in the fake, and the bot's client finds it by the key in its metadata:
// in a channel's history (past a page), in a thread's replies, in the
// direct message channel with a user; a key never posted, or a post older
// than the lookup's since, is not found.
func TestLookupsFindAPostByItsKey(t *testing.T) {
	ctx := context.Background()
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	api := bot.NewAPI("xoxb-any", fs.URL(), 5*time.Second)
	start := time.Now().Add(-time.Hour)

	fs.LoseNext("chat.postMessage")
	if _, _, err := api.PostKeyed(ctx, "C0APPROVALS", "", "1", nil, "parent"); err == nil {
		t.Fatal("a lost answer came back")
	}
	parent := fs.Posts()[0].TS
	for i := range 250 { // more than a page of history after it
		if _, _, err := api.PostKeyed(ctx, "C0APPROVALS", "", fmt.Sprint(100+i), nil, "filler"); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := api.PostKeyed(ctx, "C0APPROVALS", parent, "2", nil, "reply"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.PostKeyed(ctx, "U0OWNER001", "", "3", nil, "dm"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, channel, thread, key string
		since                      time.Time
		found                      bool
		ch                         string
	}{
		{"a channel's message", "C0APPROVALS", "", "1", start, true, "C0APPROVALS"},
		{"a key never posted", "C0APPROVALS", "", "9", start, false, ""},
		{"a reply is no channel message", "C0APPROVALS", "", "2", start, false, ""},
		{"a reply in its thread", "C0APPROVALS", parent, "2", start, true, "C0APPROVALS"},
		{"a direct message", "U0OWNER001", "", "3", start, true, "D0OWNER001"},
		{"older than since", "C0APPROVALS", "", "1", time.Now().Add(time.Hour), false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ch, ts, found, err := api.FindKeyed(ctx, tt.channel, tt.thread, tt.key, tt.since)
			if err != nil || found != tt.found || found && (ch != tt.ch || ts == "") {
				t.Fatalf("found %v in %s at %s (%v), want %v in %s", found, ch, ts, err, tt.found, tt.ch)
			}
		})
	}
	fs.FailNext("conversations.history", 500, "")
	if _, _, _, err := api.FindKeyed(ctx, "C0APPROVALS", "", "1", start); err == nil {
		t.Fatal("a failed lookup said nothing")
	}
}
