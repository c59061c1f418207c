package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseUI(t *testing.T) {
	const oidc = "  oidc:\n    issuer: https://idp.corp.example\n    client_id: signoff\n    client_secret_env: SIGNOFF_OIDC_CLIENT_SECRET\n"
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
		{"oidc, every field, members", "ui:\n  plain_http: true\n  oidc:\n    issuer: http://127.0.0.1:9000/oidc\n    client_id: signoff\n" +
			"    client_secret_env: OIDC_SECRET\n    redirect_url: http://127.0.0.1:8080/ui/oidc/callback\n    scopes: [openid, email, groups]\n" +
			"    allowed: {hd: [corp.example], groups: [approvers, ops], email_verified: [true]}\n" +
			"  members:\n    - {slack: U0LEAD0001, oidc: Ana@Corp.Example}\n    - {slack: U0MGR00001, oidc: 10769150350006150715113082367}\n",
			UIConfig{Given: true, PlainHTTP: true, OIDC: &OIDCConfig{Issuer: "http://127.0.0.1:9000/oidc", ClientID: "signoff", ClientSecretEnv: "OIDC_SECRET",
				RedirectURL: "http://127.0.0.1:8080/ui/oidc/callback", Scopes: []string{"openid", "email", "groups"},
				Allowed: map[string][]string{"hd": {"corp.example"}, "groups": {"approvers", "ops"}, "email_verified": {"true"}}},
				Members: []UIMember{{Slack: "U0LEAD0001", OIDC: "ana@corp.example"}, {Slack: "U0MGR00001", OIDC: "10769150350006150715113082367"}}}, ""},
		{"unknown field", "ui: {oauth: {}}\n", UIConfig{}, `unknown field "oauth" (known: read_only, local_login, session_key_file, oidc, plain_http, members, base_url)`},
		{"a base URL", "ui: {base_url: \"https://signoff.example.com/ui/\"}\n", UIConfig{Given: true, BaseURL: "https://signoff.example.com/ui"}, ""},
		{"a base URL without its scheme", "ui: {base_url: signoff.example.com/ui}\n", UIConfig{}, "ui.base_url: \"signoff.example.com/ui\": give the console's full address"},
		{"a base URL with a query", "ui: {base_url: \"https://signoff.example.com/ui?x=1\"}\n", UIConfig{}, "ui.base_url: \"https://signoff.example.com/ui?x=1\": no query"},
		{"not a bool", "ui: {read_only: maybe}\n", UIConfig{}, "ui.read_only"},
		{"no issuer", "ui:\n  oidc: {client_id: a, client_secret_env: B}\n", UIConfig{}, "ui.oidc.issuer"},
		{"an issuer over plain http elsewhere", "ui:\n  oidc: {issuer: http://idp.corp.example, client_id: a, client_secret_env: B}\n", UIConfig{}, "must be https (plain http only on loopback)"},
		{"no client id", "ui:\n  oidc: {issuer: https://idp.corp.example, client_secret_env: B}\n", UIConfig{}, "ui.oidc.client_id"},
		{"no secret variable", "ui:\n  oidc: {issuer: https://idp.corp.example, client_id: a}\n", UIConfig{}, "ui.oidc.client_secret_env: name the environment variable"},
		{"the secret itself", "ui:\n  oidc: {issuer: https://idp.corp.example, client_id: a, client_secret_env: 's3cr3t-!x'}\n", UIConfig{}, "ui.oidc.client_secret_env"},
		{"the secret in the file", "ui:\n  oidc: {issuer: https://idp.corp.example, client_id: a, client_secret: x, client_secret_env: B}\n", UIConfig{}, `unknown field "client_secret"`},
		{"a redirect that is no URL", "ui:\n" + oidc + "    redirect_url: /ui/oidc/callback\n", UIConfig{}, "ui.oidc.redirect_url"},
		{"scopes without openid", "ui:\n" + oidc + "    scopes: [email]\n", UIConfig{}, "ui.oidc.scopes: the scopes must include openid"},
		{"an allowed claim without values", "ui:\n" + oidc + "    allowed: {hd: []}\n", UIConfig{}, "ui.oidc.allowed.hd"},
		{"plain http without oidc", "ui: {plain_http: true}\n", UIConfig{}, "ui.plain_http"},
		{"members without oidc", "ui:\n  members: [{slack: U0LEAD0001, oidc: ana@corp.example}]\n", UIConfig{}, "ui.members: members map logins"},
		{"a member not a Slack id", "ui:\n" + oidc + "  members: [{slack: ana, oidc: ana@corp.example}]\n", UIConfig{}, `ui.members[0].slack: "ana" is not a Slack user id`},
		{"a member in no role", "ui:\n" + oidc + "  members: [{slack: U0NOBODY1, oidc: ana@corp.example}]\n", UIConfig{}, "U0NOBODY1 is in none of the roles"},
		{"a member without a login", "ui:\n" + oidc + "  members: [{slack: U0LEAD0001}]\n", UIConfig{}, "ui.members[0].oidc"},
		{"a person twice", "ui:\n" + oidc + "  members:\n    - {slack: U0LEAD0001, oidc: ana@corp.example}\n    - {slack: U0LEAD0001, oidc: ana2@corp.example}\n",
			UIConfig{}, "ui.members[1].slack: U0LEAD0001 is mapped already by ui.members[0]"},
		{"a login twice", "ui:\n" + oidc + "  members:\n    - {slack: U0LEAD0001, oidc: ana@corp.example}\n    - {slack: U0MGR00001, oidc: ANA@corp.example}\n",
			UIConfig{}, "ui.members[1].oidc: ana@corp.example is mapped already by ui.members[0]"},
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
			if !reflect.DeepEqual(cfg.UI, tc.want) {
				t.Fatalf("ui = %+v, want %+v", cfg.UI, tc.want)
			}
		})
	}
}
