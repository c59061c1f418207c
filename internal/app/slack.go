package app

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/bot/slackdev"
	"github.com/signoff-dev/signoff/config"
)

// slackCmd is `signoff slack dev|click|command`: a local Slack to develop
// against (package slackdev holds the logic; this only wires the flags).
func (c *cli) slackCmd() *cobra.Command {
	sl := &cobra.Command{Use: "slack", Short: "A local Slack on this machine: see what serve posts, click its buttons, type /runs"}
	sl.AddCommand(c.slackDevCmd(), c.slackClickCmd(), c.slackCommandCmd())
	return sl
}

func (c *cli) slackDevCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "dev [--addr HOST:PORT]",
		Short: "Serve the Slack Web API serve calls, on this machine, and print every message it posts or updates",
		Long: "Serve the parts of Slack's Web API that serve calls (auth.test, conversations.info, chat.postMessage, chat.update,\n" +
			"chat.postEphemeral, views.open, usergroups.users.list) and print each message, ephemeral message and modal as plain lines.\n" +
			"Point slack.api_url at the address it prints; then signoff slack click and signoff slack command act on what it holds.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := c.opts
			o.readOnly, o.quietBuiltin = true, true
			cfg, err := loadConfig(o, io.Discard)
			if err != nil {
				return err
			}
			// auth.test names the config's organisation, so serve finds the
			// token is the right one.
			so := slackdev.ServeOptions{Addr: addr, Team: cfg.Slack.TeamID, Enterprise: cfg.Slack.EnterpriseID}
			return slackdev.Serve(c.ctx, so, c.out)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", slackdev.DefaultAddr, "where to listen (port 0: any free port; the first line says which)")
	return cmd
}

// slackTarget is what click and command need: where serve and the local
// Slack are, the signing secret, and the app and organisation of the config.
type slackTarget struct {
	url, slackURL string
}

func (t *slackTarget) flags(cmd *cobra.Command, withSlack bool) {
	cmd.Flags().StringVar(&t.url, "url", "", "serve's address (env SIGNOFF_URL, default http://127.0.0.1:8080)")
	if withSlack {
		cmd.Flags().StringVar(&t.slackURL, "slack-url", "", "the local Slack's API URL (default: the config's slack.api_url)")
	}
}

// slackClient checks the config and the environment and builds the client
// that click and command send with.
func (c *cli) slackClient(t slackTarget, withSlack bool) (*slackdev.Client, error) {
	o := c.opts
	o.readOnly, o.quietBuiltin = true, true
	cfg, err := loadConfig(o, io.Discard)
	if err != nil {
		return nil, err
	}
	sc := cfg.Slack
	if !sc.Given {
		return nil, usageError{fmt.Sprintf("the config in use (%s) has no slack: section; pass the config serve runs with (--config), whose slack: section names the app and team requests come from", cfg.Source)}
	}
	if missing := sc.Missing(); len(missing) > 0 {
		return nil, cfg.Errorf("slack", "set up in part; missing: %s", strings.Join(missing, ", "))
	}
	secret := c.getenv("SLACK_SIGNING_SECRET")
	if secret == "" {
		return nil, usageError{"set SLACK_SIGNING_SECRET to the signing secret serve has: requests are signed with it, as Slack signs them"}
	}
	serveURL, from := t.url, "--url"
	if serveURL == "" {
		serveURL, from = c.getenv("SIGNOFF_URL"), "SIGNOFF_URL"
	}
	if serveURL == "" {
		serveURL = "http://127.0.0.1:8080"
	}
	if err := checkHTTPURL(from, serveURL); err != nil {
		return nil, err
	}
	slackURL := t.slackURL
	if withSlack {
		if slackURL == "" {
			if sc.APIURL == config.DefaultSlackAPIURL {
				return nil, usageError{"slack.api_url is Slack's own (" + config.DefaultSlackAPIURL + "); point it at signoff slack dev, as serve's must be, or pass --slack-url"}
			}
			slackURL = sc.APIURL
		}
		if err := checkHTTPURL("--slack-url", slackURL); err != nil {
			return nil, err
		}
	}
	return &slackdev.Client{
		ServeURL: serveURL, SlackURL: slackURL, Secret: secret,
		Space: slackdev.Workspace{AppID: sc.AppID, TeamID: sc.TeamID, EnterpriseID: sc.EnterpriseID, Channel: sc.Channel},
		HTTP:  &http.Client{Timeout: 30 * time.Second},
	}, nil
}

func checkHTTPURL(flag, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError{fmt.Sprintf("%s %q: want an http(s) URL like http://127.0.0.1:8080", flag, s)}
	}
	return nil
}

// printOutcome prints what serve made of a request; a refusal exits 2.
func (c *cli) printOutcome(out slackdev.Outcome, err error) error {
	for _, l := range out.Lines {
		fmt.Fprintln(c.out, l)
	}
	if errors.Is(err, slackdev.ErrNotSent) {
		return usageError{err.Error()}
	}
	if err != nil {
		return err
	}
	if out.Refused {
		c.code = exitRefused
	}
	return nil
}

func (c *cli) slackClickCmd() *cobra.Command {
	var t slackTarget
	var click slackdev.Click
	cmd := &cobra.Command{
		Use:   "click RUN approve|reject|edit --as USER [--reason R] [--edit JSON]",
		Short: "Click a button of a run's message in the local Slack, as USER, and fill in the form it opens",
		Long: "Send serve what Slack sends when USER clicks Approve, Reject or Edit on the run's message as the local Slack\n" +
			"(signoff slack dev) holds it: a signed block_actions payload with the button's value, and for reject and edit\n" +
			"the view_submission of the form serve opened, with --reason, and with --edit merged into the arguments it shows.\n" +
			"Exit 0 when serve took it, 2 when it changed nothing (what serve told USER is printed).",
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			click.Run, click.Verb = args[0], args[1]
			if err := slackdev.CheckClick(click); err != nil {
				return usageError{err.Error()}
			}
			cl, err := c.slackClient(t, true)
			if err != nil {
				return err
			}
			return c.printOutcome(cl.Click(c.ctx, click))
		},
	}
	t.flags(cmd, true)
	cmd.Flags().StringVar(&click.User, "as", "", "the Slack user id who clicks (required)")
	cmd.Flags().StringVar(&click.Reason, "reason", "", "what to type as the reason (required to reject; optional for edit)")
	cmd.Flags().StringVar(&click.Edit, "edit", "", `for edit: a JSON object of the fields to change, e.g. '{"amount": 60}' (null removes one)`)
	cmd.Flags().IntVar(&click.Action, "action", 1, "for edit: which action's arguments to change, from 1")
	return cmd
}

func (c *cli) slackCommandCmd() *cobra.Command {
	var t slackTarget
	var user string
	cmd := &cobra.Command{
		Use:   "command '/runs pending' --as USER",
		Short: "Type a slash command as USER and print serve's answer",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.slackClient(t, false)
			if err != nil {
				return err
			}
			return c.printOutcome(cl.Command(c.ctx, args[0], user))
		},
	}
	t.flags(cmd, false)
	cmd.Flags().StringVar(&user, "as", "", "the Slack user id who types it (required)")
	return cmd
}
