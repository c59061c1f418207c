package app

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/config"
)

// TestServeSlackSetup: at start `signoff serve` logs who Slack's auth.test
// says the bot token speaks for, its team id first, and warns when that is
// not the config's organisation or when the token lacks usergroups:read that
// slack.user_groups needs; it answers the slash command under the name
// slack.command gives, and its help names that command; config check names it.
func TestServeSlackSetup(t *testing.T) {
	t.Parallel()
	manifestScopes := []string{"channels:read", "groups:read", "chat:write", "commands", "channels:history", "groups:history", "im:history", "im:write"}
	for _, tt := range []struct {
		name    string
		extra   string // more of the slack section
		prepare func(fs *fakeslack.Server)
		want    []string // in serve's log
		notWant []string
	}{
		{"the config's team", "", func(fs *fakeslack.Server) { fs.SetScopes(manifestScopes...) },
			[]string{`msg="slack bot token works" team_id=T0SHOP0001 team="Lampkin Shop"`, "bot_user_id=" + fakeslack.Bot},
			[]string{"another organisation", "usergroups:read"}},
		{"another team", "", func(fs *fakeslack.Server) { fs.SetTeam("T0OTHER001", "") },
			[]string{`msg="slack bot token works" team_id=T0OTHER001`, "the bot token is of another organisation", "set slack.team_id to T0OTHER001"},
			nil},
		{"the config's enterprise", "  enterprise_id: E0SHOPORG1\n", func(fs *fakeslack.Server) { fs.SetTeam("T0BRANCH01", "E0SHOPORG1") },
			[]string{`team_id=T0BRANCH01`, "enterprise_id=E0SHOPORG1"}, []string{"another organisation"}},
		{"user groups without their scope", "  user_groups: {team_lead: S0LEADS001}\n", func(fs *fakeslack.Server) { fs.SetScopes(manifestScopes...) },
			[]string{"the bot token lacks usergroups:read, so members of slack.user_groups cannot approve"}, nil},
		{"user groups with their scope", "  user_groups: {team_lead: S0LEADS001}\n",
			func(fs *fakeslack.Server) { fs.SetScopes(append(manifestScopes, "usergroups:read")...) },
			nil, []string{"usergroups:read"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := fakeslack.New()
			t.Cleanup(fs.Close)
			tt.prepare(fs)
			dir := t.TempDir()
			cfg := filepath.Join(dir, "signoff.yaml")
			y := string(config.DefaultYAML()) + slackSection(fs) + "  command: /approvals\n" + tt.extra
			if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
				t.Fatal(err)
			}
			srv := startServeChild(t, dir, cfg, fs)
			addr := srv.addr(t)
			srv.mu.Lock()
			log := srv.log.String()
			srv.mu.Unlock()
			for _, w := range tt.want {
				if !strings.Contains(log, w) {
					t.Errorf("serve's log lacks %q:\n%s", w, log)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(log, w) {
					t.Errorf("serve's log has %q:\n%s", w, log)
				}
			}
			if !strings.Contains(log, "; slack: on, channel C0APPROVALS, command /approvals\n") {
				t.Errorf("the start line does not name the command:\n%s", log)
			}

			for _, tc := range []struct{ command, want string }{
				{"/approvals", "`/approvals pending [page]`"},
				{"/runs", "This signoff answers `/approvals` (its slack.command), not `/runs`"},
			} {
				form := strings.NewReplacer("{{USER_ID}}", lead1, "{{TEXT}}", "help", "&command=%2Fruns&", "&command="+url.QueryEscape(tc.command)+"&").
					Replace(strings.TrimSpace(string(readSlackFixture(t, "slash_runs.form"))))
				a := sendSigned(t, http.DefaultClient, "serve", addr, signNow("/slack/commands", []byte(freshTrigger(form))))
				var r struct{ Text string }
				if err := json.Unmarshal([]byte(a.body), &r); a.status != http.StatusOK || err != nil || !strings.Contains(r.Text, tc.want) {
					t.Errorf("%s help: %d %s (%v), want text with %q", tc.command, a.status, a.body, err, tc.want)
				}
			}
		})
	}
	t.Run("config check", func(t *testing.T) {
		t.Parallel()
		fs := fakeslack.New()
		t.Cleanup(fs.Close)
		dir := t.TempDir()
		cfg := filepath.Join(dir, "signoff.yaml")
		if err := os.WriteFile(cfg, []byte(string(config.DefaultYAML())+slackSection(fs)+"  command: /approvals\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd, out, errb := child(t, dir, noSlackEnv, "--config", cfg, "config", "check")
		if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "  on: channel C0APPROVALS, app A0SIGNOFF1, team T0SHOP0001, slash command /approvals\n") {
			t.Errorf("config check: %v\n%s%s", err, out, errb)
		}
	})
}

// TestTheSlackSetupSaysWhereEachIDComesFrom: the Slack setup says, for every
// id the slack section and the roles take, where in Slack or its API to find
// it, and names the manifest's setting that allows an org-wide install
// (which bot's TestManifest holds the manifest to).
func TestTheSlackSetupSaysWhereEachIDComesFrom(t *testing.T) {
	section := docSection(t, "docs/slack.md", "Setting up the app")
	if !strings.Contains(section, "org_deploy_enabled: true") {
		t.Error("the setup does not name org_deploy_enabled: true")
	}
	// One bullet per id, read as one line of words.
	bullets := map[string]string{}
	_, list, ok := strings.Cut(section, "Where each id comes from:\n")
	if !ok {
		t.Fatal("the Slack setup does not say where each id comes from")
	}
	key := ""
	for _, line := range strings.Split(list, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "- "):
			key = strings.Fields(trimmed)[1]
			bullets[key] = trimmed
		case key != "" && strings.HasPrefix(line, "     "):
			bullets[key] += " " + trimmed
		default:
			key = ""
		}
		if key == "" && len(bullets) > 0 {
			break
		}
	}
	for _, tc := range []struct{ id, where string }{
		{"`channel`", "Channel ID is at the bottom of About"},
		{"`app_id`", "Basic Information → App Credentials → App ID"},
		{"`team_id`", "auth.test"},
		{"`enterprise_id`", "auth.test"},
		{"people's", "Copy member ID"},
		{"user", "usergroups.list"},
	} {
		if got, ok := bullets[tc.id]; !ok || !strings.Contains(got, tc.where) {
			t.Errorf("the bullet for %s (%q) does not say %q", tc.id, got, tc.where)
		}
	}
}
