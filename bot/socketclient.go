package bot

import (
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// NewSocketModeClient builds the Socket Mode client for workspaces with no public
// URL: the app-level token (xapp-…) opens the WebSocket, the bot token calls the
// Web API. apiURL "" means Slack's own.
func NewSocketModeClient(botToken, appToken, apiURL string) *socketmode.Client {
	opts := []slack.Option{slack.OptionAppLevelToken(appToken)}
	if apiURL != "" {
		opts = append(opts, slack.OptionAPIURL(apiURL))
	}
	return socketmode.New(slack.New(botToken, opts...))
}
