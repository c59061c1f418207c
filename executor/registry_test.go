package executor_test

import (
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/executor"
	"github.com/signoff-dev/signoff/workflow"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func env(k string) string {
	return map[string]string{"DEPLOY_SECRET": secret, "BAD_SECRET": "hunter2-hunter2"}[k]
}

func TestBuild(t *testing.T) {
	executor.SetLandlockABI(t, 7) // the kernel's own is TestBuildWithoutLandlockWarns's
	hook := func(extra map[string]any) map[string]any {
		m := map[string]any{"url": "https://deployer.internal/deploy", "secret_env": "DEPLOY_SECRET"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name   string
		typ    string
		fields map[string]any
		field  string // of the error; "-" for no error
		want   string
		warn   string
	}{
		{name: "webhook", typ: "webhook", fields: hook(nil), field: "-"},
		{name: "unknown type", typ: "carrier-pigeon", field: "type", want: `unknown executor type "carrier-pigeon" (this build has: command, webhook)`},
		{name: "unknown field", typ: "webhook", fields: hook(map[string]any{"retries": "3"}), field: "retries", want: "unknown field for a webhook executor (known: type, check_url, lookup_url, secret_env, timeout, url)"},
		{name: "no url", typ: "webhook", fields: map[string]any{"secret_env": "DEPLOY_SECRET"}, field: "url", want: "required"},
		{name: "secret not set", typ: "webhook", fields: hook(map[string]any{"secret_env": "NOPE"}), field: "secret_env", want: "NOPE is not set"},
		{name: "secret malformed", typ: "webhook", fields: hook(map[string]any{"secret_env": "BAD_SECRET"}), field: "secret_env", want: "BAD_SECRET: secret 1 does not start with whsec_"},
		{name: "secret_env not a name", typ: "webhook", fields: hook(map[string]any{"secret_env": "whsec_abc=="}), field: "secret_env", want: "is not the name of an environment variable"},
		{name: "lookup without key", typ: "webhook", fields: hook(map[string]any{"lookup_url": "https://d/ops"}), field: "lookup_url", want: "must contain {key}"},
		{name: "url not a string", typ: "webhook", fields: hook(map[string]any{"url": []any{"x"}}), field: "url", want: "must be a string, got a list"},
		{name: "bad timeout", typ: "webhook", fields: hook(map[string]any{"timeout": "soon"}), field: "timeout", want: `want a positive duration like 10s, got "soon"`},
		{name: "plaintext warns", typ: "webhook", fields: hook(map[string]any{"url": "http://deployer.internal/d"}), field: "-", warn: "url: http:// to another machine"},
		{name: "loopback does not warn", typ: "webhook", fields: hook(map[string]any{"url": "http://127.0.0.1:8787/d"}), field: "-"},
		{name: "timeout past the lease warns", typ: "webhook", fields: hook(map[string]any{"timeout": "30s"}), field: "-", warn: "timeout: 30s is longer than the engine lets one call run (15s, half the lease): raise SIGNOFF_LEASE_TTL to at least 1m0s"},
		{name: "command", typ: "command", fields: map[string]any{"command": []any{"true"}, "env": []any{"AWS_PROFILE"}}, field: "-"},
		{name: "command missing", typ: "command", fields: map[string]any{}, field: "command", want: "required"},
		{name: "command cannot run", typ: "command", fields: map[string]any{"command": []any{"./bin/nope"}}, field: "command", want: "cannot run"},
		{name: "command element", typ: "command", fields: map[string]any{"command": []any{"true", 3}}, field: "command[1]", want: "must be a string"},
		{name: "env of signoff", typ: "command", fields: map[string]any{"command": []any{"true"}, "env": []any{"SLACK_BOT_TOKEN"}}, field: "env[0]", want: "signoff's own"},
		{name: "paths", typ: "command", fields: map[string]any{"command": []any{"true"}, "paths": map[string]any{"read": []any{"/usr"}, "write": []any{"/tmp"}}}, field: "-"},
		{name: "paths not a mapping", typ: "command", fields: map[string]any{"command": []any{"true"}, "paths": []any{"/usr"}}, field: "paths", want: "must be a mapping (read, write), got a list"},
		{name: "paths unknown key", typ: "command", fields: map[string]any{"command": []any{"true"}, "paths": map[string]any{"exec": []any{"/usr"}}}, field: "paths.exec", want: "unknown field (known: read, write)"},
		{name: "paths not a list", typ: "command", fields: map[string]any{"command": []any{"true"}, "paths": map[string]any{"read": "/usr"}}, field: "paths.read", want: "must be a list of strings, got a string"},
		{name: "paths missing", typ: "command", fields: map[string]any{"command": []any{"true"}, "paths": map[string]any{"write": []any{"/tmp", "/nope-signoff"}}}, field: "-", warn: "paths.write[1]: /nope-signoff does not exist: the program cannot reach it"},
		{name: "run_as not a mapping", typ: "command", fields: map[string]any{"command": []any{"true"}, "run_as": "nobody"}, field: "run_as", want: "must be a mapping (user), got a string"},
		{name: "run_as no user", typ: "command", fields: map[string]any{"command": []any{"true"}, "run_as": map[string]any{}}, field: "run_as.user", want: "required"},
		{name: "run_as unknown user", typ: "command", fields: map[string]any{"command": []any{"true"}, "run_as": map[string]any{"user": "no-such-user-signoff"}}, field: "run_as.user", want: `no user "no-such-user-signoff"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, warns, err := executor.Builtin().Build(executor.Block{
				Action: "deploy_service", Type: tt.typ, Fields: tt.fields, Dir: t.TempDir(), Getenv: env, CallLimit: 15 * time.Second,
			})
			if tt.field == "-" {
				if err != nil || x == nil {
					t.Fatalf("err %v", err)
				}
			} else {
				fe, ok := err.(*executor.FieldError)
				if !ok || fe.Field != tt.field || !strings.Contains(fe.Err.Error(), tt.want) {
					t.Fatalf("err %#v (%v), want field %q: %q", err, err, tt.field, tt.want)
				}
				if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "MfKQ9r8") {
					t.Fatalf("the error repeats a secret: %v", err)
				}
			}
			var got []string
			for _, w := range warns {
				got = append(got, w.Error())
			}
			if (tt.warn == "") != (len(got) == 0) || (tt.warn != "" && !strings.Contains(strings.Join(got, "\n"), tt.warn)) {
				t.Fatalf("warnings %q, want %q", got, tt.warn)
			}
		})
	}
}

// TestBuildWithoutLandlockWarns: where the kernel cannot confine a program,
// the config says so and still loads.
func TestBuildWithoutLandlockWarns(t *testing.T) {
	executor.SetLandlockABI(t, 0)
	x, warns, err := executor.Builtin().Build(executor.Block{Action: "rotate_key", Type: "command", Fields: map[string]any{"command": []any{"true"}}, Dir: t.TempDir()})
	if err != nil || x == nil || len(warns) != 1 || !strings.Contains(warns[0].Error(), "paths: this kernel has no Landlock") || !strings.Contains(warns[0].Error(), "the store and the integrity keys too") {
		t.Fatalf("build %v, warnings %v", err, warns)
	}
}

// TestBuildWithoutSecrets: for a command that only reads, a webhook whose
// secret is unset or malformed builds, its other fields still checked, and
// the executor it gives refuses every call as one that sent nothing.
func TestBuildWithoutSecrets(t *testing.T) {
	hook := map[string]any{"url": "https://deployer.internal/deploy", "secret_env": "NOPE"}
	for _, tt := range []struct {
		name   string
		fields map[string]any
		field  string // of the error; "" for none
	}{
		{"secret not set", hook, ""},
		{"secret malformed", map[string]any{"url": "https://deployer.internal/deploy", "secret_env": "BAD_SECRET"}, ""},
		{"secret_env not a name", map[string]any{"url": "https://deployer.internal/deploy", "secret_env": "whsec_abc=="}, "secret_env"},
		{"no url", map[string]any{"secret_env": "NOPE"}, "url"},
		{"bad timeout", map[string]any{"url": "https://deployer.internal/deploy", "secret_env": "NOPE", "timeout": "soon"}, "timeout"},
		{"unknown field", map[string]any{"url": "https://deployer.internal/deploy", "secret_env": "NOPE", "retries": "3"}, "retries"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x, _, err := executor.Builtin().Build(executor.Block{
				Action: "deploy_service", Type: "webhook", Fields: tt.fields, Dir: t.TempDir(), Getenv: env, NoSecrets: true,
			})
			if tt.field != "" {
				if fe, ok := err.(*executor.FieldError); !ok || fe.Field != tt.field {
					t.Fatalf("err %v, want one about %s", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("a read-only build needed the secret: %v", err)
			}
			ctx := t.Context()
			a := record.Action{Name: "deploy_service", Args: []byte(`{}`)}
			if _, err := x.Execute(ctx, "RUN/1", a); workflow.Classify(err) != workflow.ClassTransient || !strings.Contains(err.Error(), "built without its secret") {
				t.Errorf("Execute: %v, want a transient refusal", err)
			}
			if err := x.Check(ctx, a); err == nil {
				t.Error("Check succeeded without the secret")
			}
			if _, ok, err := x.Lookup(ctx, "RUN/1"); err == nil || ok {
				t.Errorf("Lookup: %v, %v; want an error", ok, err)
			}
		})
	}
}
