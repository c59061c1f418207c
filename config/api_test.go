package config

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var tokenHash = hex.EncodeToString(func() []byte { h := sha256.Sum256([]byte("sk_test")); return h[:] }())

// TestParseAPI: tokens by hash, scopes, rate limit and callback prefixes.
func TestParseAPI(t *testing.T) {
	c, err := Parse("signoff.yaml", []byte(valid+`api:
  tokens:
    - {id: resolver, sha256: `+tokenHash+`, requester: "agent:resolver", scopes: [submit, read, read]}
  rate_limit: {per_second: 2.5, burst: 5}
  callbacks:
    allow: [https://agents.example.com/signoff/, http://127.0.0.1:9000/]
    secret_env: SIGNOFF_CALLBACK_SECRET
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(c.API.Tokens) != 1 {
		t.Fatalf("tokens = %+v", c.API.Tokens)
	}
	tok := c.API.Tokens[0]
	if tok.ID != "resolver" || tok.Requester != "agent:resolver" || hex.EncodeToString(tok.SHA256[:]) != tokenHash {
		t.Errorf("token = %+v", tok)
	}
	if !slices.Equal(tok.Scopes, []string{"submit", "read"}) || !tok.Has(ScopeRead) || tok.Has(ScopeCancel) {
		t.Errorf("scopes = %v", tok.Scopes)
	}
	if c.API.Rate != 2.5 || c.API.Burst != 5 {
		t.Errorf("rate = %v burst = %v", c.API.Rate, c.API.Burst)
	}
	for u, want := range map[string]bool{
		"https://agents.example.com/signoff/cb?run=1": true,
		"https://agents.example.com/signoff":          false,
		"https://agents.example.com.evil.test/":       false,
		"http://127.0.0.1:9000/hook":                  true,
		"http://127.0.0.1:90000/hook":                 false,
		// Under the prefix as written, not as a server reads it, or read
		// in more than one way: never allowed, so that neither submit nor
		// the sender of a row stored before lets one through.
		"https://agents.example.com/signoff/../evil":           false,
		"https://agents.example.com/signoff/./../evil":         false,
		"https://agents.example.com/signoff/a/../cb":           false,
		"https://agents.example.com/signoff/%2e%2e/evil":       false,
		"https://agents.example.com/signoff/%2E%2E/evil":       false,
		"https://agents.example.com/signoff/.%2e/evil":         false,
		"https://agents.example.com/signoff/..%2fevil":         false,
		"https://agents.example.com/signoff/..%2Fevil":         false,
		"https://agents.example.com/signoff/..%5cevil":         false,
		"https://agents.example.com/signoff/..\\evil":          false,
		"https://agents.example.com/signoff\\..\\evil":         false,
		"https://agents.example.com/signoff/%252e%252e/evil":   false,
		"https://agents.example.com/signoff/..;/evil":          false,
		"https://agents.example.com/signoff/\uff0e\uff0e/evil": false,
	} {
		if got := c.API.CallbackAllowed(u); got != want {
			t.Errorf("CallbackAllowed(%q) = %v, want %v", u, got, want)
		}
	}
	if c.API.CallbackSecretEnv != "SIGNOFF_CALLBACK_SECRET" {
		t.Errorf("secret_env = %q", c.API.CallbackSecretEnv)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %v", c.Warnings)
	}

	d, err := Parse("signoff.yaml", []byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.API.Tokens) != 0 || d.API.Rate != DefaultRate || d.API.Burst != DefaultBurst || d.API.CallbackAllowed("https://x.test/") {
		t.Errorf("defaults = %+v", d.API)
	}
}

// TestParseAPIRefuses: each broken api block gets its line and reason.
func TestParseAPIRefuses(t *testing.T) {
	tok := func(fields string) string { return valid + "api:\n  tokens:\n    - {" + fields + "}\n" }
	good := "id: a, sha256: " + tokenHash + ", requester: agent:a, scopes: [read]"
	line := strings.Count(valid, "\n") + 3
	at := func(path, msg string) string { return "signoff.yaml:" + itoa(line) + ": " + path + ": " + msg }
	for _, tt := range []struct{ name, yaml, want string }{
		{"no id", tok("sha256: " + tokenHash + ", requester: a, scopes: [read]"), at("api.tokens[0].id", "required: a name for the token, shown in the audit log")},
		{"short hash", tok("id: a, sha256: abc, requester: a, scopes: [read]"), at("api.tokens[0].sha256", "want the token's SHA-256 as 64 hex digits (signoff token new prints it), got 3 characters")},
		{"no requester", tok("id: a, sha256: " + tokenHash + ", scopes: [read]"), at("api.tokens[0].requester", "required: the requester id every proposal made with this token speaks for (e.g. agent:resolver)")},
		{"no scopes", tok("id: a, sha256: " + tokenHash + ", requester: a"), at("api.tokens[0].scopes", "required: one or more of submit, read, cancel, resolve, force, review")},
		{"unknown scope", tok("id: a, sha256: " + tokenHash + ", requester: a, scopes: [admin]"), at("api.tokens[0].scopes[0]", `unknown scope "admin" (scopes: submit, read, cancel, resolve, force, review)`)},
		{"same secret twice", tok(good) + "    - {id: b, sha256: " + tokenHash + ", requester: agent:b, scopes: [read]}\n",
			"signoff.yaml:" + itoa(line+1) + `: api.tokens[1].sha256: the same token as "a": every token needs its own secret`},
		{"same id twice", tok(good) + "    - {id: a, sha256: " + strings.Repeat("0", 64) + ", requester: agent:b, scopes: [read]}\n",
			"signoff.yaml:" + itoa(line+1) + `: api.tokens[1].id: "a" is used by another token`},
		{"zero rate", valid + "api:\n  rate_limit: {per_second: 0}\n", "signoff.yaml:" + itoa(line-1) + ": api.rate_limit.per_second: 0: want a number of requests a second above 0"},
		{"prefix without a path", valid + "api:\n  callbacks:\n    allow: [https://agents.example.com]\n",
			"signoff.yaml:" + itoa(line) + `: api.callbacks.allow[0]: "https://agents.example.com": end the prefix with a path ending in / (e.g. https://agents.example.com/), so that it cannot match a longer host or path`},
		{"prefix not a URL", valid + "api:\n  callbacks:\n    allow: [agents.example.com/]\n",
			"signoff.yaml:" + itoa(line) + `: api.callbacks.allow[0]: "agents.example.com/": want an absolute http(s) URL such as https://agents.example.com/signoff/`},
		{"prefix with a query", valid + "api:\n  callbacks:\n    allow: [\"https://a.example/?x=1\"]\n",
			"signoff.yaml:" + itoa(line) + `: api.callbacks.allow[0]: "https://a.example/?x=1": a prefix has no user, query or fragment`},
		{"prefix with dot segments", valid + "api:\n  callbacks:\n    allow: [https://a.example/cb/../x/]\n",
			"signoff.yaml:" + itoa(line) + `: api.callbacks.allow[0]: "https://a.example/cb/../x/": write the prefix without dot segments, as https://a.example/x/: callback URLs are matched with theirs resolved`},
		{"prefix with an encoded dot", valid + "api:\n  callbacks:\n    allow: [https://a.example/%2e%2e/]\n",
			"signoff.yaml:" + itoa(line) + `: api.callbacks.allow[0]: "https://a.example/%2e%2e/" must not hold a dot encoded as %2e in its path: write the path as it is meant`},
		{"callbacks without a secret", valid + "api:\n  callbacks:\n    allow: [https://a.example/cb/]\n",
			"signoff.yaml:" + itoa(line-1) + `: api.callbacks.secret_env: required with allow: the environment variable that holds the secret (whsec_…) callbacks are signed with, e.g. SIGNOFF_CALLBACK_SECRET`},
		{"secret_env not a name", valid + "api:\n  callbacks:\n    allow: [https://a.example/cb/]\n    secret_env: whsec_abc=\n",
			"signoff.yaml:" + itoa(line+1) + `: api.callbacks.secret_env: "whsec_abc=" is not the name of an environment variable`},
		{"unknown field", valid + "api:\n  token: []\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("signoff.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("accepted: %+v", c.API)
			}
			if tt.want != "" && err.Error() != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tt.want)
			}
		})
	}
}

// TestParseAPIWarnsOfPlainHTTPCallbacks: plain http is allowed (a receiver
// on the same host) but warned about elsewhere.
func TestParseAPIWarnsOfPlainHTTPCallbacks(t *testing.T) {
	c, err := Parse("signoff.yaml", []byte(valid+"api:\n  callbacks:\n    allow: [http://agents.example.com/cb/]\n    secret_env: CB_SECRET\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0].Error(), "api.callbacks.allow[0]") || !strings.Contains(c.Warnings[0].Error(), "prefer https") {
		t.Errorf("warnings = %v", c.Warnings)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
