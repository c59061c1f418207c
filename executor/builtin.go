package executor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/executor/command"
	"github.com/signoff-dev/signoff/executor/webhook"
	"github.com/signoff-dev/signoff/internal/stdwebhook"
	"github.com/signoff-dev/signoff/workflow"
)

// maxTimeout bounds a call: past it a person would rather be told.
const maxTimeout = 10 * time.Minute

func newWebhook(b *Block) (workflow.Executor, error) {
	var cfg webhook.Config
	var err error
	for _, f := range []struct {
		name     string
		dst      *string
		required bool
		lookup   bool
	}{{"url", &cfg.URL, true, false}, {"lookup_url", &cfg.LookupURL, false, true}, {"check_url", &cfg.CheckURL, false, false}} {
		if *f.dst, err = b.String(f.name, f.required); err != nil {
			return nil, err
		}
		if *f.dst == "" {
			continue
		}
		if err := webhook.CheckURL(*f.dst, f.lookup); err != nil {
			return nil, b.Errorf(f.name, "%v", err)
		}
		if webhook.Plaintext(*f.dst) {
			b.Warn(f.name, "http:// to another machine: the signed requests and the receipts cross the network unencrypted; use https://")
		}
	}
	name, err := b.String("secret_env", true)
	if err != nil {
		return nil, err
	}
	if err := b.EnvName("secret_env", name); err != nil {
		return nil, err
	}
	if cfg.Timeout, err = b.Duration("timeout", webhook.DefaultTimeout, maxTimeout); err != nil {
		return nil, err
	}
	if b.NoSecrets {
		return unarmed{action: b.Action, secretEnv: name}, nil
	}
	value := b.Getenv(name)
	if strings.TrimSpace(value) == "" {
		return nil, b.Errorf("secret_env", "%s is not set: put the signing secret (whsec_…) in that environment variable", name)
	}
	if cfg.Keys, err = stdwebhook.ParseSecrets(value); err != nil {
		return nil, b.Errorf("secret_env", "%s: %v", name, err)
	}
	x, err := webhook.New(b.Action, cfg)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return x, nil
}

// unarmed stands in for an executor built without its secret (Block.NoSecrets),
// for a command that only reads: such a command never calls it, and a call
// is refused before anything is sent.
type unarmed struct{ action, secretEnv string }

var _ workflow.Executor = unarmed{}

func (u unarmed) refusal() error {
	return fmt.Errorf("%s: built without its secret (%s) for a command that only reads; nothing was sent", u.action, u.secretEnv)
}

func (u unarmed) Check(context.Context, workflow.Action) error {
	return workflow.Transient(u.refusal())
}

func (u unarmed) Execute(context.Context, string, workflow.Action) (workflow.Receipt, error) {
	return workflow.Receipt{}, workflow.Transient(u.refusal())
}

func (u unarmed) Lookup(context.Context, string) (workflow.Receipt, bool, error) {
	return workflow.Receipt{}, false, u.refusal()
}

// reserved are prefixes of signoff's own variables: a program never sees them.
var reserved = []string{"SIGNOFF_", "SLACK_"}

func newCommand(b *Block) (workflow.Executor, error) {
	cfg := command.Config{Dir: b.Dir}
	var err error
	if cfg.Command, err = b.Strings("command", true); err != nil {
		return nil, err
	}
	if cfg.Lookup, err = b.Strings("lookup", false); err != nil {
		return nil, err
	}
	if cfg.Check, err = b.Strings("check", false); err != nil {
		return nil, err
	}
	names, err := b.Strings("env", false)
	if err != nil {
		return nil, err
	}
	for i, n := range names {
		field := fmt.Sprintf("env[%d]", i)
		if err := b.EnvName(field, n); err != nil {
			return nil, err
		}
		for _, p := range reserved {
			if strings.HasPrefix(strings.ToUpper(n), p) {
				return nil, b.Errorf(field, "%s is signoff's own; a program never sees %s* variables", n, p)
			}
		}
	}
	cfg.Env = command.EnvFrom(names, b.Getenv)
	if cfg.Timeout, err = b.Duration("timeout", command.DefaultTimeout, maxTimeout); err != nil {
		return nil, err
	}
	x, err := command.New(b.Action, cfg)
	if err != nil {
		// command.New names the field first: "lookup: cannot run …".
		field, msg, ok := strings.Cut(err.Error(), ": ")
		if ok && (field == "command" || field == "lookup" || field == "check") {
			return nil, b.Errorf(field, "%s", msg)
		}
		return nil, err
	}
	return x, nil
}
