package fakeslack_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
)

// TestStateOverHTTP: what the bot's client posts, updates, shows one person
// and opens as a modal is told to the observer as it happens, in order, and
// handed as it stands to another process by GET /dev/state; auth.test names
// the team and enterprise Start was given.
func TestStateOverHTTP(t *testing.T) {
	var mu sync.Mutex
	var kinds []string
	fs, err := fakeslack.Start(fakeslack.Options{Team: "T0LOCAL001", Enterprise: "E0LOCAL001", Observe: func(ev fakeslack.Event) {
		mu.Lock()
		defer mu.Unlock()
		kinds = append(kinds, ev.Kind)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Close)
	ctx := context.Background()
	api := bot.NewAPI("xoxb-any", fs.URL(), 5*time.Second)
	id, err := api.CheckSetup(ctx, "C0APPROVALS")
	if err != nil || id.TeamID != "T0LOCAL001" || id.EnterpriseID != "E0LOCAL001" {
		t.Fatalf("auth.test names %+v (%v), want the team and enterprise given", id, err)
	}
	section := []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "first", false, false), nil, nil)}
	ch, ts, err := api.PostMessage(ctx, "C0APPROVALS", section, "first")
	if err != nil {
		t.Fatal(err)
	}
	section[0] = slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "second", false, false), nil, nil)
	if err := api.UpdateMessage(ctx, ch, ts, section, "second"); err != nil {
		t.Fatal(err)
	}
	if err := api.PostEphemeral(ctx, ch, "U0NOBODY01", nil, "not you"); err != nil {
		t.Fatal(err)
	}
	modal := slack.ModalViewRequest{Type: slack.VTModal, Title: slack.NewTextBlockObject(slack.PlainTextType, "Reject", false, false), CallbackID: "cb"}
	if err := api.OpenView(ctx, "123.456.abc", modal); err != nil {
		t.Fatal(err)
	}

	st, err := fakeslack.ReadState(ctx, http.DefaultClient, fs.URL())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Messages) != 1 || st.Messages[0].TS != ts || !strings.Contains(st.Messages[0].Blocks, "second") || st.Messages[0].Updates != 1 {
		t.Errorf("messages %+v, want the one posted, as updated", st.Messages)
	}
	if len(st.Ephemerals) != 1 || st.Ephemerals[0].User != "U0NOBODY01" || st.Ephemerals[0].Text != "not you" {
		t.Errorf("ephemerals %+v", st.Ephemerals)
	}
	if len(st.Views) != 1 || st.Views[0].TriggerID != "123.456.abc" || !strings.Contains(st.Views[0].View, `"callback_id":"cb"`) || st.Views[0].ID == "" {
		t.Errorf("views %+v", st.Views)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(kinds, ","); got != "posted,updated,ephemeral,view" {
		t.Errorf("observed %s", got)
	}
}

// TestReadStateOfAnotherServer: a URL that is not a local Slack's is said to be so.
func TestReadStateOfAnotherServer(t *testing.T) {
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	_, err := fakeslack.ReadState(context.Background(), http.DefaultClient, strings.TrimSuffix(fs.URL(), "/api/")+"/elsewhere/api/")
	if err == nil || !strings.Contains(err.Error(), "is it signoff slack dev?") {
		t.Fatalf("err = %v", err)
	}
}
