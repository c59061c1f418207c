package bot

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/record"
)

// FailAfterPost is the failpoint between Slack's acceptance of a post and
// the record that the outbox row was sent, for crash tests.
const FailAfterPost = "slack-after-post"

// metadataEvent is the event_type of the message metadata every post of the
// dispatcher carries; its event_payload's key names the outbox row.
const metadataEvent = "signoff_outbox"

// OncePoster posts with the outbox row's key in the message's metadata, and
// finds a post by that key (*API has it). A dispatcher whose Slack has it
// posts a row's message once, even when the process died between Slack's
// acceptance and the record of it.
type OncePoster interface {
	// PostKeyed posts to channel (in the thread of threadTS unless "").
	PostKeyed(ctx context.Context, channel, threadTS, key string, blocks []slack.Block, text string) (string, string, error)
	// FindKeyed looks for a message with key posted to channel (in the
	// thread of threadTS unless "") since since; found false when none.
	FindKeyed(ctx context.Context, channel, threadTS, key string, since time.Time) (ch, ts string, found bool, err error)
}

// outboxKey is the key a row's message carries: the row's id, the same on
// every attempt.
func outboxKey(m *record.OutboxMessage) string { return strconv.FormatInt(m.ID, 10) }

// postOnce posts a row's message (a reply in the thread of threadTS unless
// ""). A row claimed before (Attempts above one) may have reached Slack on
// an attempt that never recorded it, so it is looked up first: found, its
// message is the one posted, and nothing is posted again. A lookup that
// fails is an error like a failed post, retried later: never a blind
// second post.
func (d *Dispatcher) postOnce(ctx context.Context, m *record.OutboxMessage, channel, threadTS string, blocks []slack.Block, text string) (string, string, error) {
	op, ok := d.Slack.(OncePoster)
	if !ok {
		return d.postPlain(ctx, channel, threadTS, blocks, text)
	}
	key := outboxKey(m)
	if m.Attempts > 1 {
		ch, ts, found, err := op.FindKeyed(ctx, channel, threadTS, key, m.CreatedAt)
		if err != nil {
			return "", "", fmt.Errorf("look up whether outbox row %d reached Slack: %w", m.ID, err)
		}
		if found {
			d.log().Info("slack message found posted by an earlier attempt; not posted again", "outbox_id", m.ID, "kind", string(m.Kind), "run_id", m.RunID, "channel", ch, "ts", ts)
			return ch, ts, nil
		}
	}
	ch, ts, err := op.PostKeyed(ctx, channel, threadTS, key, blocks, text)
	if err != nil {
		return "", "", err
	}
	d.failpoint(FailAfterPost)
	return ch, ts, nil
}

// postPlain posts with a client that cannot look a post up (a test's).
func (d *Dispatcher) postPlain(ctx context.Context, channel, threadTS string, blocks []slack.Block, text string) (string, string, error) {
	if threadTS == "" {
		return d.Slack.PostMessage(ctx, channel, blocks, text)
	}
	tp, ok := d.Slack.(ThreadPoster)
	if !ok {
		return "", "", fmt.Errorf("reply in thread %s of %s: this Slack client cannot reply in a thread", threadTS, channel)
	}
	return tp.PostReply(ctx, channel, threadTS, blocks, text)
}

func (d *Dispatcher) failpoint(name string) {
	if d.Failpoint != nil {
		d.Failpoint(name)
	}
}
