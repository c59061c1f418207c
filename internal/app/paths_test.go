package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const pathsConfig = `roles:
  - {name: agent, members: [agent:ops]}
policy:
  revision: "1"
  rules:
    - {name: all, when: "true", risk: low}
actions:
  rotate_key:
    schema: {type: object}
    executor:
      type: command
      command: [./probe]
      env: [OUT, STORE_DIR]
      paths: PATHS
`

// TestConfigRefusesPathsToSignoffsOwnFiles: a command executor's paths may
// not name the store or the keys beside it; config check says where, and
// creates nothing.
func TestConfigRefusesPathsToSignoffsOwnFiles(t *testing.T) {
	for _, tt := range []struct{ paths, want string }{
		{"{read: [/usr, signoff.keys]}", `signoff.yaml:14: actions.rotate_key.executor.paths.read[1]: DIR/signoff.keys is signoff's own (the store or the integrity keys): no program may reach it`},
		{"{write: [signoff.db]}", `signoff.yaml:14: actions.rotate_key.executor.paths.write[0]: DIR/signoff.db is signoff's own (the store or the integrity keys): no program may reach it`},
		{"{exec: [/usr]}", `signoff.yaml:14: actions.rotate_key.executor.paths.exec: unknown field (known: read, write)`},
	} {
		t.Run(tt.paths, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"signoff.keys", "signoff.db"} {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg := strings.Replace(pathsConfig, "PATHS", tt.paths, 1)
			if err := os.WriteFile(filepath.Join(dir, "signoff.yaml"), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, "probe"), []byte("#!/bin/sh\n"), 0o755)
			code, out, errs := signoff(t, dir, "--config", filepath.Join(dir, "signoff.yaml"), "config", "check")
			want := strings.ReplaceAll(tt.want, "DIR", dir)
			if code != exitRefused || !strings.Contains(errs, want) {
				t.Fatalf("exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", code, exitRefused, want, out, errs)
			}
		})
	}
}
