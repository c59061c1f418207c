package app

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTheBreakGlassAPIExampleOfTheDocsRuns: the curl commands of
// docs/agent-api.md, "Break-glass", run against serve with the config of
// docs/configuration.md, "Break-glass" (without its slack: section, which
// would need Slack): the incident commander's token forces a waiting run,
// the security token lists its review and acknowledges it, each answering
// 200 as the text says.
func TestTheBreakGlassAPIExampleOfTheDocsRuns(t *testing.T) {
	t.Parallel()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	dir := t.TempDir()
	var cfg strings.Builder
	for _, l := range strings.Split(blocksOf(docSection(t, "docs/configuration.md", "Break-glass"), "yaml")[0], "\n") {
		if !strings.HasPrefix(l, "slack:") {
			cfg.WriteString(l + "\n")
		}
	}
	cfg.WriteString("api:\n  tokens:\n")
	tokens := map[string]string{}
	for _, tk := range []struct{ env, id, requester, scopes string }{
		{"AGENT_TOKEN", "agent", "agent:resolver", "submit,read"},
		{"SIGNOFF_TOKEN", "ic", "U0IC000001", "force"},
		{"REVIEW_TOKEN", "security", "U0SEC00001", "review"},
	} {
		code, out, errs := docRun(t, dir, nil, "", "token", "new", "--id", tk.id, "--requester", tk.requester, "--scopes", tk.scopes)
		if code != 0 {
			t.Fatalf("token new: exit %d\n%s", code, errs)
		}
		secret, lines, _ := strings.Cut(out, "\n")
		tokens[tk.env] = secret
		cfg.WriteString(lines)
	}
	if err := os.WriteFile(filepath.Join(dir, "signoff.yaml"), []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startBackground(t, dir, nil, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0").addr(t)
	do := func(words ...string) (int, []byte) {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), curl, append(words, "-w", "\n%{http_code}", "--max-time", "30")...).Output()
		if err != nil {
			t.Fatalf("curl %q: %v", words, err)
		}
		i := strings.LastIndexByte(string(out), '\n')
		code, err := strconv.Atoi(string(out[i+1:]))
		if err != nil {
			t.Fatalf("curl %q: no status: %s", words, out)
		}
		return code, out[:i]
	}
	proposal, err := os.ReadFile(filepath.Join(repoRoot, "fixtures", "proposals", "refund-double-charge.json"))
	if err != nil {
		t.Fatal(err)
	}
	code, body := do("-s", "-X", "POST", "-H", "Authorization: Bearer "+tokens["AGENT_TOKEN"], "-H", "Content-Type: application/json",
		"-d", string(proposal), "http://"+addr+"/v1/runs")
	var run struct{ ID, Status, Fingerprint string }
	if err := json.Unmarshal(body, &run); code != 201 || err != nil || run.Status != "waiting_approval" {
		t.Fatalf("submit: %d %s (%v)", code, body, err)
	}
	var answers []string
	for _, l := range shLines(blocksOf(docSection(t, "docs/agent-api.md", "Break-glass"), "sh")[0]) {
		words := shellWords(t, os.Expand(l.cmd, func(k string) string { return tokens[k] }))
		if words[0] != "curl" {
			t.Fatalf("a line that is not curl: %q", l.cmd)
		}
		for i, w := range words {
			w = strings.Replace(w, "127.0.0.1:8080", addr, 1)
			w = strings.ReplaceAll(w, "run_01a2…", run.ID)
			words[i] = strings.ReplaceAll(w, "3f9a…", run.Fingerprint[:16])
		}
		code, body := do(words[1:]...)
		if code != 200 {
			t.Fatalf("%s: %d %s", l.cmd, code, body)
		}
		answers = append(answers, string(body))
	}
	if len(answers) != 3 || !strings.Contains(answers[0], `"by":"U0IC000001"`) || !strings.Contains(answers[0], `"via":"api"`) ||
		!strings.Contains(answers[1], `"run_id":"`+run.ID+`"`) || !strings.Contains(answers[2], `"acknowledged_by":"U0SEC00001"`) {
		t.Fatalf("answers %q", answers)
	}
}
