package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
)

const examplePath = "../fixtures/signoff.example.yaml"

// valid is the contract's sample config; broken configs below change one thing.
const valid = `roles:            # lowest first
  - {name: agent, members: [agent:resolver]}
  - {name: team_lead, members: [U0LEAD0001]}
  - {name: manager, members: [U0MGR00001]}
policy:
  revision: "2026-11-29.1"
  rules:          # first match wins
    - name: large-refund
      when: action.name == "request_refund" && double(action.args.amount) > 50.0
      risk: high
      approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}
    - {name: everything-else, when: "true", risk: low}
actions:
  request_refund: {executor: demo}
`

func TestParseContractSample(t *testing.T) {
	c, err := Parse("signoff.yaml", []byte(valid))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.Source != "signoff.yaml" || c.Policy.Revision() != "2026-11-29.1" {
		t.Errorf("Source %q revision %q", c.Source, c.Policy.Revision())
	}
	if got, want := c.Roles.Names(), []string{"agent", "team_lead", "manager"}; !slices.Equal(got, want) {
		t.Errorf("roles = %v, want %v", got, want)
	}
	if role, _ := c.Roles.RoleOf("agent:resolver"); role != "agent" {
		t.Errorf("agent:resolver has role %q, want agent", role)
	}
	want := []policy.Rule{
		{Name: "large-refund", When: `action.name == "request_refund" && double(action.args.amount) > 50.0`, Risk: "high",
			Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: 72 * 3600, SelfApproval: false, Edit: true}},
		{Name: "everything-else", When: "true", Risk: "low"},
	}
	if got := c.Policy.Rules(); !reflect.DeepEqual(got, want) {
		t.Errorf("rules = %+v, want %+v", got, want)
	}
	if got := c.Actions; !reflect.DeepEqual(got, map[string]ActionConfig{"request_refund": {Executor: "demo"}}) {
		t.Errorf("actions = %+v", got)
	}
	if c.Slack.APIURL != DefaultSlackAPIURL {
		t.Errorf("Slack.APIURL = %q, want the default", c.Slack.APIURL)
	}
	out, err := c.Policy.Evaluate(t.Context(), policy.Input{
		Action: record.Action{Name: "request_refund", Args: json.RawMessage(`{"amount":119}`)},
	})
	if err != nil || out.Rule != "large-refund" {
		t.Errorf("Evaluate = %+v, %v; want large-refund", out, err)
	}
}

func TestParseDefaults(t *testing.T) {
	c, err := Parse("s.yaml", []byte(`roles: [{name: lead, members: [U1]}]
policy:
  revision: r1
  rules:
    - {name: all, when: "true", risk: medium, approval: {role: lead, expires: 3d12h}}
actions:
  a: {executor: demo, redact: [payment_id, card.number]}
slack:
  channel: C0APPROVALS
  app_id: A1
  team_id: T1
  enterprise_id: E1
  api_url: http://localhost:8080/api
  user_groups: {lead: S0LEADS}
  command: /approvals
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	a := c.Policy.Rules()[0].Approval
	if want := (record.ApprovalSpec{Role: "lead", Count: 1, Expires: 84 * 3600}); *a != want {
		t.Errorf("approval = %+v, want %+v", *a, want)
	}
	if got := c.Actions["a"].Redact; !slices.Equal(got, []string{"payment_id", "card.number"}) {
		t.Errorf("redact = %v", got)
	}
	want := SlackConfig{Given: true, Channel: "C0APPROVALS", AppID: "A1", TeamID: "T1", EnterpriseID: "E1",
		APIURL: "http://localhost:8080/api/", UserGroups: map[string]string{"lead": "S0LEADS"}, Command: "/approvals"}
	if !reflect.DeepEqual(c.Slack, want) {
		t.Errorf("slack = %+v, want %+v", c.Slack, want)
	}
}

// TestParseRefuses is the catalogue of broken configs and the exact message
// each gets: file, line, field path and reason.
func TestParseRefuses(t *testing.T) {
	// edit returns valid with old replaced by new, once.
	edit := func(old, new string) string {
		if !strings.Contains(valid, old) {
			t.Fatalf("sample has no %q", old)
		}
		return strings.Replace(valid, old, new, 1)
	}
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"condition does not compile", edit(`when: action.name == "request_refund"`, `when: actoin.name == "request_refund"`),
			`signoff.yaml:9: policy.rules[0].when: ERROR: <input>:1:1: undeclared reference to 'actoin' (did you mean 'action'?)`},
		{"condition is not bool", edit(`when: "true"`, `when: "task"`),
			`signoff.yaml:12: policy.rules[1].when: condition is of type string, want bool`},
		{"condition might not be bool", edit(`when: "true"`, `when: "action.args.urgent"`),
			`signoff.yaml:12: policy.rules[1].when: condition is of type dyn, want bool (compare explicitly, e.g. action.args.flag == true)`},
		{"empty condition", edit(`when: "true"`, `when: ""`),
			`signoff.yaml:12: policy.rules[1].when: empty condition (write "true" for a rule that always applies)`},
		{"duplicate role", edit(`{name: manager,`, `{name: team_lead,`),
			`signoff.yaml:4: roles[2].name: duplicate role "team_lead"`},
		{"empty role name", edit(`{name: agent, `, `{name: "", `),
			`signoff.yaml:2: roles[0].name: must not be empty`},
		{"duplicate member", edit(`[U0MGR00001]`, `[U0MGR00001, U0MGR00001]`),
			`signoff.yaml:4: roles[2].members[1]: duplicate member "U0MGR00001"`},
		{"members not a list", edit(`[U0MGR00001]`, `U0MGR00001`),
			`signoff.yaml:4: roles[2].members: must be a list, got "U0MGR00001"`},
		{"no roles", edit("  - {name: agent, members: [agent:resolver]}\n  - {name: team_lead, members: [U0LEAD0001]}\n  - {name: manager, members: [U0MGR00001]}\n", "  []\n"),
			`signoff.yaml:1: roles: at least one role is required (lowest first, e.g. - {name: team_lead, members: [U0LEAD0001]})`},
		{"unknown role", edit(`role: team_lead`, `role: owner`),
			`signoff.yaml:11: policy.rules[0].approval.role: unknown role "owner" (roles: agent, team_lead, manager)`},
		{"a rule waits longer than a request may live", edit(`expires: 72h`, `expires: 40d`),
			`signoff.yaml:11: policy.rules[0].approval.expires: 960h0m0s is longer than a request may live (requests.max_lifetime, 720h0m0s)`},
		{"retention in words", valid + "retention: {runs_older_than: banana}\n",
			`signoff.yaml:15: retention.runs_older_than: "banana" is not a duration: write it like 72h, 30m or 3d`},
		{"negative retention", valid + "retention: {runs_older_than: -90d}\n",
			`signoff.yaml:15: retention.runs_older_than: "-90d" is not a duration: write it like 72h, 30m or 3d`},
		{"zero retention", valid + "retention: {runs_older_than: 0d}\n",
			`signoff.yaml:15: retention.runs_older_than: "0d": must be longer than zero`},
		{"retention without its age", valid + "retention: {every: 12h}\n",
			`signoff.yaml:15: retention.runs_older_than: required: how long ago a run must have ended to be pruned (e.g. 90d)`},
		{"retention too often", valid + "retention:\n  runs_older_than: 90d\n  every: 10s\n",
			`signoff.yaml:17: retention.every: 10s is too often: prune at most once a minute (the default is 24h0m0s)`},
		{"unknown retention field", valid + "retention: {runs_older_than: 90d, keep: all}\n",
			`signoff.yaml:15: retention: unknown field "keep" (known: runs_older_than, every)`},
		{"max lifetime in words", valid + "requests: {max_lifetime: a month}\n",
			`signoff.yaml:15: requests.max_lifetime: "a month" is not a duration: write it like 72h, 30m or 3d`},
		{"duration in words", edit(`expires: 72h`, `expires: 72 hours`),
			`signoff.yaml:11: policy.rules[0].approval.expires: "72 hours" is not a duration: write it like 72h, 30m or 3d`},
		{"duration as a number", edit(`expires: 72h`, `expires: 3600`),
			`signoff.yaml:11: policy.rules[0].approval.expires: "3600" is not a duration: write it like 72h, 30m or 3d`},
		{"zero duration", edit(`expires: 72h`, `expires: 0s`),
			`signoff.yaml:11: policy.rules[0].approval.expires: "0s": must be longer than zero`},
		{"fractional seconds", edit(`expires: 72h`, `expires: 1500ms`),
			`signoff.yaml:11: policy.rules[0].approval.expires: "1500ms": must be whole seconds`},
		{"missing expiry", edit(`, expires: 72h`, ``),
			`signoff.yaml:11: policy.rules[0].approval.expires: required: how long approvers have, e.g. 72h or 3d`},
		{"count zero", edit(`count: 1`, `count: 0`),
			`signoff.yaml:11: policy.rules[0].approval.count: count 0: at least 1 approver is needed`},
		{"count in words", edit(`count: 1`, `count: two`),
			`signoff.yaml:11: policy.rules[0].approval.count: must be a whole number, got "two"`},
		{"count too big", edit(`count: 1`, `count: 99999999999999999999`),
			`signoff.yaml:11: policy.rules[0].approval.count: number 99999999999999999999 is out of range`},
		{"yes is not a bool", edit(`self_approval: false`, `self_approval: yes`),
			`signoff.yaml:11: policy.rules[0].approval.self_approval: must be true or false, got "yes"`},
		{"bad risk", edit(`risk: high`, `risk: severe`),
			`signoff.yaml:10: policy.rules[0].risk: risk "severe": want low, medium or high`},
		{"duplicate rule name", edit(`{name: everything-else,`, `{name: large-refund,`),
			`signoff.yaml:12: policy.rules[1].name: duplicate rule name "large-refund" (also rules[0])`},
		{"rule without name", edit(`{name: everything-else, `, `{`),
			`signoff.yaml:12: policy.rules[1].name: must not be empty`},
		{"missing revision", edit(`  revision: "2026-11-29.1"`+"\n", ``),
			`signoff.yaml:5: policy.revision: required: a name for this version of the policy, e.g. "2026-11-29.1"`},
		{"no rules", valid[:strings.Index(valid, "  rules:")] + "  rules: []\nactions:\n  request_refund: {executor: demo}\n",
			`signoff.yaml:7: policy.rules: at least one rule is required; the last is usually {name: everything-else, when: "true", ...}`},
		{"no policy", "roles: [{name: a}]\nactions: {x: {executor: demo}}\n",
			`signoff.yaml:1: policy: required: a revision and the rules`},
		{"no roles section", "policy: {revision: r1, rules: [{name: all, when: \"true\", risk: low}]}\nactions: {x: {executor: demo}}\n",
			`signoff.yaml:1: roles: at least one role is required (lowest first, e.g. - {name: team_lead, members: [U0LEAD0001]})`},
		{"unknown field of action", edit(`when: action.name == "request_refund"`, `when: action.nme == "request_refund"`),
			`signoff.yaml:9: policy.rules[0].when: ERROR: <input>:1:7: undefined field 'nme' (action has name, index, args; requester has id, name, role; evidence has source, data; mcp has upstream, tool, untrusted_annotations; arguments are action.args.NAME)`},
		{"rule about an action the config lacks", edit(`when: action.name == "request_refund"`, `when: action.name == "request_refnud"`),
			`signoff.yaml:9: policy.rules[0].when: no action is named "request_refnud" (actions: request_refund)`},
		{"more approvals than people", edit(`count: 1`, `count: 3`),
			`signoff.yaml:11: policy.rules[0].approval.count: 3 approvals needed, but only 2 people are listed for team_lead and above: the rule could never be satisfied`},
		{"a role nobody holds", strings.NewReplacer(`{name: manager, members: [U0MGR00001]}`, `{name: manager}`,
			`risk: low}`, `risk: low, approval: {role: manager, expires: 1h}}`).Replace(valid),
			`signoff.yaml:12: policy.rules[1].approval.role: 1 approval needed, but only 0 people are listed for manager and above: the rule could never be satisfied`},
		{"requesters is a mapping", valid + "requesters: yes\n",
			`signoff.yaml:15: requesters: must be a mapping, got "yes"`},
		{"unknown field", edit(`risk: high`, `riks: high`),
			`signoff.yaml:10: policy.rules[0]: unknown field "riks" (known: name, when, risk, approval, notify, remind, escalate, window, break_glass, confirm, step_up)`},
		{"unknown top-level field", valid + "extra: 1\n",
			`signoff.yaml:15: unknown field "extra" (known: roles, policy, actions, slack, requesters, requests, resolve, anchors, api, retention, audit_log, mcp, ui)`},
		{"unknown approval field", edit(`edit: true`, `edit: true, quorum: 2`),
			`signoff.yaml:11: policy.rules[0].approval: unknown field "quorum" (known: role, count, expires, self_approval, edit, any_of, all_of)`},
		{"duplicate key", edit(`      risk: high`+"\n", `      risk: high`+"\n"+`      risk: low`+"\n"),
			`signoff.yaml:11: policy.rules[0].risk: duplicate key "risk" (first at line 10)`},
		{"duplicate key on one line", edit(`{executor: demo}`, `{executor: demo, executor: other}`),
			`signoff.yaml:14: actions.request_refund.executor: duplicate key "executor" (first at column 20 of this line)`},
		{"duplicate action", valid + "  request_refund: {executor: other}\n",
			`signoff.yaml:15: actions.request_refund: duplicate key "request_refund" (first at line 14)`},
		{"action without executor", edit(`{executor: demo}`, `{}`),
			`signoff.yaml:14: actions.request_refund.executor: required: which executor runs request_refund (e.g. demo)`},
		{"action left empty", edit(`{executor: demo}`, ``),
			`signoff.yaml:14: actions.request_refund.executor: required: which executor runs request_refund (e.g. demo)`},
		{"bad redact path", edit(`{executor: demo}`, `{executor: demo, redact: [card..number]}`),
			`signoff.yaml:14: actions.request_refund.redact[0]: bad path "card..number": want a key or keys joined by dots, like card.number`},
		{"no actions", strings.TrimSuffix(valid, "  request_refund: {executor: demo}\n"),
			`signoff.yaml:13: actions: at least one action is required (e.g. request_refund: {executor: demo})`},
		{"secret in the file", valid + "slack:\n  bot_token: xoxb-1\n",
			`signoff.yaml:16: slack: "bot_token" does not belong in the file: secrets come from the environment (SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET)`},
		{"user group for unknown role", valid + "slack:\n  user_groups: {owner: S1}\n",
			`signoff.yaml:16: slack.user_groups.owner: unknown role "owner" (roles: agent, team_lead, manager)`},
		{"bad api url", valid + "slack:\n  api_url: slack.com/api\n",
			`signoff.yaml:16: slack.api_url: "slack.com/api": want an http(s) URL like https://slack.com/api/`},
		{"command without its slash", valid + "slack:\n  command: approvals\n",
			`signoff.yaml:16: slack.command: "approvals": want the slash command's name as the app defines it, like /approvals (a slash, then up to 31 lowercase letters, digits, -, _ or .)`},
		{"command with a space", valid + "slack:\n  command: /my runs\n",
			`signoff.yaml:16: slack.command: "/my runs": want the slash command's name as the app defines it, like /approvals (a slash, then up to 31 lowercase letters, digits, -, _ or .)`},
		{"digest at a bad time", valid + "slack:\n  digests:\n    - {at: \"9am\", tz: Europe/Paris, channel: C0APPROVALS}\n",
			`signoff.yaml:17: slack.digests[0].at: "9am": want a time of day as HH:MM, 24-hour, like 09:00`},
		{"digest at 24:00", valid + "slack:\n  digests:\n    - at: \"24:00\"\n      tz: UTC\n      channel: C0APPROVALS\n",
			`signoff.yaml:17: slack.digests[0].at: "24:00": want a time of day as HH:MM, 24-hour, like 09:00`},
		{"digest in an unknown zone", valid + "slack:\n  digests:\n    - at: \"09:00\"\n      tz: Europe/Parsi\n      channel: C0APPROVALS\n",
			`signoff.yaml:18: slack.digests[0].tz: "Europe/Parsi": unknown time zone: want one like Europe/Paris (or UTC)`},
		{"digest in the machine's zone", valid + "slack:\n  digests:\n    - {at: \"09:00\", tz: Local, channel: C0APPROVALS}\n",
			`signoff.yaml:17: slack.digests[0].tz: "Local": unknown time zone: want one like Europe/Paris (or UTC)`},
		{"digest without a zone", valid + "slack:\n  digests:\n    - {at: \"09:00\", channel: C0APPROVALS}\n",
			`signoff.yaml:17: slack.digests[0]: no tz: want a time zone like Europe/Paris (or UTC)`},
		{"digest to a channel name", valid + "slack:\n  digests:\n    - at: \"09:00\"\n      tz: UTC\n      channel: \"#approvals\"\n",
			`signoff.yaml:19: slack.digests[0].channel: "#approvals": want a Slack channel id like C0123456789 (channel details, at the bottom), not its name`},
		{"two digests to one channel", valid + "slack:\n  digests:\n    - {at: \"09:00\", tz: UTC, channel: C0APPROVALS}\n    - {at: \"17:00\", tz: UTC, channel: C0APPROVALS}\n",
			`signoff.yaml:18: slack.digests[1].channel: C0APPROVALS has a digest already (slack.digests[0]): one per channel`},
		{"syntax error", edit(`{name: manager, members: [U0MGR00001]}`, `{name: manager, members: [U0MGR00001]`),
			`signoff.yaml:5: ',' or '}' must be specified`},
		{"tab indentation", "roles:\n\t- {name: a}\n",
			`signoff.yaml:2: found character '	' that cannot start any token`},
		{"not a mapping", "- roles\n", `signoff.yaml:1: must be a mapping, got a list`},
		{"two documents", valid + "---\nroles: []\n", `signoff.yaml:16: more than one YAML document: a config is one document`},
		{"resolve role unknown", valid + "resolve: {role: sre}\n",
			`signoff.yaml:15: resolve.role: "sre" is not one of the roles (agent, team_lead, manager): who may resolve a run that needs attention`},
		{"empty", "", `signoff.yaml:1: the config is empty`},
		{"only comments", "# nothing yet\n", `signoff.yaml:1: the config is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("signoff.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", c)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tt.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.File != "signoff.yaml" {
				t.Errorf("err is %T, want *Error naming the file", err)
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want int64 // seconds; -1 for an error
	}{
		{"72h", 72 * 3600},
		{"30m", 1800},
		{"1h30m", 5400},
		{"3d", 3 * 86400},
		{"1d12h", 36 * 3600},
		{" 2d ", 2 * 86400},
		{"0d1s", 1},
		{"90s", 90},
		{"3 days", -1},
		{"d", -1},
		{"-3d", -1},
		{"+3d", -1},
		{"3d-1h", -1},
		{"-1h", -1},
		{"0d", -1},
		{"500ms", -1},
		{"99999d", -1},
		{"", -1},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, err := parseDuration(tt.in)
			got := int64(d.Seconds())
			if err != nil {
				got = -1
			}
			if got != tt.want {
				t.Errorf("parseDuration(%q) = %v, %v; want %d s", tt.in, d, err, tt.want)
			}
		})
	}
}

// TestDefaultAndExample: the built-in config loads, and the commented example
// users copy says exactly the same thing.
func TestDefaultAndExample(t *testing.T) {
	def := Default()
	if def.Source != DefaultSource {
		t.Errorf("Source = %q", def.Source)
	}
	ex, err := Load(examplePath)
	if err != nil {
		t.Fatalf("Load example: %v", err)
	}
	if ex.Source != examplePath {
		t.Errorf("Source = %q", ex.Source)
	}
	if ex.Policy.Revision() != def.Policy.Revision() {
		t.Errorf("revision: example %q, default %q", ex.Policy.Revision(), def.Policy.Revision())
	}
	if !reflect.DeepEqual(ex.Policy.Rules(), def.Policy.Rules()) {
		t.Errorf("rules differ:\nexample %+v\ndefault %+v", ex.Policy.Rules(), def.Policy.Rules())
	}
	if !slices.Equal(ex.Roles.Names(), def.Roles.Names()) || !reflect.DeepEqual(ex.Actions, def.Actions) || !reflect.DeepEqual(ex.Slack, def.Slack) {
		t.Errorf("roles, actions or slack differ")
	}
	for _, role := range def.Roles.Names() {
		if !slices.Equal(ex.Roles.Members(role), def.Roles.Members(role)) {
			t.Errorf("members of %s differ", role)
		}
	}
	if len(def.Warnings) != 0 || len(ex.Warnings) != 0 || !reflect.DeepEqual(ex.Requesters, def.Requesters) {
		t.Errorf("warnings: default %v, example %v; requesters: default %+v, example %+v", def.Warnings, ex.Warnings, def.Requesters, ex.Requesters)
	}
	if string(DefaultYAML()) != string(defaultYAML) {
		t.Error("DefaultYAML is not the embedded file")
	}
}

// TestDefaultPolicy pins what the practice shop's policy decides.
func TestDefaultPolicy(t *testing.T) {
	c := Default()
	if got := c.Roles.Members("team_lead"); !slices.Equal(got, []string{"U0LEAD0001", "U0LEAD0002", "U0MGR00001"}) {
		t.Errorf("who may approve for team_lead: %v", got)
	}
	for _, name := range []string{"request_refund", "reship_item", "create_return_label"} {
		if c.Actions[name].Executor != "demo" {
			t.Errorf("action %s: executor %q, want demo", name, c.Actions[name].Executor)
		}
	}
	tests := []struct {
		name, action, args string
		rule               string
		risk               record.Risk
		role               string
		expires            record.Seconds
		edit               bool
	}{
		{"double charge refund", "request_refund", `{"order_id":"LK-507862","payment_id":"PAY-507862-2","amount":119.00,"currency":"CAD","reason_code":"RFD-DUPLICATE"}`,
			"large-refund", "high", "team_lead", 72 * 3600, true},
		{"refund as integer", "request_refund", `{"amount":119}`, "large-refund", "high", "team_lead", 72 * 3600, true},
		{"small refund", "request_refund", `{"order_id":"LK-793996","payment_id":"PAY-793996-1","amount":9.95,"currency":"CAD","reason_code":"RFD-DEFECT"}`,
			"small-refund", "low", "", 0, false},
		{"reship", "reship_item", `{"order_id":"LK-640436","sku":"PLANTER","quantity":1}`, "reship", "medium", "team_lead", 72 * 3600, false},
		{"free label", "create_return_label", `{"order_id":"LK-640436","sku":"PLANTER","reason":"damaged","free_shipping":true}`, "free-return-label", "low", "", 0, false},
		{"paid label", "create_return_label", `{"order_id":"LK-640436","sku":"PLANTER","reason":"changed_mind","free_shipping":false}`, "everything-else", "high", "manager", 24 * 3600, false},
		{"unknown action", "wire_money", `{"amount":1}`, "everything-else", "high", "manager", 24 * 3600, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.Policy.Evaluate(t.Context(), policy.Input{
				Action:    record.Action{Name: tt.action, Args: json.RawMessage(tt.args)},
				Requester: record.Person{ID: "agent:resolver"},
			})
			if err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			if out.Rule != tt.rule || out.Risk != tt.risk {
				t.Errorf("rule %q risk %q, want %q %q", out.Rule, out.Risk, tt.rule, tt.risk)
			}
			if tt.role == "" {
				if out.Approval != nil {
					t.Errorf("approval %+v, want none", out.Approval)
				}
				return
			}
			want := record.ApprovalSpec{Role: tt.role, Count: 1, Expires: tt.expires, Edit: tt.edit}
			if out.Approval == nil || *out.Approval != want {
				t.Errorf("approval %+v, want %+v", out.Approval, want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(good, []byte(valid), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(valid, "risk: high", "risk: severe", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", maxFileSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"good", good, ""},
		{"refused names the path", bad, bad + `:10: policy.rules[0].risk: risk "severe": want low, medium or high`},
		{"missing", filepath.Join(dir, "nope.yaml"), filepath.Join(dir, "nope.yaml") + ": cannot read the config: no such file or directory"},
		{"a directory", dir, dir + ": cannot read the config: is a directory"},
		{"too big", big, big + ":1: file is 1048579 bytes; a config is at most 1048576"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.path)
			if tt.want == "" {
				if err != nil || c.Source != tt.path {
					t.Fatalf("Load = %v, %v", c, err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("err = %v, want %s", err, tt.want)
			}
			// Every config problem is bad input (exit 2), an unreadable file too.
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("err is %T, want *Error", err)
			}
		})
	}
}

func TestParseAnchorsAndMerges(t *testing.T) {
	c, err := Parse("s.yaml", []byte(`roles:
  - {name: lead, members: [U1, "agent:x", U2]}
policy:
  revision: r1
  rules:
    - name: a
      when: action.name == "a"
      risk: high
      approval: &lead {role: lead, expires: 1d}
    - name: b
      when: "true"
      risk: low
      approval:
        <<: *lead
        count: 2
actions: {a: {executor: demo}}
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	rules := c.Policy.Rules()
	if *rules[0].Approval != (record.ApprovalSpec{Role: "lead", Count: 1, Expires: 86400}) ||
		*rules[1].Approval != (record.ApprovalSpec{Role: "lead", Count: 2, Expires: 86400}) {
		t.Errorf("approvals = %+v, %+v", rules[0].Approval, rules[1].Approval)
	}
	if got := c.Roles.Members("lead"); !slices.Equal(got, []string{"U1", "U2", "agent:x"}) {
		t.Errorf("members = %v", got)
	}
}

// TestParseColonInFlowList: member ids like agent:resolver are one string in
// YAML wherever they are written, though the parser alone reads some as pairs.
func TestParseColonInFlowList(t *testing.T) {
	tests := []struct {
		name, roles string
		want        []string
		err         string
	}{
		{"inside a flow mapping", "  - {name: a, members: [agent:resolver, b:c:d]}\n", []string{"agent:resolver", "b:c:d"}, ""},
		{"block list", "  - name: a\n    members: [agent:resolver]\n", []string{"agent:resolver"}, ""},
		{"block items", "  - name: a\n    members:\n      - agent:resolver\n", []string{"agent:resolver"}, ""},
		{"quoted", "  - {name: a, members: [\"agent:resolver\"]}\n", []string{"agent:resolver"}, ""},
		{"a real pair stays a pair", "  - {name: a, members: [agent: resolver]}\n", nil,
			`s.yaml:2: roles[0].members[0]: must be text, got a mapping`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "roles:\n" + tt.roles + "policy: {revision: r, rules: [{name: x, when: \"true\", risk: low}]}\nactions: {a: {executor: demo}}\n"
			c, err := Parse("s.yaml", []byte(src))
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("err = %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := c.Roles.Members("a"); !slices.Equal(got, tt.want) {
				t.Errorf("members = %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(examplePath)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		valid, string(defaultYAML), string(example), "", "roles: *x\n", "a: &a [*a]\n",
		"roles:\n  - {name: a, members: [a:b, c: d]}\n", "policy: {rules: [{approval: {expires: 3d}}]}\n",
		"roles: [{name: a}]\npolicy: {revision: r, rules: [{name: x, when: 'action.args.a.all(x, x > 1)', risk: low}]}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if c.Roles == nil || c.Policy == nil || len(c.Actions) == 0 || c.Slack.APIURL == "" {
			t.Fatalf("accepted an incomplete config: %+v", c)
		}
	})
}

// TestParseWarnings: problems that do not stop a config, each with its line.
func TestParseWarnings(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"none", valid, nil},
		{"no catch-all", strings.Replace(valid, `{name: everything-else, when: "true", risk: low}`, `{name: reship, when: 'action.name == "request_refund"', risk: low}`, 1),
			[]string{`signoff.yaml:12: policy.rules[1]: no rule matches every action: an action no rule matches is refused when proposed (end with {name: everything-else, when: "true", ...})`}},
		{"a rule after the catch-all", valid[:strings.Index(valid, "actions:")] + "    - {name: late, when: 'action.name == \"request_refund\"', risk: low}\n" + valid[strings.Index(valid, "actions:"):],
			[]string{`signoff.yaml:13: policy.rules[2]: never reached: rules[1] (everything-else) before it matches every action`}},
		{"a quorum that rests on a user group", strings.Replace(valid, "count: 1", "count: 3", 1) + "slack:\n  user_groups: {manager: S0MANAGERS}\n",
			[]string{`signoff.yaml:11: policy.rules[0].approval.count: 3 approvals needed and 2 people are listed for team_lead and above; the rest must come from Slack user group S0MANAGERS (manager), whose size is known only when a run waits`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("signoff.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			for _, w := range c.Warnings {
				got = append(got, w.Error())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("warnings\n got: %q\nwant: %q", got, tt.want)
			}
		})
	}
}

// TestParseRequesters: by default only role members may propose; the config
// may let anyone.
// TestSlackMissing: without a slack: section Slack is off and nothing is
// missing; a section names every setting serve needs that it lacks.
func TestSlackMissing(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		given      bool
		want       []string
	}{
		{"no section", valid, false, nil},
		{"empty section", valid + "slack: {}\n", true, []string{"slack.channel", "slack.app_id", "slack.team_id (or slack.enterprise_id)"}},
		{"channel only", valid + "slack: {channel: C1}\n", true, []string{"slack.app_id", "slack.team_id (or slack.enterprise_id)"}},
		{"enterprise instead of team", valid + "slack: {channel: C1, app_id: A1, enterprise_id: E1}\n", true, nil},
		{"whole", valid + "slack: {channel: C1, app_id: A1, team_id: T1}\n", true, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("signoff.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if c.Slack.Given != tt.given || !slices.Equal(c.Slack.Missing(), tt.want) {
				t.Errorf("Given %v, Missing %q; want %v, %q", c.Slack.Given, c.Slack.Missing(), tt.given, tt.want)
			}
		})
	}
}

func TestParseRequesters(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want bool
	}{
		{valid, false},
		{valid + "requesters: {allow_unknown: false}\n", false},
		{valid + "requesters: {allow_unknown: true}\n", true},
	} {
		c, err := Parse("signoff.yaml", []byte(tt.yaml))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if c.Requesters.AllowUnknown != tt.want {
			t.Errorf("%q: AllowUnknown = %v, want %v", tt.yaml[len(valid):], c.Requesters.AllowUnknown, tt.want)
		}
	}
}

func TestRetention(t *testing.T) {
	for _, tc := range []struct {
		name      string
		yaml      string
		age, each time.Duration
	}{
		{"absent: serve prunes nothing", "", 0, 0},
		{"an age, every day", "retention: {runs_older_than: 90d}\n", 90 * 24 * time.Hour, 24 * time.Hour},
		{"an age and how often", "retention: {runs_older_than: 2160h, every: 6h}\n", 90 * 24 * time.Hour, 6 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("signoff.yaml", []byte(valid+tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Retention.RunsOlderThan != tc.age || cfg.Retention.Every != tc.each {
				t.Errorf("retention = %+v, want %s every %s", cfg.Retention, tc.age, tc.each)
			}
		})
	}
}

func TestParseResolveRole(t *testing.T) {
	c, err := Parse("signoff.yaml", []byte(valid))
	if err != nil || c.Resolve.Role != "" {
		t.Fatalf("without resolve: role %q, %v; want none (the engine's default, the highest role)", c.Resolve.Role, err)
	}
	c, err = Parse("signoff.yaml", []byte(valid+"resolve: {role: team_lead}\n"))
	if err != nil || c.Resolve.Role != "team_lead" {
		t.Fatalf("resolve.role = %q, %v; want team_lead", c.Resolve.Role, err)
	}
}

func TestParseAnchors(t *testing.T) {
	c, err := Parse("/etc/signoff/signoff.yaml", []byte(valid))
	if err != nil || c.Anchors.To != "log" || c.Anchors.Every != DefaultAnchorEvery || c.Anchors.AnchorFile() != "" {
		t.Fatalf("without anchors: %+v, %v; want the log every 10m", c.Anchors, err)
	}
	for _, tc := range []struct{ yaml, to, file string }{
		{"anchors: {to: anchors.log, every: 1m}", "/etc/signoff/anchors.log", "/etc/signoff/anchors.log"},
		{"anchors: {to: 'file:/srv/anchors.log'}", "file:/srv/anchors.log", "/srv/anchors.log"},
		{"anchors: {to: 'https://anchors.example/signoff'}", "https://anchors.example/signoff", ""},
	} {
		c, err := Parse("/etc/signoff/signoff.yaml", []byte(valid+tc.yaml+"\n"))
		if err != nil || c.Anchors.To != tc.to || c.Anchors.AnchorFile() != tc.file {
			t.Errorf("%s: %+v (file %q), %v; want to %q, file %q", tc.yaml, c.Anchors, c.Anchors.AnchorFile(), err, tc.to, tc.file)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"anchors: {every: 1m}", "signoff.yaml:15: anchors.to: required"},
		{"anchors: {to: 'ftp://x/y'}", `anchors.to: "ftp://x/y": want log, a file, or an http(s) URL`},
		{"anchors: {to: 'https://u:p@x/y'}", `is not a URL to POST anchors to`},
		{"anchors: {to: log, every: 0s}", `anchors.every: want a duration from 1s to 24h`},
	} {
		_, err := Parse("signoff.yaml", []byte(valid+tc.yaml+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
