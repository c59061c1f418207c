package bot

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/labstack/echo/v4"
)

// TestManifest keeps the app manifest in step with the server: the URLs are
// the routes Register adds, the command escapes mentions, and the scopes are
// the ones the bot uses.
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
	if c.Command != "/runs" || !routes["POST "+path(c.URL)] || !c.ShouldEscape {
		t.Errorf("slash command %+v: want /runs posting to a registered route, escaping mentions", c)
	}
	if i := m.Settings.Interactivity; !i.Enabled || !routes["POST "+path(i.RequestURL)] {
		t.Errorf("interactivity %+v: want enabled, posting to a registered route", i)
	}
	// The README's org-wide install (with slack.enterprise_id) needs the
	// manifest to allow it.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !m.Settings.OrgDeploy || !strings.Contains(string(readme), "org_deploy_enabled: true") {
		t.Errorf("org_deploy_enabled is %v; the README's org-wide install needs it true and named", m.Settings.OrgDeploy)
	}
	if m.Settings.SocketMode == nil {
		t.Error("socket_mode_enabled is not spelled out")
	}
	want := []string{"channels:read", "chat:write", "commands", "groups:read", "usergroups:read"}
	got := slices.Sorted(slices.Values(m.OAuth.Scopes.Bot))
	if !slices.Equal(got, want) {
		t.Errorf("bot scopes %v, want %v", got, want)
	}
}
