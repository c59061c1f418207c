package bot_test

import (
	"os"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/config"
)

// docConfig is the config of the first yaml block of section heading of
// docs/configuration.md, loaded without warnings: the doc shows the config
// the tests run.
func docConfig(t *testing.T, heading string) *config.Config {
	t.Helper()
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("docs/configuration.md has no section %q", heading)
	}
	_, block, ok := strings.Cut(sec, "```yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatalf("%q has no yaml block", heading)
	}
	cfg, err := config.Parse("configuration.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 0 {
		t.Fatalf("warnings: %v", cfg.Warnings)
	}
	return cfg
}
