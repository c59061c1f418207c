package config

import (
	"strings"
	"testing"
)

func TestParseUI(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want UIConfig
		err  string
	}{
		{"absent: no console", "", UIConfig{}, ""},
		{"on, defaults", "ui: {}\n", UIConfig{Given: true}, ""},
		{"read-only, local login, a key file", "ui: {read_only: true, local_login: true, session_key_file: ui.key}\n",
			UIConfig{Given: true, ReadOnly: true, LocalLogin: true, SessionKeyFile: "ui.key"}, ""},
		{"a base URL", "ui: {base_url: \"https://signoff.example.com/ui/\"}\n", UIConfig{Given: true, BaseURL: "https://signoff.example.com/ui"}, ""},
		{"a base URL without its scheme", "ui: {base_url: signoff.example.com/ui}\n", UIConfig{}, "ui.base_url: \"signoff.example.com/ui\": give the console's full address"},
		{"a base URL with a query", "ui: {base_url: \"https://signoff.example.com/ui?x=1\"}\n", UIConfig{}, "ui.base_url: \"https://signoff.example.com/ui?x=1\": no query"},
		{"unknown field", "ui: {oidc: {}}\n", UIConfig{}, `unknown field "oidc" (known: read_only, local_login, session_key_file, base_url)`},
		{"not a bool", "ui: {read_only: maybe}\n", UIConfig{}, "ui.read_only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("signoff.yaml", []byte(valid+tc.yaml))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "signoff.yaml:") {
					t.Fatalf("err = %v, want one with its line saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.UI != tc.want {
				t.Fatalf("ui = %+v, want %+v", cfg.UI, tc.want)
			}
		})
	}
}
