package app

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/examples/target"
	"github.com/signoff-dev/signoff/executor/webhook"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/storage/sqlstore"
	"github.com/signoff-dev/signoff/workflow"
)

// deploySecret signs the webhook calls in these tests. secretNeedles are the
// forms it could leak in: as configured, and the key it encodes.
const deploySecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

var secretNeedles = []string{deploySecret, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}

const deploySchemaJSON = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["service", "version", "env"],
  "properties": {
    "service": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$"},
    "version": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+\\.[0-9]+$"},
    "env": {"enum": ["staging", "prod"]},
    "token": {"type": "string"}
  }
}`

// ownConfig is a config with a team's own actions: deploy_service through
// the reference webhook target, rotate_key through the reference program.
const ownConfig = `roles:
  - {name: agent, members: [agent:deployer]}
  - {name: team_lead, members: [U0LEAD0001]}
policy:
  revision: "1"
  rules:
    - name: changes
      when: "true"
      risk: high
      approval: {role: team_lead, expires: 24h}
actions:
  deploy_service:
    description: Deploy one service version to an environment
    schema_file: schemas/deploy_service.json
    redact: [token]
    executor:
      type: webhook
      url: TARGET/execute
      lookup_url: TARGET/operations/{key}
      check_url: TARGET/check
      secret_env: DEPLOYER_SIGNING_SECRET
      timeout: 2s
  rotate_key:
    description: Rotate one key in the vault
    schema: {type: object, required: [key_id], properties: {key_id: {type: string}}}
    executor:
      type: command
      command: [PROGRAM]
      lookup: [PROGRAM, --lookup]
      env: [LEDGER_FILE, FAULT_FILE]
      paths: {write: [ledger]}
      timeout: 5s
`

// own is a folder with that config, the reference target on loopback, and
// the environment the child processes get.
type own struct {
	dir, config string
	target      *target.Target
	env         []string
	ledger      string
	faults      string
}

func newOwn(t *testing.T) *own {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed (the reference program needs it)")
	}
	dir := t.TempDir()
	tg, err := target.New([]string{deploySecret}, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(tg.Handler())
	t.Cleanup(srv.Close)
	prog, err := filepath.Abs("../../examples/command/ledger-action")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "schemas"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "schemas", "deploy_service.json"), []byte(deploySchemaJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("TARGET", srv.URL, "PROGRAM", prog).Replace(ownConfig)
	// The program's files are in a folder of their own: the config's holds
	// the store and the keys, out of its reach.
	os.MkdirAll(filepath.Join(dir, "ledger"), 0o755)
	o := &own{dir: dir, config: filepath.Join(dir, "signoff.yaml"), target: tg,
		ledger: filepath.Join(dir, "ledger", "ledger.jsonl"), faults: filepath.Join(dir, "ledger", "faults")}
	if err := os.WriteFile(o.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	o.env = []string{"DEPLOYER_SIGNING_SECRET=" + deploySecret, "LEDGER_FILE=" + o.ledger, "FAULT_FILE=" + o.faults}
	return o
}

// run runs the real program as a child process and returns its exit code,
// stdout and stderr; extra is more environment.
func (o *own) run(t *testing.T, extra []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd, out, errb := child(t, o.dir, append(append([]string{}, o.env...), extra...), append([]string{"--config", o.config}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

func (o *own) must(t *testing.T, want int, stdin string, args ...string) string {
	t.Helper()
	code, out, errs := o.run(t, nil, stdin, args...)
	if code != want {
		t.Fatalf("signoff %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errs)
	}
	return out
}

const deployArgs = `{"service": "api", "version": "1.4.2", "env": "prod", "token": "tok-not-for-people"}`

func deployProposal(key string) string {
	return `{"requester": {"id": "agent:deployer"}, "summary": "Ship 1.4.2", "idempotency_key": "` + key + `",
  "actions": [{"name": "deploy_service", "args": ` + deployArgs + `}]}`
}

const rotateProposal = `{"requester": {"id": "agent:deployer"}, "summary": "Rotate k-1",
  "actions": [{"name": "rotate_key", "args": {"key_id": "k-1"}}]}`

// executeCalls are the execute requests that reached the target.
func (o *own) executeCalls() []target.Received {
	var out []target.Received
	for _, r := range o.target.Received() {
		if r.Path == "/execute" {
			out = append(out, r)
		}
	}
	return out
}

func (o *own) ledgerLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(o.ledger)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func (o *own) show(t *testing.T, id string) workflow.RunView {
	t.Helper()
	var v workflow.RunView
	if err := json.Unmarshal([]byte(o.must(t, 0, "", "show", id, "--json")), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestWebhookActionEndToEnd(t *testing.T) {
	o := newOwn(t)
	id := runIDOf(t, o.must(t, exitWaiting, deployProposal("deploy-1"), "submit", "-"))
	if calls := o.executeCalls(); len(calls) != 0 {
		t.Fatalf("the target was called before anyone approved: %+v", calls)
	}
	o.must(t, exitDone, "", "approve", id, "--as", lead1)

	calls := o.executeCalls()
	if len(calls) != 1 {
		t.Fatalf("the target received %d execute calls, want exactly one", len(calls))
	}
	c := calls[0]
	if !c.SignatureOK || c.IdempotencyKey != id+"/1" {
		t.Fatalf("call %+v: want a valid signature and the key %s/1", c, id)
	}
	var body webhook.Body
	if err := json.Unmarshal(c.Body, &body); err != nil {
		t.Fatal(err)
	}
	var stored bytes.Buffer
	if err := json.Compact(&stored, o.show(t, id).Actions[0].Args); err != nil {
		t.Fatal(err)
	}
	if body.IdempotencyKey != id+"/1" || body.RunID != id || body.Action != "deploy_service" || !bytes.Equal(body.Args, stored.Bytes()) ||
		len(body.ApprovedBy) != 1 || body.ApprovedBy[0] != lead1 || body.Attempt != 1 || body.Fingerprint == "" {
		t.Fatalf("body %s, stored args %s", c.Body, stored.Bytes())
	}
	if !strings.Contains(string(body.Args), "tok-not-for-people") {
		t.Fatalf("the target must get the real arguments, redaction is for people: %s", body.Args)
	}
	out := o.must(t, exitDone, "", "show", id)
	if !strings.Contains(out, `"id":"op-1"`) || !strings.Contains(out, "done") {
		t.Fatalf("show prints no receipt:\n%s", out)
	}
	if _, err := os.Stat(shopPath(o.dir)); !os.IsNotExist(err) {
		t.Fatalf("the practice shop was opened for a config without demo actions: %v", err)
	}
}

func TestCommandActionEndToEnd(t *testing.T) {
	o := newOwn(t)
	id := runIDOf(t, o.must(t, exitWaiting, rotateProposal, "submit", "-"))
	if lines := o.ledgerLines(t); len(lines) != 0 {
		t.Fatalf("the program ran before anyone approved: %q", lines)
	}
	o.must(t, exitDone, "", "approve", id, "--as", lead1)
	lines := o.ledgerLines(t)
	if len(lines) != 1 || !strings.Contains(lines[0], `"key": "`+id+`/1"`) || !strings.Contains(lines[0], `"args": {"key_id": "k-1"}`) {
		t.Fatalf("ledger %q, want one entry under %s/1 with the stored arguments", lines, id)
	}
	out := o.must(t, exitDone, "", "show", id)
	if !strings.Contains(out, `"id": "op-1"`) && !strings.Contains(out, `"id":"op-1"`) {
		t.Fatalf("show prints no receipt:\n%s", out)
	}
}

func TestOwnExecutorsSurviveACrashAtEveryWriteBoundary(t *testing.T) {
	for _, fp := range []string{"after-intent", "after-effect", "after-receipt"} {
		for _, kind := range []string{"webhook", "command"} {
			t.Run(kind+"/"+fp, func(t *testing.T) {
				o := newOwn(t)
				proposal, effects := rotateProposal, func() int { return len(o.ledgerLines(t)) }
				if kind == "webhook" {
					proposal, effects = deployProposal("k-"+fp), func() int { return len(o.target.Ledger()) }
				}
				id := runIDOf(t, o.must(t, exitWaiting, proposal, "submit", "-"))
				cmd, out, errb := child(t, o.dir, append(o.env, "SIGNOFF_FAILPOINT="+fp), "--config", o.config, "approve", id, "--as", lead1)
				if err := cmd.Run(); err == nil || !strings.Contains(err.Error(), "killed") {
					t.Fatalf("approve with %s: %v, want killed\n%s\n%s", fp, err, out, errb)
				}
				o.must(t, exitDone, "", "resume", id)
				if n := effects(); n != 1 {
					t.Fatalf("%d effects at the target after a crash at %s, want exactly one", n, fp)
				}
				v := o.show(t, id)
				if len(v.Operations) != 1 || v.Operations[0].Key != id+"/1" || len(v.Operations[0].Receipt) == 0 {
					t.Fatalf("operations %+v", v.Operations)
				}
			})
		}
	}
}

func TestArgumentsFailingTheSchemaAreRefusedWithEveryProblem(t *testing.T) {
	o := newOwn(t)
	bad := `{"requester": {"id": "agent:deployer"}, "actions": [{"name": "deploy_service",
	  "args": {"service": "API!", "version": "latest", "region": "eu"}}]}`
	code, out, errs := o.run(t, nil, bad, "submit", "-")
	if code != exitRefused {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errs)
	}
	for _, want := range []string{"env: is required", "region: is not allowed", "service:", "version:"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr does not name %q:\n%s", want, errs)
		}
	}
	if runs := o.must(t, 0, "", "runs", "--json"); strings.TrimSpace(runs) != "[]" {
		t.Fatalf("a refused proposal left a run: %s", runs)
	}
	if len(o.target.Received()) != 0 {
		t.Fatalf("the target was called: %+v", o.target.Received())
	}
}

func TestOwnActionConfigRefusedAtStart(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		env      []string // replaces the secret's
		line     int
		want     string
	}{
		{name: "missing schema file", old: "schema_file: schemas/deploy_service.json", new: "schema_file: schemas/deploy.json", line: 14,
			want: "actions.deploy_service.schema_file: cannot read"},
		{name: "invalid schema file", old: "schema_file: schemas/deploy_service.json", new: "schema_file: signoff.yaml", line: 14,
			want: "actions.deploy_service.schema_file: action deploy_service: read schema"},
		{name: "unknown executor type", old: "type: webhook", new: "type: webhooks", line: 17,
			want: `actions.deploy_service.executor.type: unknown executor type "webhooks" (this build has: caller, command, demo, mcp, webhook)`},
		{name: "missing secret", env: []string{"DEPLOYER_SIGNING_SECRET="}, line: 21,
			want: "actions.deploy_service.executor.secret_env: DEPLOYER_SIGNING_SECRET is not set"},
		{name: "a secret that is no whsec_", env: []string{"DEPLOYER_SIGNING_SECRET=hunter2hunter2"}, line: 21,
			want: "actions.deploy_service.executor.secret_env: DEPLOYER_SIGNING_SECRET: secret 1 does not start with whsec_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOwn(t)
			if tt.old != "" {
				b, _ := os.ReadFile(o.config)
				os.WriteFile(o.config, []byte(strings.Replace(string(b), tt.old, tt.new, 1)), 0o600)
			}
			cmds := [][]string{{"submit", "-"}, {"runs"}, {"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}}
			if tt.env != nil {
				// A command that only reads needs no secret (TestReadCommandsNeedNoExecutorSecret).
				cmds = [][]string{{"submit", "-"}, {"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}}
			}
			for _, cmd := range cmds {
				code, out, errs := o.run(t, tt.env, deployProposal("x"), cmd...)
				where := o.config + ":" + itoa(tt.line) + ": "
				if code != exitRefused || !strings.Contains(errs, where+tt.want) {
					t.Fatalf("%v: exit %d, stderr %q; want 2 and %q", cmd, code, errs, where+tt.want)
				}
				if strings.Contains(errs, "hunter2") {
					t.Fatalf("the error repeats the secret: %s", errs)
				}
				_ = out
			}
			for _, f := range []string{dbPath(o.dir), shopPath(o.dir), o.ledger} {
				if _, err := os.Stat(f); !os.IsNotExist(err) {
					t.Fatalf("%s exists after a refused start", f)
				}
			}
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestNoSecretIsWrittenAnywhere runs deploys that succeed, are refused and
// are reconciled, and then looks for the signing secret in everything signoff
// printed and in every byte of its store.
func TestNoSecretIsWrittenAnywhere(t *testing.T) {
	o := newOwn(t)
	var printed strings.Builder
	record := func(code int, out, errs string) (int, string) {
		printed.WriteString(out)
		printed.WriteString(errs)
		return code, out
	}
	_, out := record(o.run(t, nil, deployProposal("s-1"), "submit", "-"))
	ok := runIDOf(t, out)
	o.target.Fail(target.FailAfterCommit) // reconciled through the lookup
	if code, _ := record(o.run(t, nil, "", "approve", ok, "--as", lead1)); code != exitDone {
		t.Fatalf("approve: exit %d", code)
	}
	_, out = record(o.run(t, nil, deployProposal("s-2"), "submit", "-"))
	refused := runIDOf(t, out)
	o.target.SetRefusal("api is frozen")
	o.target.Fail(target.Refuse)
	if code, _ := record(o.run(t, nil, "", "approve", refused, "--as", lead1)); code != exitAttention {
		t.Fatalf("approve of the refused one: exit %d", code)
	}
	for _, id := range []string{ok, refused} {
		for _, args := range [][]string{{"show", id, "--json"}, {"history", id, "--json"}, {"show", id}, {"history", id}, {"trace", id}} {
			record(o.run(t, nil, "", args...))
		}
	}
	record(o.run(t, nil, "", "runs", "--json"))
	record(o.run(t, nil, "", "verify"))
	record(o.run(t, nil, "", "config", "check"))
	if !strings.Contains(printed.String(), "api is frozen") || !strings.Contains(printed.String(), `"id":"op-1"`) {
		t.Fatalf("the runs did not go as planned:\n%s", printed.String())
	}
	// The store as it is on disk: every table (the audit log included), the WAL.
	var store []byte
	for _, f := range []string{dbPath(o.dir), dbPath(o.dir) + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		store = append(store, b...)
	}
	if len(store) == 0 {
		t.Fatal("no store")
	}
	store = append(store, inflatedStates(t, dbPath(o.dir))...)
	for _, needle := range secretNeedles {
		if strings.Contains(printed.String(), needle) {
			t.Errorf("the secret %q was printed", needle)
		}
		if bytes.Contains(store, []byte(needle)) {
			t.Errorf("the secret %q is in the store", needle)
		}
	}
	// The check is only as good as its haystack: the arguments are there.
	if !bytes.Contains(store, []byte("tok-not-for-people")) {
		t.Fatal("the store does not hold the arguments; the search above proves nothing")
	}
}

// inflatedStates are the checkpoints' states of the store at path as the
// store reads them: they are stored compressed, where no search of the
// file's bytes would find what they hold.
func inflatedStates(t *testing.T, path string) []byte {
	t.Helper()
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT state FROM checkpoints WHERE state IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		out = append(out, sqlstore.StateOf(b)...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The worked example of docs/getting-started.md loads, and its proposals hit the rules it
// describes, so that a reader who copies it starts from something that works.
func TestTheWorkedExampleLoads(t *testing.T) {
	cfg := filepath.Join("..", "..", "examples", "signoff.yaml")
	env := func(k string) string {
		return map[string]string{"DEPLOYER_SIGNING_SECRET": deploySecret}[k]
	}
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"config", "check", cfg}, env, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("config check: exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"deploy_service  executor webhook → http://127.0.0.1:8787/execute, signed with the secret in DEPLOYER_SIGNING_SECRET; hidden from approvers: token", "rotate_key      executor command → ./command/ledger-action"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("config check does not say %q:\n%s", want, out.String())
		}
	}
	for file, rule := range map[string]string{"deploy-api.json": "prod-changes", "rotate-key.json": "key-rotation"} {
		out.Reset()
		errb.Reset()
		p := filepath.Join("..", "..", "examples", "proposals", file)
		if code := run(t.Context(), []string{"--config", cfg, "policy", "explain", p}, env, strings.NewReader(""), &out, &errb); code != 0 || !strings.Contains(out.String(), rule) {
			t.Fatalf("policy explain %s: exit %d, want rule %s\n%s%s", file, code, rule, out.String(), errb.String())
		}
	}
}

// check_url is asked at submit and again right before the write: a 4xx is a
// failed check (exit 1) at submit, and a refusal with nothing sent later.
func TestWebhookCheckAtSubmitAndBeforeExecuting(t *testing.T) {
	o := newOwn(t)
	o.target.CheckFails("api is frozen until Monday")
	code, out, errs := o.run(t, nil, deployProposal("c-1"), "submit", "-")
	if code != exitFailed || !strings.Contains(out+errs, "api is frozen until Monday") {
		t.Fatalf("submit: exit %d, want 1 naming the target's reason\n%s%s", code, out, errs)
	}
	o.target.CheckFails("")
	id := runIDOf(t, o.must(t, exitWaiting, deployProposal("c-2"), "submit", "-"))
	o.target.CheckFails("a deploy of api started meanwhile") // the world moved while the run waited
	code, out, errs = o.run(t, nil, "", "approve", id, "--as", lead1)
	if code != exitAttention || !strings.Contains(out, "a deploy of api started meanwhile") {
		t.Fatalf("approve: exit %d, want 5 naming the target's reason\n%s%s", code, out, errs)
	}
	if calls := o.executeCalls(); len(calls) != 0 {
		t.Fatalf("execute was called after a failed check: %+v", calls)
	}
}

func TestPlaintextURLToAnotherMachineWarnsAtLoad(t *testing.T) {
	o := newOwn(t)
	b, _ := os.ReadFile(o.config)
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "url: ") {
			lines[i] = "      url: http://deployer.internal/execute"
		}
	}
	os.WriteFile(o.config, []byte(strings.Join(lines, "\n")), 0o600)
	code, out, errs := o.run(t, nil, "", "runs")
	want := o.config + ":18: actions.deploy_service.executor.url: http:// to another machine"
	if code != 0 || !strings.Contains(errs, "signoff: warning: "+want) {
		t.Fatalf("runs: exit %d, stderr %q; want 0 and the warning %q\n%s", code, errs, want, out)
	}
	if out := o.must(t, 0, "", "config", "check"); !strings.Contains(out, want) {
		t.Fatalf("config check does not list the warning:\n%s", out)
	}
}

// A program named ./prog in a signoff.yaml found in the working directory is
// the one beside the config, not one looked up on PATH: the config's folder
// is then ".", and "./prog" must keep its slash.
func TestCommandBesideAConfigInTheWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "deploy"), []byte("#!/bin/sh\necho '{\"id\":\"d-1\"}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `roles:
  - {name: agent, members: [agent:ops]}
  - {name: deployer, members: [U0DEPLOY01]}
policy:
  revision: "1"
  rules:
    - {name: deploy, when: "true", risk: high, approval: {role: deployer, expires: 24h}}
actions:
  deploy_service:
    schema: {type: object}
    executor: {type: command, command: [./deploy]}
`
	if err := os.WriteFile(filepath.Join(dir, "signoff.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"config", "check"}, {"--config", "signoff.yaml", "config", "check"}} {
		cmd, out, errb := child(t, dir, nil, args...)
		cmd.Dir = dir
		if err := cmd.Run(); err != nil {
			t.Fatalf("signoff %s in the config's folder: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errb)
		}
		if !strings.Contains(out.String(), "deploy_service  executor command → ./deploy") {
			t.Fatalf("config check does not name the program:\n%s", out)
		}
	}
}

// TestReadCommandsNeedNoExecutorSecret: the commands that only read (runs,
// show, history, trace, wait, outbox, audit, verify, config check, policy
// explain), each as a separate process, work where the secret a webhook's
// secret_env names is not set, or not a secret, and config check says so;
// resume and serve, which may call the webhook, refuse and name the variable.
func TestReadCommandsNeedNoExecutorSecret(t *testing.T) {
	o := newOwn(t)
	id := runIDOf(t, o.must(t, exitWaiting, deployProposal("no-secret"), "submit", "-"))
	called := len(o.target.Received()) // submit's check
	explain := filepath.Join(o.dir, "deploy.json")
	if err := os.WriteFile(explain, []byte(deployProposal("explain")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []struct{ name, env, check string }{
		{"unset", "DEPLOYER_SIGNING_SECRET=", "signed with the secret in DEPLOYER_SIGNING_SECRET (not set here: only the commands that only read work without it)"},
		{"not a secret", "DEPLOYER_SIGNING_SECRET=hunter2hunter2", "signed with the secret in DEPLOYER_SIGNING_SECRET (set here, but secret 1 does not start with whsec_"},
	} {
		t.Run(secret.name, func(t *testing.T) {
			for _, tc := range []struct {
				args []string
				code int
				want string // in stdout
			}{
				{[]string{"runs"}, exitDone, id},
				{[]string{"show", id}, exitWaiting, id},
				{[]string{"history", id}, exitDone, "waiting_approval"},
				{[]string{"trace", id}, exitDone, ""},
				{[]string{"wait", id, "--timeout", "1s"}, exitWaiting, id},
				{[]string{"outbox"}, exitDone, ""},
				{[]string{"audit"}, exitDone, id},
				{[]string{"verify"}, exitDone, "ok: 1 runs"},
				{[]string{"config", "check"}, exitDone, secret.check},
				{[]string{"policy", "explain", explain}, exitDone, "waits for"},
			} {
				code, out, errs := o.run(t, []string{secret.env}, "", tc.args...)
				if code != tc.code || !strings.Contains(out, tc.want) {
					t.Errorf("signoff %s with the secret %s: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s",
						strings.Join(tc.args, " "), secret.name, code, tc.code, tc.want, out, errs)
				}
				if strings.Contains(out+errs, "hunter2") {
					t.Errorf("signoff %s repeats the secret:\n%s%s", strings.Join(tc.args, " "), out, errs)
				}
			}
			for _, args := range [][]string{{"resume", id}, {"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, {"approve", id, "--as", "U0LEAD0001"}} {
				code, out, errs := o.run(t, []string{secret.env}, "", args...)
				want := "actions.deploy_service.executor.secret_env: DEPLOYER_SIGNING_SECRET"
				if code != exitRefused || !strings.Contains(errs, want) || strings.Contains(errs, "hunter2") {
					t.Errorf("signoff %s with the secret %s: exit %d, stderr %q; want exit 2 naming %q (stdout %q)",
						strings.Join(args, " "), secret.name, code, errs, want, out)
				}
			}
		})
	}
	if got := o.target.Received(); len(got) != called {
		t.Fatalf("the target was called after submit: %+v", got[called:])
	}
	if v := o.must(t, exitWaiting, "", "show", id); !strings.Contains(v, "WAITING_APPROVAL") || !strings.Contains(v, "0 of 1 approval so far") {
		t.Fatalf("the run changed: %s", v)
	}
}
