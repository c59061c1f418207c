package executor

import (
	"context"
	"fmt"
	"os"
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

func (u unarmed) Check(context.Context, record.Action) error {
	return workflow.Transient(u.refusal())
}

func (u unarmed) Execute(context.Context, string, record.Action) (record.Receipt, error) {
	return record.Receipt{}, workflow.Transient(u.refusal())
}

func (u unarmed) Lookup(context.Context, string) (record.Receipt, bool, error) {
	return record.Receipt{}, false, u.refusal()
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
	paths, err := b.Mapping("paths", "read", "write")
	if err != nil {
		return nil, err
	}
	if cfg.Read, err = b.StringsOf("paths.read", paths["read"], false); err != nil {
		return nil, err
	}
	if cfg.Write, err = b.StringsOf("paths.write", paths["write"], false); err != nil {
		return nil, err
	}
	cfg.Private = b.Private
	if cfg.RunAs, err = runAs(b); err != nil {
		return nil, err
	}
	x, err := command.New(b.Action, cfg)
	if err != nil {
		// command.New names the field first: "lookup: cannot run …",
		// "paths.read[0]: … does not exist".
		field, msg, ok := strings.Cut(err.Error(), ": ")
		if ok && (strings.HasPrefix(field, "command") || strings.HasPrefix(field, "lookup") || strings.HasPrefix(field, "check") || strings.HasPrefix(field, "paths.")) {
			return nil, b.Errorf(field, "%s", msg)
		}
		return nil, err
	}
	for _, m := range x.Missing() {
		field, msg, _ := strings.Cut(m, ": ")
		b.Warn(field, "%s", msg)
	}
	if landlockABI() == 0 {
		b.Warn("paths", "this kernel has no Landlock (Linux 5.13 or later, with landlock among its LSMs): the program runs unconfined and can read and write whatever signoff's user can, the store and the integrity keys too")
	}
	for _, r := range x.Rules() {
		if (r.Path == "/" || r.Path == "/proc") && os.Geteuid() == 0 && cfg.RunAs == nil {
			b.Warn("paths", "%s is readable and signoff runs as root: a program as root can read signoff's environment in /proc, its secrets with it; set run_as", r.Path)
			break
		}
	}
	return x, nil
}

// landlockABI is the kernel's Landlock version (a variable for tests).
var landlockABI = command.LandlockABI

// runAs reads run_as: {user: NAME}. Starting a program as another user
// needs root; for a command that only reads that is a warning (serve may
// run as root where config check does not).
func runAs(b *Block) (*command.User, error) {
	m, err := b.Mapping("run_as", "user")
	if err != nil || m == nil {
		return nil, err
	}
	name, ok := m["user"].(string)
	if !ok || strings.TrimSpace(name) == "" {
		return nil, b.Errorf("run_as.user", "required: the user the program runs as")
	}
	u, err := command.LookupUser(name)
	if err != nil {
		return nil, b.Errorf("run_as.user", "%v", err)
	}
	if euid := os.Geteuid(); euid != 0 && euid != u.UID {
		if !b.NoSecrets {
			return nil, b.Errorf("run_as.user", "signoff runs as uid %d, not root: it cannot start a program as %s (uid %d)", euid, u.Name, u.UID)
		}
		b.Warn("run_as.user", "signoff runs as uid %d here, not root: a command that runs programs must run as root to start them as %s", euid, u.Name)
	}
	return u, nil
}
