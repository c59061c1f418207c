package app

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata")

// inFolder runs this program as a separate process in dir, with no --db,
// --shop or --config: as someone who forgot them would.
func inFolder(t *testing.T, dir string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

const builtinNote = "signoff: using the built-in demo config (no --config, no SIGNOFF_CONFIG, no ./signoff.yaml)"

// TestConfigInUse: without --config, ./signoff.yaml is the config; without that
// either, the built-in demo config is used and said to be, and serve refuses it.
func TestConfigInUse(t *testing.T) {
	t.Parallel()
	// A config of one's own that every refund waits for a person under.
	own := strings.Replace(string(mustRead(t, "../../config/default.yaml")), `      when: action.name == "request_refund"
      risk: low`, `      when: action.name == "request_refund"
      risk: low
      approval: {role: team_lead, expires: 1h}`, 1)
	if !strings.Contains(own, "expires: 1h") {
		t.Fatal("the built-in config changed: the test's edit does not apply")
	}
	small, err := filepath.Abs(fixture("small-refund.json"))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("no config anywhere", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		code, out, errs := inFolder(t, dir, nil, "submit", small)
		if code != exitDone || !strings.Contains(errs, builtinNote) {
			t.Errorf("exit %d, stderr %q; want 0 and the note %q (stdout %q)", code, errs, builtinNote, out)
		}
		if strings.Count(errs, builtinNote) != 1 || strings.Count(strings.SplitAfter(errs, builtinNote)[1], "\n") > 2 {
			t.Errorf("the note should be one line, stderr: %q", errs)
		}
	})
	t.Run("signoff.yaml in the folder", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "signoff.yaml"), []byte(own), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errs := inFolder(t, dir, nil, "submit", small)
		if code != exitWaiting || strings.Contains(errs, "built-in") {
			t.Errorf("exit %d, stderr %q; want 3 under ./signoff.yaml, no note (stdout %q)", code, errs, out)
		}
		// --config and SIGNOFF_CONFIG still win over the file in the folder.
		def := filepath.Join(dir, "default.yaml")
		if err := os.WriteFile(def, mustRead(t, "../../config/default.yaml"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			env  []string
			args []string
		}{
			{nil, []string{"--config", def, "config", "check"}},
			{[]string{"SIGNOFF_CONFIG=" + def}, []string{"config", "check"}},
		} {
			if code, out, _ := inFolder(t, dir, tc.env, tc.args...); code != 0 || !strings.HasPrefix(out, "config: "+def+"\n") {
				t.Errorf("%v %v: exit %d, stdout %q; want the config %s", tc.env, tc.args, code, out, def)
			}
		}
	})
	t.Run("serve refuses the built-in config", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		code, out, errs := inFolder(t, dir, []string{"SLACK_SIGNING_SECRET=s", "SLACK_BOT_TOKEN=xoxb-1"}, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
		if code != exitRefused || !strings.Contains(errs, "pass --config FILE") {
			t.Errorf("exit %d, stderr %q; want 2 saying to pass --config (stdout %q)", code, errs, out)
		}
		for _, f := range []string{"signoff.db", "shop.db"} {
			if exists(filepath.Join(dir, f)) {
				t.Errorf("serve created %s", f)
			}
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUnknownRequester: a requester in no role is refused (exit 2, no run, no
// refund) unless the config lets anyone propose; conditions see the role.
func TestUnknownRequester(t *testing.T) {
	t.Parallel()
	strangerSmall := strings.Replace(string(mustRead(t, fixture("small-refund.json"))),
		`"requester": {"id": "agent:resolver", "name": "Resolver agent"}`, `"requester": {"id": "U0STRANGER", "name": "Someone"}`, 1)
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		code, out, errs := signoffIn(t, dir, strangerSmall, "submit", "-")
		if code != exitRefused || !strings.Contains(errs, `requester "U0STRANGER" holds no role`) {
			t.Fatalf("exit %d, stderr %q; want 2 naming the requester (stdout %q)", code, errs, out)
		}
		if rs := runs(t, dir); len(rs) != 0 {
			t.Errorf("a refused proposal made runs: %+v", rs)
		}
		noChanges(t, dir)
	})
	t.Run("allowed by the config, and the policy sees no role", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		roleless := writeConfig(t, dir, "roleless.yaml", "actions:", "requesters: {allow_unknown: true}\nactions:",
			"  rules: # first match wins\n", "  rules: # first match wins\n    - {name: roleless, when: 'requester.role == \"\"', risk: high, approval: {role: manager, expires: 1h}}\n")
		must(t, dir, exitWaiting, "--config", roleless, "submit", proposal(t, dir, "p1.json", strangerSmall))
		anyone := writeConfig(t, dir, "anyone.yaml", "actions:", "requesters: {allow_unknown: true}\nactions:")
		must(t, dir, exitDone, "--config", anyone, "submit", proposal(t, dir, "p2.json", strings.Replace(strangerSmall, "resolver-T-90104-1", "other-key", 1)))
	})
}

// TestConfigErrors: every config problem names the file and the line, exits 2,
// and creates neither the store nor the shop.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		old, new string
		want     string
		at       string // the text on the line the error names; new if empty
	}{
		{"unknown field of action", `when: action.name == "reship_item"`, `when: action.nme == "reship_item"`, "undefined field 'nme'", ""},
		{"unknown executor", `reship_item: {executor: demo}`, `reship_item: {executor: webhok}`, `unknown executor type "webhok" (this build has: caller, command, demo, mcp, webhook)`, ""},
		{"action the demo executor lacks", `reship_item: {executor: demo}`, "reship_item: {executor: demo}\n  wire_money: {executor: demo}", `the demo executor has no action "wire_money"`, "wire_money"},
		{"no roles", "roles: # lowest first; a higher role may approve what a lower one may\n  - {name: agent, members: [agent:resolver]}\n  - {name: team_lead, members: [U0LEAD0001, U0LEAD0002]}\n  - {name: manager, members: [U0MGR00001]}\n",
			"roles: []\n", "at least one role is required", ""},
		{"more approvals than people", `approval: {role: team_lead, count: 1, expires: 72h}`, `approval: {role: team_lead, count: 5, expires: 72h}`,
			"5 approvals needed, but only 3 people are listed for team_lead and above", ""},
		{"rule about an unknown action", `when: action.name == "reship_item"`, `when: action.name == "reship"`, `no action is named "reship"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := writeConfig(t, dir, "signoff.yaml", tt.old, tt.new)
			b := mustRead(t, cfg)
			at := tt.new
			if tt.at != "" {
				at = tt.at
			}
			line := strings.Count(string(b[:strings.Index(string(b), at)]), "\n") + 1
			where := cfg + ":" + strconv.Itoa(line) + ":"
			for _, args := range [][]string{
				{"--config", cfg, "submit", fixture("small-refund.json")},
				{"--config", cfg, "runs"},
				{"config", "check", cfg},
				{"--config", cfg, "policy", "explain", fixture("small-refund.json")},
			} {
				code, out, errs := signoff(t, dir, args...)
				if code != exitRefused || !strings.Contains(errs, where) || !strings.Contains(errs, tt.want) {
					t.Errorf("%v: exit %d, stderr %q; want 2 naming %q and %q (stdout %q)", args, code, errs, where, tt.want, out)
				}
			}
			for _, f := range []string{dbPath(dir), shopPath(dir)} {
				if exists(f) {
					t.Errorf("a refused config created %s", f)
				}
			}
		})
	}
	t.Run("unreadable file", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		missing := filepath.Join(dir, "nope.yaml")
		code, _, errs := signoff(t, dir, "--config", missing, "runs")
		if code != exitRefused || !strings.Contains(errs, missing+": cannot read the config") || exists(dbPath(dir)) {
			t.Errorf("exit %d, stderr %q, store created %v; want 2, the file, no store", code, errs, exists(dbPath(dir)))
		}
	})
}

// TestConfigWarnings: a config that loads with warnings says them, with the
// line, on every command and in config check.
func TestConfigWarnings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// No catch-all: the last rule only covers refunds.
	cfg := writeConfig(t, dir, "signoff.yaml", "    - name: everything-else\n      when: \"true\"\n", "    - name: everything-else\n      when: action.name == \"request_refund\"\n")
	b := mustRead(t, cfg)
	line := strings.Count(string(b[:strings.Index(string(b), "- name: everything-else")]), "\n") + 1
	want := cfg + ":" + strconv.Itoa(line) + ": policy.rules[4]: no rule matches every action"
	code, _, errs := signoff(t, dir, "--config", cfg, "runs")
	if code != 0 || !strings.Contains(errs, "signoff: warning: "+want) {
		t.Errorf("runs: exit %d, stderr %q; want 0 and the warning %q", code, errs, want)
	}
	var out string
	code, out, errs = signoff(t, dir, "config", "check", cfg)
	if code != 0 || !strings.Contains(out, "warnings (1):\n  "+want) || errs != "" {
		t.Errorf("config check: exit %d, stdout %q, stderr %q; want 0 listing %q", code, out, errs, want)
	}
}

// TestConfigCheck: the summary of the built-in config, and nothing opened.
func TestConfigCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := must(t, dir, 0, "config", "check")
	golden(t, "config_check_builtin.txt", out)
	if exists(dbPath(dir)) || exists(shopPath(dir)) {
		t.Error("config check opened the store or the shop")
	}
	if code, _, errs := signoff(t, dir, "config", "check", "a.yaml", "b.yaml"); code != exitRefused {
		t.Errorf("two files: exit %d, stderr %q; want 2", code, errs)
	}
}

// TestConfigCheckShowsTheAPIAndArgumentsNoSchemaHas: config check lists
// the API tokens (id, requester, scopes, never their hashes) and the
// callback prefixes allowed, and warns of each rule that reads an argument
// the schema of an action it applies to does not have, naming the action;
// reads an action.name test or a presence test guards are not warned of.
func TestConfigCheckShowsTheAPIAndArgumentsNoSchemaHas(t *testing.T) {
	t.Parallel()
	rules := []struct{ name, when, warning string }{
		{"typo", `action.name == "rotate_key" && action.args.keyid == "k-1"`,
			"reads action.args.keyid, which is not a property of rotate_key's schema (its properties: key_id)"},
		{"in-a-list", `action.name in ["reship_item", "create_return_label"] && action.args.quantity > 1`,
			"reads action.args.quantity, which is not a property of create_return_label's schema (its properties: free_shipping, order_id, reason, sku)"},
		{"any-action", `action.args["qty"] > 3`,
			"reads action.args.qty, which is not a property of the schemas of create_return_label, request_refund, reship_item, rotate_key"},
		{"all-but-one", `action.name != "request_refund" && action.args.amount > 1`,
			"reads action.args.amount, which is not a property of the schemas of create_return_label, reship_item, rotate_key"},
		{"has-guard", `has(action.args.total) && action.args.total > 5`, ""},
		{"in-guard", `"total" in action.args && action.args.total > 5`, ""},
		{"ternary", `action.name == "reship_item" ? action.args.quantity > 2 : false`, ""},
		{"declared", `action.name == "request_refund" && action.args.currency == "CAD"`, ""},
	}
	const (
		hash1 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
		hash2 = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
	)
	var extra strings.Builder
	for _, r := range rules {
		fmt.Fprintf(&extra, "    - name: %s\n      when: '%s'\n      risk: high\n", r.name, r.when)
	}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "signoff.yaml", "    - name: everything-else\n", extra.String()+"    - name: everything-else\n",
		"  create_return_label: {executor: demo}\n", `  create_return_label: {executor: demo}
  rotate_key:
    schema: {type: object, required: [key_id], properties: {key_id: {type: string}}}
    executor: {type: command, command: [/bin/true]}
api:
  tokens:
    - {id: resolver, sha256: `+hash1+`, requester: agent:resolver, scopes: [submit, read]}
    - {id: auditor-bot, sha256: `+hash2+`, requester: agent:auditor, scopes: [read]}
  callbacks:
    allow: [https://hooks.example.com/signoff/, http://127.0.0.1:9000/]
    secret_env: SIGNOFF_CALLBACK_SECRET
`)
	out := must(t, dir, 0, "config", "check", cfg)
	for _, block := range []string{
		"\napi tokens:\n" +
			"  resolver     requester agent:resolver, scopes submit, read\n" +
			"  auditor-bot  requester agent:auditor, scopes read\n" +
			"  each token: 10 requests a second, bursts of 20\n",
		"\ncallbacks:\n" +
			"  allowed under https://hooks.example.com/signoff/\n" +
			"  allowed under http://127.0.0.1:9000/\n" +
			"  signed with the secret in $SIGNOFF_CALLBACK_SECRET\n",
	} {
		if !strings.Contains(out, block) {
			t.Errorf("config check does not say\n%s\nit says:\n%s", block, out)
		}
	}
	if strings.Contains(out, hash1) || strings.Contains(out, hash2) {
		t.Errorf("config check printed a token's hash:\n%s", out)
	}
	const first = 4 // the built-in config's rules before everything-else
	want := 0
	for i, r := range rules {
		path := fmt.Sprintf("policy.rules[%d].when: ", first+i)
		switch {
		case r.warning != "" && strings.Count(out, path+r.warning+": where it is missing the rule cannot decide") != 1:
			t.Errorf("rule %s: want one warning %q\n%s", r.name, r.warning, out)
		case r.warning == "" && strings.Contains(out, path):
			t.Errorf("rule %s: a warning for a read that cannot fail\n%s", r.name, out)
		}
		if r.warning != "" {
			want++
		}
	}
	if !strings.Contains(out, fmt.Sprintf("\nwarnings (%d):\n", want)) {
		t.Errorf("want %d warnings\n%s", want, out)
	}
	// Every other command says so too, on stderr.
	_, _, errs := signoff(t, dir, "--config", cfg, "runs")
	if strings.Count(errs, "signoff: warning: ") != want || !strings.Contains(errs, rules[0].warning) {
		t.Errorf("runs: want the %d warnings on stderr, got:\n%s", want, errs)
	}
}

// TestPolicyExplain: which rule each action hits, who may approve and by when;
// what submit would refuse is refused the same way; nothing is written.
func TestPolicyExplain(t *testing.T) {
	t.Parallel()
	deadline := regexp.MustCompile(`if submitted now: \d{4}-\d\d-\d\d \d\d:\d\d UTC`)
	tests := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		golden string
		want   string
	}{
		{"waits for a team lead", []string{"policy", "explain", fixture("refund-double-charge.json")}, "", 0, "explain_refund.txt", ""},
		{"runs without approval", []string{"policy", "explain", fixture("small-refund.json")}, "", 0, "", "runs without approval once the checks pass"},
		{"several actions", []string{"policy", "explain", fixture("reship-planter.json")}, "", 0, "explain_reship.txt", ""},
		{"unknown requester from stdin", []string{"policy", "explain", "-"},
			strings.Replace(string(mustRead(t, fixture("small-refund.json"))), `"id": "agent:resolver"`, `"id": "U0STRANGER"`, 1),
			exitRefused, "", `refused: requester "U0STRANGER" holds no role`},
		{"unknown action", []string{"policy", "explain", "-"},
			strings.Replace(string(mustRead(t, fixture("small-refund.json"))), `"name": "request_refund"`, `"name": "wire_money"`, 1),
			exitRefused, "", `refused: invalid proposal: action 1: unknown action "wire_money"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			code, out, errs := signoffIn(t, dir, tt.stdin, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errs)
			}
			if tt.golden != "" {
				golden(t, tt.golden, deadline.ReplaceAllString(out, "if submitted now: DATE"))
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("stdout lacks %q:\n%s", tt.want, out)
			}
			if exists(dbPath(dir)) || exists(shopPath(dir)) {
				t.Error("policy explain opened the store or the shop")
			}
		})
	}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\n got:\n%s\nwant:\n%s", path, got, want)
	}
}
