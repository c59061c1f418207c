package bot

import (
	"context"
	"testing"

	"github.com/signoff-dev/signoff/bot/fakeslack"
)

// TestAPIErrorsAreReported: a failed call is told with its method and Slack's
// code, and a code unfit for a label is told as "other", so that whatever a
// server answers cannot grow the series without bound.
func TestAPIErrorsAreReported(t *testing.T) {
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	for _, tc := range []struct{ slackError, want string }{
		{"channel_not_found", "channel_not_found"},
		{"not in the list: <b>", "other"},
		{"a_very_long_error_code_that_goes_on_and_on_and_on", "other"},
	} {
		api := NewAPI("xoxb-test", fs.URL(), 0)
		var method, code string
		api.OnError(func(m, c string) { method, code = m, c })
		fs.ErrorNext("chat.postMessage", tc.slackError)
		if _, _, err := api.PostMessage(context.Background(), "C0APPROVALS", nil, "hello"); err == nil {
			t.Fatalf("%q: the post succeeded", tc.slackError)
		}
		if method != "chat.postMessage" || code != tc.want {
			t.Errorf("%q: told %q %q, want chat.postMessage %q", tc.slackError, method, code, tc.want)
		}
	}
}
