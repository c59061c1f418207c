package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestContainerFiles: the image is built from the source alone (no history,
// no local stores), says which port `serve` listens on, and the README shows
// how to run it with a config and a volume its user owns.
func TestContainerFiles(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile("../../" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	ignore := strings.Fields(read(".dockerignore"))
	for _, want := range []string{".git", "*.db", "*.db-wal", "*.keys"} {
		if !strings.Contains(strings.Join(ignore, " "), want) {
			t.Errorf(".dockerignore lacks %s", want)
		}
	}
	docker := read("Dockerfile")
	if !regexp.MustCompile(`(?m)^EXPOSE 8080$`).MatchString(docker) || !strings.Contains(docker, `CMD ["serve"]`) {
		t.Error("the Dockerfile does not expose 8080 for serve")
	}
	readme := read("README.md")
	for _, want := range []string{"docker run", "-p 8080:8080", "SIGNOFF_CONFIG=/etc/signoff.yaml", "chown 65532:65532 /data"} {
		if !strings.Contains(readme, want) {
			t.Errorf("the README's container example lacks %q", want)
		}
	}
	if def := regexp.MustCompile(`"addr", "(:\d+)"`).FindStringSubmatch(read("cmd/signoff/serve.go")); def == nil || def[1] != ":8080" {
		t.Errorf("serve's default address %v is not the exposed port", def)
	}
}
