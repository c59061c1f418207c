package config

import "strings"

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
}

type fileUI struct {
	ReadOnly       bool   `yaml:"read_only"`
	LocalLogin     bool   `yaml:"local_login"`
	SessionKeyFile string `yaml:"session_key_file"`
}

// uiOf reads the ui: section. Where its local login may be used depends on
// where serve listens, which serve checks.
func uiOf(fu *fileUI) UIConfig {
	if fu == nil {
		return UIConfig{}
	}
	return UIConfig{Given: true, ReadOnly: fu.ReadOnly, LocalLogin: fu.LocalLogin, SessionKeyFile: strings.TrimSpace(fu.SessionKeyFile)}
}
