package app

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/config"
)

// TestContainerFiles: the image is built from the source alone (no history,
// no local stores), says which port `serve` listens on, and the docs show
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
	if !regexp.MustCompile(`(?m)^EXPOSE 8080 9090$`).MatchString(docker) || !strings.Contains(docker, `CMD ["serve"]`) {
		t.Error("the Dockerfile does not expose 8080 for serve and 9090 for its metrics and probes")
	}
	// In a container, loopback is the container's own: the probes and the
	// metrics listen on the port the image exposes for them.
	if runtime := strings.Count(docker, "\nFROM ") - 1; strings.Count(docker, "SIGNOFF_ADMIN_ADDR=:9090") != runtime {
		t.Error("a runtime stage of the Dockerfile does not serve metrics and probes on :9090")
	}
	doc := docSection(t, "docs/operations.md", "A container")
	for _, want := range []string{"docker run", "-p 8080:8080", "SIGNOFF_CONFIG=/etc/signoff/signoff.yaml", "chown 65532:65532 /data"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the container example lacks %q", want)
		}
	}
	// The volume it creates is the one it hands to the image's user, and the
	// one serve's container mounts at /data.
	var lines []string
	for _, block := range blocksOf(doc, "sh") {
		for _, l := range shLines(block) {
			lines = append(lines, l.cmd)
		}
	}
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "docker volume create ") {
		t.Fatalf("want the volume made, handed over and mounted; got %q", lines)
	}
	volume := strings.Fields(lines[0])[3]
	if !strings.Contains(lines[1], "-v "+volume+":/data ") || !strings.HasSuffix(lines[1], "chown 65532:65532 /data") ||
		!strings.Contains(lines[2], "-v "+volume+":/data ") {
		t.Errorf("the volume %s is not the one handed over and mounted: %q", volume, lines[1:])
	}
	if n := strings.Count(docker, "USER nonroot:nonroot"); n != 2 || !strings.Contains(docker, "useradd --uid 65532 --gid 65532") {
		t.Errorf("the images do not both run as 65532:65532, the owner the docs give /data")
	}
	if def := regexp.MustCompile(`"addr", "(:\d+)"`).FindStringSubmatch(read("internal/app/serve.go")); def == nil || def[1] != ":8080" {
		t.Errorf("serve's default address %v is not the exposed port", def)
	}
	if defaultAdminAddr != "127.0.0.1:9090" {
		t.Errorf("serve's default admin address %s is not loopback on the port the image exposes", defaultAdminAddr)
	}
}

// TestContainerRunPassesEverySecret: the docs' `docker run` passes, as
// -e NAME, every secret the worked example config names (each webhook's
// secret_env, the callbacks' secret, the variables a command sees) besides
// the Slack tokens and the keys; and since that config has a command
// executor, it runs the Debian-based target, which has the program's
// interpreter, while the default image stays the distroless one.
func TestContainerRunPassesEverySecret(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile("../../" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cfg, err := config.Load("../../examples/signoff.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SIGNOFF_KEYS"}
	if cfg.API.CallbackSecretEnv != "" {
		want = append(want, cfg.API.CallbackSecretEnv)
	}
	commands := false
	for name, ac := range cfg.Actions {
		if env, ok := ac.ExecutorFields["secret_env"].(string); ok {
			want = append(want, env)
		}
		if ac.Executor == "command" {
			commands = true
			names, _ := ac.ExecutorFields["env"].([]any)
			for _, n := range names {
				if n, ok := n.(string); ok {
					want = append(want, n)
				} else {
					t.Fatalf("action %s: env %v", name, names)
				}
			}
		}
	}
	if !commands || !slices.Contains(want, "DEPLOYER_SIGNING_SECRET") {
		t.Fatalf("the worked example has no command executor or webhook secret; names %v", want)
	}

	// The `docker run -d` command of the docs.
	doc := docSection(t, "docs/operations.md", "A container")
	var run string
	for _, block := range blocksOf(doc, "sh") {
		for _, l := range shLines(block) {
			if strings.HasPrefix(l.cmd, "docker run -d ") {
				run = l.cmd
			}
		}
	}
	if run == "" {
		t.Fatal("the docs have no docker run -d")
	}
	words := shellWords(t, run)
	var passed []string
	for i, w := range words {
		if w == "-e" && i+1 < len(words) {
			name, _, _ := strings.Cut(words[i+1], "=")
			passed = append(passed, name)
		}
	}
	for _, name := range want {
		if !slices.Contains(passed, name) {
			t.Errorf("the docs' docker run does not pass %s (it passes %v)", name, passed)
		}
	}
	if image := words[len(words)-1]; image != "signoff:debian" {
		t.Errorf("the docs run %s for a config with a command executor, want signoff:debian", image)
	}
	if !strings.Contains(doc, "docker build --target debian -t signoff:debian .") || !strings.Contains(doc, "interpreter must be in the image") {
		t.Error("the docs do not say that a command's interpreter must be in the image, built with --target debian")
	}
	docker := read("Dockerfile")
	froms := regexp.MustCompile(`(?m)^FROM (\S+)(?: AS (\S+))?$`).FindAllStringSubmatch(docker, -1)
	var debian bool
	for _, f := range froms {
		debian = debian || f[2] == "debian" && strings.HasPrefix(f[1], "debian:")
	}
	if !debian || !strings.Contains(docker, "python3") {
		t.Errorf("the Dockerfile has no Debian-based target debian with python3: %v", froms)
	}
	if last := froms[len(froms)-1]; !strings.HasPrefix(last[1], "gcr.io/distroless/static") {
		t.Errorf("the default (last) target is %s, want the distroless one", last[1])
	}
}
