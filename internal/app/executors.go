package app

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/executor"
	"github.com/signoff-dev/signoff/mcpgateway"
	"github.com/signoff-dev/signoff/mcpserver"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/workflow"
)

// usesDemo reports whether an action of cfg runs on the practice shop: only
// then is the shop's database opened.
func usesDemo(cfg *config.Config) bool {
	for _, ac := range cfg.Actions {
		if ac.Executor == "demo" {
			return true
		}
	}
	return false
}

// registry is every executor type this build has: the built-in ones and the
// practice shop's, bound to shop (nil: only checked, never called).
func registry(shop *demo.Shop) executor.Registry {
	r := executor.Builtin()
	demoExec := demo.Executors(shop, "signoff")
	r["demo"] = func(b *executor.Block) (workflow.Executor, error) {
		x, ok := demoExec[b.Action]
		if !ok {
			return nil, errors.New("the demo executor has no action " + quote(b.Action) + " (it has " + strings.Join(slices.Sorted(maps.Keys(demoExec)), ", ") + ")")
		}
		return x, nil
	}
	// An action the agent that asked carries out itself (a permission
	// prompt's): signoff records the grant.
	r[mcpserver.ExecutorType] = func(*executor.Block) (workflow.Executor, error) { return mcpserver.Granted{}, nil }
	// An upstream MCP tool declared with a schema: carried out by the
	// upstream's session where one is connected (connectUpstreams).
	r[mcpgateway.ExecutorType] = func(*executor.Block) (workflow.Executor, error) { return mcpgateway.Placeholder(), nil }
	return r
}

func quote(s string) string { return `"` + s + `"` }

// buildActions binds every action of the config to its executor and schema. A
// nil shop only checks that every executor and action exists; the problems it
// finds are config errors, with the line of the field. The warnings are about
// executor blocks (a plaintext URL, a timeout past the lease).
//
// readOnly is for a command that only reads and so never calls an executor:
// the secrets the blocks name are neither required nor read, so that such a
// command works where they are not set (executor.Block.NoSecrets).
//
// private are signoff's own files (privateFiles), out of every program's reach.
func buildActions(cfg *config.Config, shop *demo.Shop, getenv func(string) string, readOnly bool, private []string) (map[string]*workflow.ActionSpec, []*config.Error, error) {
	reg := registry(shop)
	schemas := demo.Schemas()
	leaseTTL := 30 * time.Second
	if d, err := time.ParseDuration(getenvOr(getenv)("SIGNOFF_LEASE_TTL")); err == nil && d > 0 {
		leaseTTL = d
	}
	out := map[string]*workflow.ActionSpec{}
	argSpecs := map[string]*policy.ActionSpec{}
	var warnings []*config.Error
	// In name order, so that the same config always gets the same first error.
	for _, name := range slices.Sorted(maps.Keys(cfg.Actions)) {
		ac := cfg.Actions[name]
		path := config.ActionPath(name) + ".executor"
		x, warns, err := reg.Build(executor.Block{
			Action: name, Type: ac.Executor, Fields: ac.ExecutorFields, Dir: cfg.Dir(),
			Getenv: getenvOr(getenv), CallLimit: leaseTTL / 2, NoSecrets: readOnly, Private: private,
		})
		if err != nil {
			var fe *executor.FieldError
			if errors.As(err, &fe) && fe.Field != "" {
				if fe.Field == "type" && ac.ExecutorFields == nil {
					// The short form has no type: field; its value is the type.
					return nil, nil, cfg.Errorf(path, "%v", fe.Err)
				}
				return nil, nil, cfg.Errorf(path+"."+fe.Field, "%v", fe.Err)
			}
			return nil, nil, cfg.Errorf(path, "%v", err)
		}
		for _, w := range warns {
			warnings = append(warnings, cfg.Errorf(path+"."+w.Field, "%v", w.Err))
		}
		schema := ac.Schema
		if schema == nil && ac.Executor == "demo" {
			schema = schemas[name]
		}
		spec, err := workflow.NewActionSpec(name, schema, x, ac.Redact)
		if err != nil {
			return nil, nil, cfg.Errorf(config.ActionPath(name), "%v", err)
		}
		spec.ReconcileWithin = ac.ReconcileWithin
		out[name] = spec
		argSpecs[name] = spec.ActionSpec
	}
	// A read of an argument the schema does not have fails wherever the
	// argument is missing, and hands the run to a person: most often a typo.
	unknown := cfg.Policy.UnknownArgs(argSpecs)
	for i := 0; i < len(unknown); {
		u := unknown[i]
		var on []string
		for ; i < len(unknown) && unknown[i].Rule == u.Rule && unknown[i].Arg == u.Arg; i++ {
			on = append(on, unknown[i].Action)
		}
		whose := fmt.Sprintf("%s's schema (its properties: %s)", u.Action, strings.Join(u.Known, ", "))
		if len(on) > 1 {
			whose = "the schemas of " + strings.Join(on, ", ")
		}
		warnings = append(warnings, cfg.Errorf(fmt.Sprintf("policy.rules[%d].when", u.Rule),
			"reads action.args.%s, which is not a property of %s: where it is missing the rule cannot decide, and the run is handed to a person",
			u.Arg, whose))
	}
	return out, warnings, nil
}

// privateFiles are the files no command executor's program may reach: a
// SQLite store (with its -wal and -shm) and the integrity key files, given
// or the default one beside the store, whether they exist yet or not.
func privateFiles(o options) []string {
	var out []string
	if !isPostgres(o.db) && o.db != "" {
		out = append(out, o.db, defaultKeysFile(o.db))
	}
	if o.keys != "" {
		out = append(out, o.keys)
	}
	return out
}

func getenvOr(getenv func(string) string) func(string) string {
	if getenv == nil {
		return func(string) string { return "" }
	}
	return getenv
}

// practiceShop is the shop for the shop commands that write, refused for a
// config without demo actions (the shop is not opened then).
func (a *app) practiceShop() (*demo.Shop, error) {
	if a.shop == nil {
		return nil, usageError{"the config has no action with executor: demo, so the practice shop is not in use"}
	}
	return a.shop, nil
}

// executorTarget says where an action's executor acts, for config check: the
// URL a webhook posts to, the program a command runs.
func executorTarget(ac config.ActionConfig) string {
	switch v := ac.ExecutorFields["url"].(type) {
	case string:
		return "→ " + term(v)
	}
	if argv, ok := ac.ExecutorFields["command"].([]any); ok && len(argv) > 0 {
		if s, ok := argv[0].(string); ok {
			return "→ " + term(s)
		}
	}
	return ""
}
