package workflow_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependenciesPointOneWay keeps the layering of the module: cmd → bot, api,
// demo, storage/* → workflow, with each driver and SDK imported by one package.
func TestDependenciesPointOneWay(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/signoff-dev/signoff/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/signoff-dev/signoff/"
	only := map[string]string{ // import → the one package allowed to use it
		"github.com/mattn/go-sqlite3": mod + "storage/sqlite",
		"github.com/jackc/pgx/v5":     mod + "storage/postgres",
		"github.com/slack-go/slack":   mod + "bot",
		"github.com/labstack/echo/v4": "",
		"github.com/spf13/cobra":      mod + "cmd/signoff",
	}
	echoUsers := map[string]bool{mod + "cmd/signoff": true, mod + "bot": true, mod + "api": true}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		for _, imp := range imports {
			for lib, owner := range only {
				if imp != lib && !strings.HasPrefix(imp, lib+"/") {
					continue
				}
				if lib == "github.com/labstack/echo/v4" {
					if !echoUsers[pkg] {
						t.Errorf("%s imports %s; only cmd, bot and api may", pkg, imp)
					}
					continue
				}
				if pkg != owner && !strings.HasPrefix(pkg, owner+"/") {
					t.Errorf("%s imports %s; only %s may", pkg, imp, owner)
				}
			}
			if pkg == mod+"workflow" && strings.HasPrefix(imp, mod) {
				t.Errorf("workflow imports %s; the domain depends on no other package of the module", imp)
			}
			if strings.HasPrefix(pkg, mod+"storage/") && (strings.HasPrefix(imp, mod+"cmd") || strings.HasPrefix(imp, mod+"bot") || strings.HasPrefix(imp, mod+"demo")) {
				t.Errorf("%s imports %s; storage depends only on workflow", pkg, imp)
			}
		}
	}
}
