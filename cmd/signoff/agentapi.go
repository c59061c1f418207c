package main

import (
	"github.com/signoff-dev/signoff/api"
	"github.com/signoff-dev/signoff/config"
)

// agentAPIConfig is the agent API's part of the config.
func agentAPIConfig(a *app) api.Config {
	ac := a.cfg.API
	c := api.Config{Engine: a.engine, Rate: ac.Rate, Burst: ac.Burst, Logger: a.log}
	for _, t := range ac.Tokens {
		c.Tokens = append(c.Tokens, apiToken(t))
	}
	return c
}

func apiToken(t config.APIToken) api.Token {
	return api.Token{ID: t.ID, SHA256: t.SHA256, Requester: t.Requester, Scopes: t.Scopes}
}
