package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseMCP: mcp: names upstreams (a command or a URL whose headers come
// from environment variables), callers by token hash, and a hold within
// bounds; operators by token hash and a member of the roles; anything else
// is refused with its line, and no secret value is ever taken from the file.
func TestParseMCP(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	var abab [32]byte
	for i := range abab {
		abab[i] = 0xab
	}
	with := func(mcp string) string { return valid + "mcp:\n" + mcp }
	tests := []struct {
		name string
		yaml string
		want MCPConfig
		err  string
	}{
		{"command and url", with(`  upstreams:
    - {name: files, command: [npx, -y, "@modelcontextprotocol/server-filesystem", /srv/data]}
    - {name: tickets, url: "https://tickets.internal/mcp", headers_env: {authorization: TICKETS_MCP_AUTH}}
  identities: [{token_sha256: ` + hash + `, requester: agent:coder}]
  hold: 20s
`), MCPConfig{Upstreams: []MCPUpstream{
			{Name: "files", Command: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/data"}},
			{Name: "tickets", URL: "https://tickets.internal/mcp", HeadersEnv: map[string]string{"Authorization": "TICKETS_MCP_AUTH"}}},
			Identities: []MCPIdentity{{SHA256: [32]byte{0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab,
				0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab}, Requester: "agent:coder"}},
			Hold: 20 * time.Second}, ""},
		{"none", valid, MCPConfig{Hold: DefaultMCPHold}, ""},
		{"no upstream", with("  hold: 10s\n"), MCPConfig{}, `signoff.yaml:15: mcp.upstreams: required: at least one upstream MCP server, e.g. - {name: files, command: [npx, -y, "@modelcontextprotocol/server-filesystem", /srv/data]}`},
		{"a dot in the name", with("  upstreams: [{name: my.files, command: [x]}]\n"), MCPConfig{},
			`signoff.yaml:16: mcp.upstreams[0].name: "my.files": want a short lower-case name (letters, digits, _ and -, at most 32), which prefixes its tools' names`},
		{"two of one name", with("  upstreams: [{name: a, command: [x]}, {name: a, command: [y]}]\n"), MCPConfig{},
			`signoff.yaml:16: mcp.upstreams[1].name: "a" names another upstream too: each needs its own name`},
		{"both", with("  upstreams: [{name: a, command: [x], url: \"https://a.example/mcp\"}]\n"), MCPConfig{},
			`signoff.yaml:16: mcp.upstreams[0].url: give command or url, not both`},
		{"neither", with("  upstreams:\n    - name: a\n"), MCPConfig{},
			`signoff.yaml:17: mcp.upstreams[0]: required: command (a program speaking MCP on stdio) or url (a streamable HTTP endpoint)`},
		{"a secret in the url", with("  upstreams: [{name: a, url: \"https://u:p@a.example/mcp\"}]\n"), MCPConfig{},
			`signoff.yaml:16: mcp.upstreams[0].url: want an http(s) URL without credentials (headers_env names where they come from), got "https://u:p@a.example/mcp"`},
		{"a header's value instead of a variable", with("  upstreams:\n    - name: a\n      url: \"https://a.example/mcp\"\n      headers_env: {Authorization: \"Bearer s3cret\"}\n"), MCPConfig{},
			`signoff.yaml:19: mcp.upstreams[0].headers_env.Authorization: want the name of an environment variable holding the value (never the value itself), got 13 characters`},
		{"headers for a command", with("  upstreams: [{name: a, command: [x], headers_env: {X-Key: KEY}}]\n"), MCPConfig{},
			`signoff.yaml:16: mcp.upstreams[0].headers_env: headers go with url: an upstream run as a command takes its environment`},
		{"a bad hash", with("  upstreams: [{name: a, command: [x]}]\n  identities: [{token_sha256: abc, requester: agent:coder}]\n"), MCPConfig{},
			`signoff.yaml:17: mcp.identities[0].token_sha256: want the token's SHA-256 as 64 hex digits (signoff token new prints it), got 3 characters`},
		{"no requester", with("  upstreams: [{name: a, command: [x]}]\n  identities: [{token_sha256: " + hash + "}]\n"), MCPConfig{},
			`signoff.yaml:17: mcp.identities[0].requester: required: the requester the token's calls speak for, one line (e.g. agent:coder)`},
		{"an operator", with("  upstreams: [{name: a, command: [x]}]\n  operators: [{token_sha256: " + hash + ", member: U0LEAD0001}]\n"),
			MCPConfig{Upstreams: []MCPUpstream{{Name: "a", Command: []string{"x"}}}, Operators: []MCPOperator{{SHA256: abab, Member: "U0LEAD0001"}},
				Hold: DefaultMCPHold}, ""},
		{"an operator in no role", with("  upstreams: [{name: a, command: [x]}]\n  operators: [{token_sha256: " + hash + ", member: U0NOBODY01}]\n"), MCPConfig{},
			`signoff.yaml:17: mcp.operators[0].member: "U0NOBODY01" is in no role: an operator decides with their role, so add them to one (roles: members)`},
		{"an operator without a member", with("  upstreams: [{name: a, command: [x]}]\n  operators: [{token_sha256: " + hash + "}]\n"), MCPConfig{},
			`signoff.yaml:17: mcp.operators[0].member: required: the person who decides with this token, as the roles name them (e.g. U0LEAD0001)`},
		{"an operator's bad hash", with("  upstreams: [{name: a, command: [x]}]\n  operators: [{token_sha256: abc, member: U0LEAD0001}]\n"), MCPConfig{},
			`signoff.yaml:17: mcp.operators[0].token_sha256: want the token's SHA-256 as 64 hex digits (signoff token new prints it), got 3 characters`},
		{"two operators of one token", with("  upstreams: [{name: a, command: [x]}]\n  operators:\n    - {token_sha256: " + hash + ", member: U0LEAD0001}\n    - {token_sha256: " + hash + ", member: U0MGR00001}\n"), MCPConfig{},
			`signoff.yaml:19: mcp.operators[1].token_sha256: the same token as another operator: every operator needs their own`},
		{"an agent's token as an operator's", with("  upstreams: [{name: a, command: [x]}]\n  identities: [{token_sha256: " + hash + ", requester: agent:coder}]\n  operators: [{token_sha256: " + hash + ", member: U0LEAD0001}]\n"), MCPConfig{},
			`signoff.yaml:18: mcp.operators[0].token_sha256: the token of mcp.identities[0] (agent:coder): an agent's token never decides; give the operator a token of their own`},
		{"hold too long", with("  upstreams: [{name: a, command: [x]}]\n  hold: 2m\n"), MCPConfig{},
			`signoff.yaml:17: mcp.hold: 2m: want more than 0 and at most 50s, before the client gives up on the call`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("signoff.yaml", []byte(tt.yaml))
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error\n got: %v\nwant: %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.MCP, tt.want) {
				t.Fatalf("mcp = %+v\nwant %+v", c.MCP, tt.want)
			}
		})
	}
}

// TestRulesMayNameUpstreamTools: a rule may name a tool of a configured
// upstream, which the upstream lists only when the gateway connects; one of
// an upstream the config does not have is refused as any unknown action.
func TestRulesMayNameUpstreamTools(t *testing.T) {
	rule := func(action string) string {
		return strings.Replace(valid, `- {name: everything-else, when: "true", risk: low}`,
			`- {name: tool, when: 'action.name == "`+action+`"', risk: low}`+"\n    "+`- {name: everything-else, when: "true", risk: low}`, 1) +
			"mcp:\n  upstreams: [{name: files, command: [x]}]\n"
	}
	if _, err := Parse("signoff.yaml", []byte(rule("mcp:files.read_text_file"))); err != nil {
		t.Fatalf("a rule naming a tool of files: %v", err)
	}
	_, err := Parse("signoff.yaml", []byte(rule("mcp:tickets.read")))
	if err == nil || !strings.Contains(err.Error(), `policy.rules[1].when: no action is named "mcp:tickets.read"`) {
		t.Fatalf("a rule naming a tool of no upstream: %v, want refused", err)
	}
}
