package app

import (
	"fmt"
	"strings"

	"github.com/signoff-dev/signoff/callback"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/internal/stdwebhook"
)

// callbackDispatcher is serve's sender of run callbacks. With callbacks
// allowed, the secret in the variable api.callbacks.secret_env names must be
// set and readable, or serve does not start: every event would fail. Without
// an allow-list, rows queued before it was removed are still read, and show
// as failing (not allowed) instead of being sent.
func callbackDispatcher(a *app) (*callback.Dispatcher, error) {
	keys, err := callbackKeys(a.cfg, a.getenv)
	if err != nil {
		return nil, err
	}
	d := &callback.Dispatcher{Outbox: a.engine.Outbox(), Keys: keys, Logger: a.log, Failpoint: a.failpoint, ClaimFor: a.leaseTTL}
	if len(a.cfg.API.CallbackPrefixes) > 0 {
		d.Allowed = a.cfg.API.CallbackAllowed
	}
	return d, nil
}

// callbackKeys reads the callback signing secret when the config allows
// callbacks (nil when it allows none). The error never repeats the value.
func callbackKeys(cfg *config.Config, getenv func(string) string) ([][]byte, error) {
	ac := cfg.API
	if len(ac.CallbackPrefixes) == 0 {
		return nil, nil
	}
	value := ""
	if getenv != nil {
		value = getenv(ac.CallbackSecretEnv)
	}
	if strings.TrimSpace(value) == "" {
		return nil, usageError{fmt.Sprintf("%s is not set: api.callbacks allows callbacks, and they are signed with the secret (whsec_…) in that variable", ac.CallbackSecretEnv)}
	}
	keys, err := stdwebhook.ParseSecrets(value)
	if err != nil {
		return nil, usageError{fmt.Sprintf("%s (api.callbacks.secret_env): %v", ac.CallbackSecretEnv, err)}
	}
	return keys, nil
}
