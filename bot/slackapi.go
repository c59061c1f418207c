package bot

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// API is the part of Slack's Web API that signoff calls, over slack-go. Its base
// URL is configurable so that tests can point it at a fake on loopback.
type API struct {
	client *slack.Client
	// failed, when set, is told of every call Slack refused or that did not
	// reach it (see OnError).
	failed func(method, code string)
}

// OnError makes the client tell fn the method and the error code of every
// failed call: Slack's own code (channel_not_found, ratelimited, …), or
// "http_NNN" or "transport" when there is none. Call it before any call.
func (a *API) OnError(fn func(method, code string)) { a.failed = fn }

// fail reports err of method to OnError's fn, and returns it.
func (a *API) fail(method string, err error) error {
	if a.failed == nil || err == nil {
		return err
	}
	var se slack.SlackErrorResponse
	var rl *slack.RateLimitedError
	var sc slack.StatusCodeError
	code := "transport"
	switch {
	case errors.As(err, &se) && se.Err != "":
		code = se.Err
	case errors.As(err, &rl):
		code = "ratelimited"
	case errors.As(err, &sc):
		code = fmt.Sprintf("http_%d", sc.Code)
	}
	a.failed(method, errorCode(code))
	return err
}

// errorCode keeps a code fit for a label: Slack's codes are short snake_case
// words, and whatever else a server answers must not make a series each.
func errorCode(s string) string {
	if len(s) > 40 {
		return "other"
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return "other"
		}
	}
	return s
}

// NewAPI builds a client with a bot token. apiURL "" means Slack's own.
func NewAPI(token, apiURL string, timeout time.Duration) *API {
	opts := []slack.Option{slack.OptionHTTPClient(&http.Client{Timeout: timeout})}
	if apiURL != "" {
		opts = append(opts, slack.OptionAPIURL(apiURL))
	}
	return &API{client: slack.New(token, opts...)}
}

// PostMessage posts blocks to a channel and returns the channel id and message ts.
func (a *API) PostMessage(ctx context.Context, channel string, blocks []slack.Block, text string) (string, string, error) {
	ch, ts, err := a.client.PostMessageContext(ctx, channel, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(text, false))
	if err := a.fail("chat.postMessage", err); err != nil {
		return "", "", fmt.Errorf("chat.postMessage to %s: %w", channel, err)
	}
	return ch, ts, nil
}

// PostReply posts blocks in the thread of the message threadTS of a channel
// and returns the channel id and the reply's ts.
func (a *API) PostReply(ctx context.Context, channel, threadTS string, blocks []slack.Block, text string) (string, string, error) {
	ch, ts, err := a.client.PostMessageContext(ctx, channel, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(text, false), slack.MsgOptionTS(threadTS))
	if err := a.fail("chat.postMessage", err); err != nil {
		return "", "", fmt.Errorf("chat.postMessage in thread %s of %s: %w", threadTS, channel, err)
	}
	return ch, ts, nil
}

// PostKeyed posts blocks to a channel (in the thread of threadTS unless "")
// with key in the message's metadata, so that FindKeyed finds it.
func (a *API) PostKeyed(ctx context.Context, channel, threadTS, key string, blocks []slack.Block, text string) (string, string, error) {
	opts := []slack.MsgOption{slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(text, false),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: metadataEvent, EventPayload: map[string]any{"key": key}})}
	if threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(threadTS))
	}
	ch, ts, err := a.client.PostMessageContext(ctx, channel, opts...)
	if err := a.fail("chat.postMessage", err); err != nil {
		return "", "", fmt.Errorf("chat.postMessage to %s: %w", channel, err)
	}
	return ch, ts, nil
}

// lookupPages bounds how far FindKeyed reads back: past it the lookup fails
// (and is retried) rather than post a second time.
const lookupPages = 20

// FindKeyed looks for the message with key in its metadata that was posted
// to channel since since: in the thread of threadTS (conversations.replies)
// or, unless "", in the channel (conversations.history). A post to a user
// went to the direct message channel with them, which conversations.open
// names.
func (a *API) FindKeyed(ctx context.Context, channel, threadTS, key string, since time.Time) (string, string, bool, error) {
	ch, err := a.conversationOf(ctx, channel)
	if err != nil {
		return "", "", false, err
	}
	oldest := fmt.Sprintf("%d.000000", since.Add(-time.Minute).Unix()) // a minute's leeway for clocks apart
	cursor := ""
	for range lookupPages {
		msgs, next, err := a.page(ctx, ch, threadTS, oldest, cursor)
		if err != nil {
			return "", "", false, err
		}
		for _, m := range msgs {
			if m.Metadata.EventType == metadataEvent && fmt.Sprint(m.Metadata.EventPayload["key"]) == key {
				return ch, m.Timestamp, true, nil
			}
		}
		if next == "" {
			return ch, "", false, nil
		}
		cursor = next
	}
	return "", "", false, fmt.Errorf("look up message %s in %s: more than %d pages since %s", key, ch, lookupPages, oldest)
}

// conversationOf is the channel a post to channel went to: the direct
// message channel for a user id, else channel itself.
func (a *API) conversationOf(ctx context.Context, channel string) (string, error) {
	if !strings.HasPrefix(channel, "U") && !strings.HasPrefix(channel, "W") {
		return channel, nil
	}
	c, _, _, err := a.client.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{channel}})
	if err := a.fail("conversations.open", err); err != nil {
		return "", fmt.Errorf("conversations.open with %s: %w", channel, err)
	}
	return c.ID, nil
}

// page is one page of a lookup, with the cursor of the next ("" for none).
func (a *API) page(ctx context.Context, ch, threadTS, oldest, cursor string) ([]slack.Message, string, error) {
	if threadTS != "" {
		msgs, more, next, err := a.client.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
			ChannelID: ch, Timestamp: threadTS, Oldest: oldest, Limit: 200, Cursor: cursor, IncludeAllMetadata: true})
		if err := a.fail("conversations.replies", err); err != nil {
			return nil, "", fmt.Errorf("conversations.replies %s %s: %w", ch, threadTS, err)
		}
		if !more {
			next = ""
		}
		return msgs, next, nil
	}
	h, err := a.client.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
		ChannelID: ch, Oldest: oldest, Limit: 200, Cursor: cursor, IncludeAllMetadata: true})
	if err := a.fail("conversations.history", err); err != nil {
		return nil, "", fmt.Errorf("conversations.history %s: %w", ch, err)
	}
	next := h.ResponseMetaData.NextCursor
	if !h.HasMore {
		next = ""
	}
	return h.Messages, next, nil
}

// Permalink is the link to a posted message.
func (a *API) Permalink(ctx context.Context, channel, ts string) (string, error) {
	link, err := a.client.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: channel, Ts: ts})
	if err := a.fail("chat.getPermalink", err); err != nil {
		return "", fmt.Errorf("chat.getPermalink %s %s: %w", channel, ts, err)
	}
	return link, nil
}

// UpdateMessage rewrites a posted message.
func (a *API) UpdateMessage(ctx context.Context, channel, ts string, blocks []slack.Block, text string) error {
	if _, _, _, err := a.client.UpdateMessageContext(ctx, channel, ts, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(text, false)); a.fail("chat.update", err) != nil {
		return fmt.Errorf("chat.update %s %s: %w", channel, ts, err)
	}
	return nil
}

// PostEphemeral shows a message to one user in a channel.
func (a *API) PostEphemeral(ctx context.Context, channel, user string, blocks []slack.Block, text string) error {
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if len(blocks) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(blocks...))
	}
	if _, err := a.client.PostEphemeralContext(ctx, channel, user, opts...); a.fail("chat.postEphemeral", err) != nil {
		return fmt.Errorf("chat.postEphemeral to %s in %s: %w", user, channel, err)
	}
	return nil
}

// OpenView opens a modal for the user who clicked (trigger ids live 3 seconds).
func (a *API) OpenView(ctx context.Context, triggerID string, view slack.ModalViewRequest) error {
	if _, err := a.client.OpenViewContext(ctx, triggerID, view); a.fail("views.open", err) != nil {
		return fmt.Errorf("views.open: %w", err)
	}
	return nil
}

// GetUserGroupMembersContext lists the members of a user group.
func (a *API) GetUserGroupMembersContext(ctx context.Context, group string) ([]string, error) {
	members, err := a.client.GetUserGroupMembersContext(ctx, group)
	if a.fail("usergroups.users.list", err) != nil {
		return nil, fmt.Errorf("usergroups.users.list %s: %w", group, err)
	}
	return members, nil
}

// SetupError is what CheckSetup found wrong with the bot's token or channel,
// with what a person does about it.
type SetupError struct {
	Problem string
	Fix     string
	// Refuse: nothing can reach Slack until a person changes the token or the
	// config, so a server should not start. Otherwise (the bot is not in the
	// channel yet, or may not look at channels) messages wait and are retried.
	Refuse bool
}

func (e *SetupError) Error() string { return e.Problem + ": " + e.Fix }

// Identity is what Slack's auth.test says the bot token speaks for: serve
// logs it at start, so that the ids the config needs can be read there.
type Identity struct {
	BotUser      string // the bot's user id (U…)
	TeamID       string // the workspace the app is installed in (T…)
	Team         string // that workspace's name
	EnterpriseID string // its Enterprise Grid organisation (E…); "" outside one
	URL          string // the workspace's address, https://NAME.slack.com/
	// Scopes are the token's scopes, from the X-OAuth-Scopes header of the
	// answer; nil when Slack did not send it.
	Scopes []string
}

// HasScope says whether the token has scope; true when its scopes are unknown.
func (id Identity) HasScope(scope string) bool {
	return id.Scopes == nil || slices.Contains(id.Scopes, scope)
}

// CheckSetup asks Slack, before anything is posted, whether the bot token
// works (auth.test) and whether the bot is in the approvals channel
// (conversations.info). A token Slack refuses or a channel it does not know
// is a *SetupError; so is a channel the bot is not in, which posts would fail
// on until someone invites the bot. It returns who the token speaks for
// whenever auth.test answered.
func (a *API) CheckSetup(ctx context.Context, channel string) (Identity, error) {
	auth, err := a.client.AuthTestContext(ctx)
	if err != nil {
		var se slack.SlackErrorResponse
		if errors.As(err, &se) {
			return Identity{}, &SetupError{Problem: "Slack refused the bot token (" + se.Err + ")",
				Fix: "set SLACK_BOT_TOKEN to the app's Bot User OAuth Token (xoxb-…), from OAuth & Permissions", Refuse: true}
		}
		return Identity{}, fmt.Errorf("slack auth.test: %w", err)
	}
	id := Identity{BotUser: auth.UserID, TeamID: auth.TeamID, Team: auth.Team, EnterpriseID: auth.EnterpriseID, URL: auth.URL}
	if h := auth.Header.Values("X-OAuth-Scopes"); len(h) > 0 {
		id.Scopes = []string{}
		for _, s := range strings.Split(strings.Join(h, ","), ",") {
			if s = strings.TrimSpace(s); s != "" {
				id.Scopes = append(id.Scopes, s)
			}
		}
	}
	ch, err := a.client.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: channel})
	if err != nil {
		var se slack.SlackErrorResponse
		if errors.As(err, &se) {
			switch se.Err {
			case "channel_not_found":
				return id, &SetupError{Problem: "Slack knows no channel " + channel + " that the bot can see",
					Fix: "check slack.channel (a channel id such as C0123ABCD); for a private channel, invite the bot first: /invite @signoff", Refuse: true}
			case "missing_scope":
				return id, &SetupError{Problem: "the bot token lacks the scope to look at channels",
					Fix: "add channels:read (and groups:read for a private channel) under OAuth & Permissions, or reinstall from bot/manifest.yaml"}
			}
		}
		return id, fmt.Errorf("slack conversations.info %s: %w", channel, err)
	}
	if !ch.IsMember {
		return id, &SetupError{Problem: "the bot is not in channel " + channel,
			Fix: "invite it there: /invite @signoff (until then, approval messages wait and are retried every minute or two)"}
	}
	return id, nil
}

// retryAfter says when a failed Slack call may be tried again: Slack's own
// Retry-After on 429, a growing backoff on 5xx, timeouts and transport errors,
// and a long pause (retried, but rarely) for errors Slack says are ours
// (channel_not_found, invalid_auth…), which need a person to fix the config.
func retryAfter(err error, attempt int) (wait time.Duration, permanent bool) {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return max(rl.RetryAfter, time.Second), false
	}
	backoff := min(time.Duration(1<<min(attempt, 10))*time.Second, 5*time.Minute)
	var sc slack.StatusCodeError
	if errors.As(err, &sc) && sc.Code >= 500 {
		return backoff, false
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return backoff, false
		case "not_in_channel", "channel_not_found":
			// A person fixes this with /invite @signoff, and then expects the
			// message within a minute or two, not an hour.
			return min(backoff, 2*time.Minute), true
		}
		return time.Hour, true
	}
	if sc.Code != 0 {
		return time.Hour, true // another 4xx: our request is wrong
	}
	return backoff, false // timeouts and transport errors
}
