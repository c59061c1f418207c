package bot

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/labstack/echo/v4"
)

// TestManifest keeps the app manifest in step with the server: the URLs are
// the routes Register adds, the command is the default one and says how to
// rename it, it escapes mentions, and the scopes are the ones every bot uses;
// usergroups:read, which only slack.user_groups needs, is left for those who
// set it, with why.
func TestManifest(t *testing.T) {
	b, err := os.ReadFile("manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Features struct {
			SlashCommands []struct {
				Command      string `yaml:"command"`
				URL          string `yaml:"url"`
				ShouldEscape bool   `yaml:"should_escape"`
			} `yaml:"slash_commands"`
			AppHome struct {
				MessagesTab bool `yaml:"messages_tab_enabled"`
			} `yaml:"app_home"`
		} `yaml:"features"`
		OAuth struct {
			Scopes struct {
				Bot []string `yaml:"bot"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
		Settings struct {
			Interactivity struct {
				Enabled    bool   `yaml:"is_enabled"`
				RequestURL string `yaml:"request_url"`
			} `yaml:"interactivity"`
			SocketMode *bool `yaml:"socket_mode_enabled"`
			OrgDeploy  bool  `yaml:"org_deploy_enabled"`
		} `yaml:"settings"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	(&Server{}).Register(e)
	routes := map[string]bool{}
	for _, r := range e.Routes() {
		routes[r.Method+" "+r.Path] = true
	}
	path := func(u string) string { return strings.TrimPrefix(u, "https://signoff.example.com") }
	if len(m.Features.SlashCommands) != 1 {
		t.Fatalf("%d slash commands, want 1", len(m.Features.SlashCommands))
	}
	c := m.Features.SlashCommands[0]
	if c.Command != DefaultCommand || !routes["POST "+path(c.URL)] || !c.ShouldEscape {
		t.Errorf("slash command %+v: want %s posting to a registered route, escaping mentions", c, DefaultCommand)
	}
	if !strings.Contains(string(b), "set slack.command in signoff's config to the same name") {
		t.Error("the manifest does not say that a renamed command needs slack.command")
	}
	if !regexp.MustCompile(`(?m)^\s*# With slack.user_groups .*\n(\s*#.*\n)*\s*# - usergroups:read$`).Match(b) {
		t.Error("the manifest does not offer usergroups:read for slack.user_groups, commented out with why")
	}
	if i := m.Settings.Interactivity; !i.Enabled || !routes["POST "+path(i.RequestURL)] {
		t.Errorf("interactivity %+v: want enabled, posting to a registered route", i)
	}
	// An org-wide install (with slack.enterprise_id) needs the manifest to
	// allow it; the Slack setup names the setting (cmd/signoff's
	// TestTheSlackSetupSaysWhereEachIDComesFrom).
	if !m.Settings.OrgDeploy {
		t.Errorf("org_deploy_enabled is %v; an org-wide install needs it true", m.Settings.OrgDeploy)
	}
	// The outcome of a run goes to a requester who is a Slack user as a
	// direct message, which Slack shows in the app's Messages tab.
	if !m.Features.AppHome.MessagesTab {
		t.Error("messages_tab_enabled is not true; requesters would not see the outcome")
	}
	if m.Settings.SocketMode == nil {
		t.Error("socket_mode_enabled is not spelled out")
	}
	want := []string{"channels:history", "channels:read", "chat:write", "commands", "groups:history", "groups:read", "im:history", "im:write"}
	got := slices.Sorted(slices.Values(m.OAuth.Scopes.Bot))
	if !slices.Equal(got, want) {
		t.Errorf("bot scopes %v, want %v", got, want)
	}
}
