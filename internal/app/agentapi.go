package app

import (
	"github.com/signoff-dev/signoff/api"
	"github.com/signoff-dev/signoff/config"
)

// agentAPIConfig is the agent API's part of the config. Its list cursors are
// sealed with a key derived from the integrity keys, which are kept outside
// the store and are the same on every replica, so that a cursor outlives a
// restart and is taken by any replica; without integrity keys the API seals
// with a key of this process alone.
func agentAPIConfig(a *app) api.Config {
	ac := a.cfg.API
	c := api.Config{Engine: a.engine, Rate: ac.Rate, Burst: ac.Burst, Logger: a.log, CursorKeys: a.keys.Derive("api-cursor")}
	for _, t := range ac.Tokens {
		c.Tokens = append(c.Tokens, apiToken(t))
	}
	return c
}

func apiToken(t config.APIToken) api.Token {
	return api.Token{ID: t.ID, SHA256: t.SHA256, Requester: t.Requester, Scopes: t.Scopes}
}
