package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// head is a valid config up to its actions.
const head = `roles:
  - {name: agent, members: [agent:deployer]}
policy:
  revision: r1
  rules:
    - {name: all, when: "true", risk: low}
actions:
`

const deploySchema = `{"type": "object", "required": ["service", "version"], "additionalProperties": false,
 "properties": {"service": {"type": "string"}, "version": {"type": "string"}, "token": {"type": "string"}}}`

func TestParseActionForms(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "schemas"), 0o755)
	os.WriteFile(filepath.Join(dir, "schemas", "deploy.json"), []byte(deploySchema), 0o644)
	src := head + `  deploy_service:
    description: Deploy one service version to an environment
    schema_file: schemas/deploy.json
    redact: [token]
    executor:
      type: webhook
      url: https://deployer.internal/deploy
      secret_env: DEPLOYER_SIGNING_SECRET
      timeout: 10s
      reconcile: {within: 45m}
  rotate_key:
    schema: {type: object, properties: {key_id: {type: string, maxLength: 64}}}
    executor: {type: command, command: [./bin/rotate-key], env: [AWS_PROFILE]}
  request_refund: {executor: demo}
`
	path := filepath.Join(dir, "signoff.yaml")
	os.WriteFile(path, []byte(src), 0o644)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ActionConfig{
		"deploy_service": {
			Description: "Deploy one service version to an environment", Executor: "webhook",
			ExecutorFields: map[string]any{"url": "https://deployer.internal/deploy", "secret_env": "DEPLOYER_SIGNING_SECRET", "timeout": "10s"},
			Schema:         []byte(deploySchema), SchemaFile: "schemas/deploy.json", Redact: []string{"token"},
		},
		"rotate_key": {
			Executor: "command", ExecutorFields: map[string]any{"command": []any{"./bin/rotate-key"}, "env": []any{"AWS_PROFILE"}},
			Schema: []byte(`{"properties":{"key_id":{"maxLength":64,"type":"string"}},"type":"object"}`),
		},
		"request_refund": {Executor: "demo"},
	}
	for name, w := range want {
		got := c.Actions[name]
		if got.Executor != w.Executor || !reflect.DeepEqual(got.ExecutorFields, w.ExecutorFields) || string(got.Schema) != string(w.Schema) ||
			got.SchemaFile != w.SchemaFile || got.Description != w.Description || !reflect.DeepEqual(got.Redact, w.Redact) {
			t.Errorf("%s = %#v\nwant %#v", name, got, w)
		}
	}
	if got := c.Actions["deploy_service"].ReconcileWithin; got != 45*time.Minute {
		t.Errorf("deploy_service reconcile.within = %v, want 45m", got)
	}
	if got := c.Actions["rotate_key"].ReconcileWithin; got != 0 {
		t.Errorf("rotate_key reconcile.within = %v, want 0 (the engine's default)", got)
	}
	if c.Dir() != dir {
		t.Errorf("Dir = %q, want %q", c.Dir(), dir)
	}
	if line := c.Errorf("actions.deploy_service.executor.secret_env", "x").Line; line != 15 {
		t.Errorf("secret_env is at line %d, want 15", line)
	}
}

func TestParseActionRefusals(t *testing.T) {
	tests := []struct {
		name, actions string
		files         map[string]string
		want          string
	}{
		{"missing schema file", "  a:\n    schema_file: schemas/nope.json\n    executor: demo\n", nil,
			"signoff.yaml:9: actions.a.schema_file: cannot read DIR/schemas/nope.json: no such file or directory"},
		{"schema file not JSON", "  a:\n    schema_file: s.json\n    executor: demo\n", map[string]string{"s.json": "{type: object"},
			"signoff.yaml:9: actions.a.schema_file: action a: read schema:"},
		{"schema that does not compile", "  a:\n    executor: demo\n    schema: {type: objekt}\n", nil,
			"signoff.yaml:10: actions.a.schema: action a: compile schema:"},
		{"schema with an external reference", "  a:\n    executor: demo\n    schema: {$ref: 'https://example.com/s.json'}\n", nil,
			"external references are not allowed"},
		{"both", "  a:\n    executor: demo\n    schema: {}\n    schema_file: s.json\n", nil,
			"signoff.yaml:11: actions.a.schema_file: give schema or schema_file, not both"},
		{"executor without type", "  a:\n    executor: {url: 'https://x'}\n", nil,
			"signoff.yaml:9: actions.a.executor.type: required: which kind of executor"},
		{"executor a list", "  a:\n    executor: [demo]\n", nil,
			"signoff.yaml:9: actions.a.executor: must be a type"},
		{"no executor", "  a: {description: nothing}\n", nil,
			"signoff.yaml:8: actions.a.executor: required"},
		{"reconcile not a mapping", "  a:\n    executor: {type: webhook, reconcile: 30m}\n", nil,
			"signoff.yaml:9: actions.a.executor.reconcile: must be a mapping: reconcile: {within: 30m}"},
		{"reconcile without within", "  a:\n    executor:\n      type: webhook\n      reconcile: {after: 30m}\n", nil,
			"signoff.yaml:11: actions.a.executor.reconcile.after: unknown field (known: within)"},
		{"reconcile within not a duration", "  a:\n    executor:\n      type: webhook\n      reconcile:\n        within: soon\n", nil,
			`signoff.yaml:12: actions.a.executor.reconcile.within: want a positive duration like 30m, got "soon"`},
		{"reconcile within too long", "  a:\n    executor:\n      type: webhook\n      reconcile: {within: 30d}\n", nil,
			`actions.a.executor.reconcile.within: 30d is longer than the 168h0m0s allowed`},
		{"unknown action field", "  a: {executor: demo, schemas: {}}\n", nil,
			`unknown field "schemas" (known: description, executor, schema, schema_file, redact)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, body := range tt.files {
				os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644)
			}
			path := filepath.Join(dir, "signoff.yaml")
			os.WriteFile(path, []byte(head+tt.actions), 0o644)
			_, err := Load(path)
			want := strings.ReplaceAll(tt.want, "DIR", dir)
			got := ""
			if err != nil {
				got = strings.ReplaceAll(err.Error(), dir+"/signoff.yaml", "signoff.yaml")
			}
			if !strings.Contains(got, want) {
				t.Fatalf("err = %q, want %q", got, want)
			}
		})
	}
}
