package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestParseOutcomeRecipients: notify: lists Slack channel and user ids, and
// requesters.slack_users maps requesters to Slack users; anything else is
// refused with its line.
func TestParseOutcomeRecipients(t *testing.T) {
	const slack = "slack: {channel: C0APPROVALS, app_id: A1, team_id: T1}\n"
	withNotify := func(list string) string {
		return strings.Replace(valid, `{name: everything-else, when: "true", risk: low}`, `{name: everything-else, when: "true", risk: low, notify: `+list+`}`, 1) + slack
	}
	tests := []struct {
		name       string
		yaml       string
		notify     []string          // rules[1]'s notify on success
		slackUsers map[string]string // on success
		want       string            // the error, "" for none
	}{
		{"channel, private channel and users", withNotify("[C0ONCALL01, G0OLDPRIV1, U0MGR00001, W0GRID0001]"),
			[]string{"C0ONCALL01", "G0OLDPRIV1", "U0MGR00001", "W0GRID0001"}, nil, ""},
		{"a channel name", withNotify(`["#oncall"]`), nil, nil,
			`signoff.yaml:12: policy.rules[1].notify[0]: "#oncall": want a Slack channel id (C…) or user id (U…, W…); a channel's id is at the bottom of its details in Slack`},
		{"a mention", withNotify(`[C0ONCALL01, "<@U0MGR00001>"]`), nil, nil,
			`signoff.yaml:12: policy.rules[1].notify[1]: "<@U0MGR00001>": want a Slack channel id (C…) or user id (U…, W…); a channel's id is at the bottom of its details in Slack`},
		{"lower case", withNotify(`[c0oncall01]`), nil, nil,
			`signoff.yaml:12: policy.rules[1].notify[0]: "c0oncall01": want a Slack channel id (C…) or user id (U…, W…); a channel's id is at the bottom of its details in Slack`},
		{"twice", withNotify(`[C0ONCALL01, C0ONCALL01]`), nil, nil,
			`signoff.yaml:12: policy.rules[1].notify[1]: C0ONCALL01 is listed twice`},
		{"slack users", valid + slack + "requesters:\n  slack_users:\n    agent:resolver: U0OWNER001\n    deploy-bot: W0GRID0001\n",
			nil, map[string]string{"agent:resolver": "U0OWNER001", "deploy-bot": "W0GRID0001"}, ""},
		{"a slack user that is a channel", valid + slack + "requesters:\n  slack_users:\n    agent:resolver: C0ONCALL01\n", nil, nil,
			`signoff.yaml:18: requesters.slack_users["agent:resolver"]: "C0ONCALL01": want the Slack user id (U… or W…) of the person requester agent:resolver stands for`},
		{"an empty slack user", valid + slack + "requesters:\n  slack_users: {\"agent:resolver\": \"\"}\n", nil, nil,
			`signoff.yaml:17: requesters.slack_users["agent:resolver"]: "": want the Slack user id (U… or W…) of the person requester agent:resolver stands for`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("signoff.yaml", []byte(tt.yaml))
			if tt.want != "" {
				if err == nil || err.Error() != tt.want {
					t.Fatalf("error\n got: %v\nwant: %s", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := c.Policy.Rules()[1].Notify; !slices.Equal(got, tt.notify) {
				t.Errorf("notify = %q, want %q", got, tt.notify)
			}
			if !reflect.DeepEqual(c.Requesters.SlackUsers, tt.slackUsers) {
				t.Errorf("slack_users = %v, want %v", c.Requesters.SlackUsers, tt.slackUsers)
			}
			if len(c.Warnings) != 0 {
				t.Errorf("warnings %v", c.Warnings)
			}
		})
	}
}

// TestOutcomeRecipientsWithoutSlack: without a slack: section nobody hears
// the outcome, and the config says so.
func TestOutcomeRecipientsWithoutSlack(t *testing.T) {
	yaml := strings.Replace(valid, `{name: everything-else, when: "true", risk: low}`, `{name: everything-else, when: "true", risk: low, notify: [C0ONCALL01]}`, 1) +
		"requesters:\n  slack_users:\n    agent:resolver: U0OWNER001\n"
	c, err := Parse("signoff.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range c.Warnings {
		got = append(got, w.Error())
	}
	want := []string{
		"signoff.yaml:12: policy.rules[1].notify: the config has no slack: section, so nobody is notified",
		"signoff.yaml:16: requesters.slack_users: the config has no slack: section, so nobody is sent the outcome",
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings\n got: %q\nwant: %q", got, want)
	}
}

func TestSlackUserOf(t *testing.T) {
	r := RequestersConfig{SlackUsers: map[string]string{"agent:resolver": "U0OWNER001", "U0LEAD0001": "U0OTHER001"}}
	for id, want := range map[string]string{
		"agent:resolver": "U0OWNER001", // mapped
		"U0MGR00001":     "U0MGR00001", // a Slack user itself
		"W0GRID0001":     "W0GRID0001",
		"U0LEAD0001":     "U0OTHER001", // the mapping wins
		"agent:other":    "",           // an agent: its callback
		"C0ONCALL01":     "",
		"u0mgr00001":     "",
	} {
		if got := r.SlackUserOf(id); got != want {
			t.Errorf("SlackUserOf(%q) = %q, want %q", id, got, want)
		}
	}
}
