package app

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/record"
)

// noSlackEnv blanks the Slack settings a developer's shell may hold, so
// that a child sees none.
var noSlackEnv = []string{"SLACK_SIGNING_SECRET=", "SLACK_BOT_TOKEN=", "SLACK_APP_TOKEN="}

// noSlackConfig writes the built-in config without a slack: section, with
// the resolver agent's API token, and returns its path.
func noSlackConfig(t *testing.T, dir string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(serveAPIToken))
	y := string(config.DefaultYAML()) + fmt.Sprintf(`api:
  tokens:
    - {id: resolver, sha256: %s, requester: agent:resolver, scopes: [submit, read, cancel]}
`, hex.EncodeToString(sum[:]))
	if strings.Contains(y, "\nslack:") {
		t.Fatal("the built-in config has a slack: section")
	}
	p := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServeWithoutSlack: with no slack: section and no Slack setting in the
// environment, `signoff serve` starts and says Slack is off; it is ready, its
// Slack routes do not exist, a run an agent submits through the API is
// approved with `signoff approve` and executes, and nothing is queued for
// Slack on the way.
func TestServeWithoutSlack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := noSlackConfig(t, dir)
	if code, out, errs := cliWith(t, dir, cfg, nil, "config", "check"); code != exitDone ||
		!strings.Contains(out, "slack:\n  off (no slack: section); people approve with signoff approve, agents use the API\n") {
		t.Errorf("config check: exit %d, stdout:\n%s\nstderr:\n%s\nwant Slack said to be off", code, out, errs)
	}

	srv := startServeChildEnv(t, dir, cfg, noSlackEnv)
	addr := srv.addr(t)
	srv.mu.Lock()
	started := srv.log.String()
	srv.mu.Unlock()
	if !strings.Contains(started, "; slack: off (no slack: section); people approve with signoff approve, agents use the API\n") {
		t.Errorf("the start line does not say Slack is off:\n%s", started)
	}
	if status, _, body := apiCall(t, srv.adminAddr(t), http.MethodGet, "/readyz", "", nil); status != http.StatusOK {
		t.Fatalf("/readyz: %d %s", status, body)
	}
	for _, path := range []string{"/slack/interactions", "/slack/commands"} {
		if status, _, body := apiCall(t, addr, http.MethodPost, path, "", []byte("payload=%7B%7D")); status != http.StatusNotFound {
			t.Errorf("POST %s without Slack: %d %s, want 404", path, status, body)
		}
	}

	body, err := os.ReadFile(fixture("refund-double-charge.json"))
	if err != nil {
		t.Fatal(err)
	}
	status, _, b := apiCall(t, addr, http.MethodPost, "/v1/runs", serveAPIToken, body)
	var sub struct{ ID, Status string }
	if err := json.Unmarshal(b, &sub); status != http.StatusCreated || err != nil || sub.Status != string(record.StatusWaitingApproval) {
		t.Fatalf("POST /v1/runs: %d %s (%v), want 201 waiting_approval", status, b, err)
	}
	noChanges(t, dir)

	cmd, out, errb := child(t, dir, noSlackEnv, "--config", cfg, "approve", sub.ID, "--as", lead1)
	if err := cmd.Run(); exitCode(err) != exitDone {
		t.Fatalf("signoff approve: exit %d\nstdout:\n%s\nstderr:\n%s", exitCode(err), out, errb)
	}
	oneRefund(t, dir, sub.ID+"/1", "119.00")
	status, _, b = apiCall(t, addr, http.MethodGet, "/v1/runs/"+sub.ID, serveAPIToken, nil)
	if status != http.StatusOK || !strings.Contains(string(b), `"status":"done"`) {
		t.Errorf("GET /v1/runs/%s after the approval: %d %s, want done", sub.ID, status, b)
	}
	code, outbox, errs := cliWith(t, dir, cfg, nil, "outbox", "--json")
	var rows []outboxRow
	if err := json.Unmarshal([]byte(outbox), &rows); code != exitDone || err != nil {
		t.Fatalf("outbox --json: exit %d, %v\n%s%s", code, err, outbox, errs)
	}
	for _, r := range rows {
		if strings.HasPrefix(string(r.Kind), "slack.") {
			t.Errorf("a Slack message was queued without Slack: %+v", r)
		}
	}
}

// TestServeRefusesSlackSetUpInPart: a Slack setup with something missing,
// in the config or in the environment, is refused (exit 2) with one error
// that names everything missing, before any store or shop is made; config
// check names what the config lacks.
func TestServeRefusesSlackSetUpInPart(t *testing.T) {
	t.Parallel()
	whole := "\nslack:\n  channel: C0APPROVALS\n  app_id: A0SIGNOFF1\n  team_id: T0SHOP0001\n"
	tokens := []string{"SLACK_SIGNING_SECRET=" + serveSecret, "SLACK_BOT_TOKEN=" + serveToken}
	for _, tt := range []struct {
		name, slack string
		env, args   []string
		want        []string
		check       string // what config check says of the section
	}{
		{"a channel and nothing else", "\nslack:\n  channel: C0APPROVALS\n", nil, nil,
			[]string{"slack.app_id", "slack.team_id (or slack.enterprise_id)", "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"},
			"missing: slack.app_id, slack.team_id (or slack.enterprise_id)"},
		{"an empty section, with tokens", "\nslack: {}\n", tokens, nil,
			[]string{"slack.channel", "slack.app_id", "slack.team_id (or slack.enterprise_id)"},
			"missing: slack.channel, slack.app_id, slack.team_id (or slack.enterprise_id)"},
		{"a bot token and no section", "", []string{"SLACK_BOT_TOKEN=" + serveToken}, nil,
			[]string{"no slack: section", "SLACK_BOT_TOKEN", "slack.channel", "slack.app_id", "slack.team_id (or slack.enterprise_id)", "SLACK_SIGNING_SECRET"}, ""},
		{"a whole section without tokens", whole, nil, nil, []string{"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"}, ""},
		{"socket mode without its token", whole, []string{"SLACK_BOT_TOKEN=" + serveToken}, []string{"--socket-mode"}, []string{"SLACK_APP_TOKEN"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "signoff.yaml"), append(mustRead(t, "../../config/default.yaml"), tt.slack...), 0o600); err != nil {
				t.Fatal(err)
			}
			env := append(append([]string{}, noSlackEnv...), tt.env...)
			code, out, errs := inFolder(t, dir, env, append([]string{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, tt.args...)...)
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			if code != exitRefused || len(lines) != 1 || strings.Contains(errs, "serving on") {
				t.Fatalf("exit %d, stderr %q, stdout %q; want exit 2 and one line", code, errs, out)
			}
			for _, name := range tt.want {
				if !strings.Contains(lines[0], name) {
					t.Errorf("the error does not name %s: %s", name, lines[0])
				}
			}
			for _, f := range []string{"signoff.db", "shop.db"} {
				if exists(filepath.Join(dir, f)) {
					t.Errorf("serve created %s", f)
				}
			}
			if tt.check == "" {
				return
			}
			code, out, errs = inFolder(t, dir, noSlackEnv, "config", "check")
			if code != exitRefused || !strings.Contains(out, "slack:\n  set up in part: ") || !strings.Contains(errs, tt.check) || strings.Contains(out, "\nok\n") {
				t.Errorf("config check: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 2 saying %q", code, out, errs, tt.check)
			}
		})
	}
}
