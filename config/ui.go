package config

import (
	"fmt"
	"net/url"
	"strings"
)

// UIConfig is the web console serve mounts at /ui (package console). It is
// on when the config has a ui: section.
type UIConfig struct {
	Given bool // the config has a ui: section
	// ReadOnly: the console shows and never decides.
	ReadOnly bool
	// LocalLogin lets a visitor log in as any member of the roles by picking
	// one: for demos and tests, and refused unless serve listens on loopback.
	LocalLogin bool
	// SessionKeyFile holds the key that signs the console's sessions (at
	// least 32 bytes), outside the store; "" takes it from
	// SIGNOFF_UI_SESSION_KEY. A relative path is from the config's folder
	// (Config.Dir).
	SessionKeyFile string
	// BaseURL is where people reach the console, e.g.
	// https://signoff.example.com/ui: links to a run's page (a Slack message
	// asking to confirm an approval on the web) are BaseURL/runs/ID. ""
	// leaves them out.
	BaseURL string
}

type fileUI struct {
	ReadOnly       bool   `yaml:"read_only"`
	LocalLogin     bool   `yaml:"local_login"`
	SessionKeyFile string `yaml:"session_key_file"`
	BaseURL        string `yaml:"base_url"`
}

// uiOf reads the ui: section. Where its local login may be used depends on
// where serve listens, which serve checks.
func uiOf(fu *fileUI) (UIConfig, error) {
	if fu == nil {
		return UIConfig{}, nil
	}
	base, err := baseURL(fu.BaseURL)
	if err != nil {
		return UIConfig{}, err
	}
	return UIConfig{Given: true, ReadOnly: fu.ReadOnly, LocalLogin: fu.LocalLogin, SessionKeyFile: strings.TrimSpace(fu.SessionKeyFile), BaseURL: base}, nil
}

// baseURL checks ui.base_url: an absolute http(s) URL with a host and no
// query, fragment or user, given without its trailing slash.
func baseURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not a URL: %w", s, err)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		return "", fmt.Errorf("%q: give the console's full address, e.g. https://signoff.example.com/ui", s)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "", fmt.Errorf("%q: no query, fragment or user in the console's address", s)
	}
	return strings.TrimSuffix(s, "/"), nil
}
